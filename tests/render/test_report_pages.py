"""The report without a browser: the loader's numbers, the folder's layout, and untrusted names made
inert in HTML and in the JSON inside script elements."""

from __future__ import annotations

import json
import re

import pytest

from kbase.errors import InputError
from kbase.render.report.safe import html_text, plot_text, script_json

from helpers.report_fixtures import EVIL_NAME, evil_kernel


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """Six commits, a step at commit 3, the hostile kernel; the report written."""
    import kbase
    from kbase.render.report.site import build_report
    from kbase.store import open_store
    from kbase.synth.history import HistorySpec, InjectedStep, _kernel, generate_history

    root = tmp_path_factory.mktemp("small")
    step = InjectedStep(3, _kernel("nvjet_hsh_256x128"), 1.3, "gemm: slower tiles")
    history = generate_history(root / "h", HistorySpec(commits=6, steps=[step], extra_kernels=[evil_kernel()]))
    store = open_store(history.db_url, readonly=True)
    try:
        data = kbase.report_data(kbase.Settings.load(repo=history.repo, db=history.db_url), before=2, after=3)
        pages = build_report(data, root / "report")
        yield history, store, data, root / "report", pages
    finally:
        store.close()


def _figures(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="kbase-figures">(.*?)</script>', page, re.DOTALL)
    assert m
    return json.loads(m.group(1), parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))


def test_script_json_cannot_end_its_element():
    text = script_json({"n": "</script><!--<script>&\u2028\u2029", "x": float("nan")})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"n": "</script><!--<script>&\u2028\u2029", "x": None}


def test_escapers():
    assert html_text('<a href="x">\x07') == "&lt;a href=&quot;x&quot;&gt;\\x07"
    assert plot_text("$x$ <b>&") == "&#36;x&#36; &lt;b&gt;&amp;"
    assert "<br>" in plot_text("y" * 250, 100)


def test_loader_matches_the_stored_leaderboards(small):
    history, store, data, _, _ = small
    assert [p.ref.commit for p in data.commits] == history.commits
    assert [p.ref.subject for p in data.commits] == history.subjects
    lb = store.reader.leaderboard(store.reader.baseline(history.baseline_ids[4]))
    top = data.kernels[0]
    want = float(next(r["per_iter_ns"] for r in lb.rows if r["name"] == top.name))
    assert top.per_iter_ns[4] == pytest.approx(want, rel=1e-9)
    assert top.band_low_ns[4] <= top.per_iter_ns[4] * 1.02 and top.band_high_ns[4] >= top.per_iter_ns[4] * 0.98
    assert data.commits[4].kernel_ns == pytest.approx(lb.summary.kernel_ns_per_iter, rel=1e-9)
    step = next(k for k in data.kernels if k.name.startswith("nvjet_hsh_256x128"))
    assert step.per_iter_ns[3] / step.per_iter_ns[2] == pytest.approx(1.3, rel=0.05)
    assert data.gate is not None and data.gate.verdict.status == "fail"
    assert data.leaderboard.ref.commit == history.commits[3]


def test_folder_layout(small):
    _, _, _data, out, pages = small
    assert pages[0].name == "index.html" and {"diff.html", "leaderboard.html"} <= {p.name for p in pages}
    assert sorted(p.name for p in (out / "assets").iterdir()) == [
        "LICENSE.plotly.txt", "plotly-basic.min.js", "report.css", "report.js"]
    manifest = json.loads((out / "kbase-report.json").read_text())
    assert manifest["pages"] == [p.name for p in pages] and manifest["commits"] == 6
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert not re.search(r'(src|href)="(https?:)?//', html)  # nothing from the network
        assert html.count('src="assets/plotly-basic.min.js"') == 1
        _figures(html)


def test_hostile_name_is_inert_everywhere(small):
    _, _, data, _, pages = small
    assert any(k.name == EVIL_NAME for k in data.kernels)
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert "<script>alert" not in html and "<b>bold" not in html and "<!-- @here" not in html
        assert html.count("</script>") == 3  # the figures' JSON, plotly, report.js: nothing else closes one
        assert "\u2028" not in html and "\x07" not in html


def test_refuses_a_folder_that_is_not_a_report(small, tmp_path):
    from kbase.render.report.site import build_report

    _, _, data, out, _ = small
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not empty"):
        build_report(data, tmp_path)
    assert build_report(data, out)  # a previous report is replaced


def test_an_unchanged_pair_says_no_change_at_the_iterations_scale(small):
    """Two commits before the step: nothing changed beyond noise. The waterfall says so and keeps an axis of at
    least 1% of the iteration on either side of the totals instead of zooming until its noise fills the chart."""
    import kbase
    from kbase.render.diff import diff_doc
    from kbase.render.report.diff_figure import diff_figure
    from kbase.render.report.figures import time_unit
    from kbase.render.report.pages import diff_page

    history, _, _, _, _ = small
    data = kbase.report_data(kbase.Settings.load(repo=history.repo, db=history.db_url), before=0, after=1)
    doc = diff_doc(data.gate.comparison, data.gate.verdict)
    assert not [k for k in doc["kernels"] if k["class"] in ("regressed", "improved", "new", "gone")]
    figure = diff_figure(doc)
    lo, hi = figure["layout"]["xaxis"]["range"]
    t = doc["totals"]
    _, div = time_unit(max(t["kernel"]["before"], t["kernel"]["after"]))
    wall = t["iteration_wall"]["before"] / div
    assert hi - lo >= 0.02 * wall and lo <= t["kernel"]["before"] / div - 0.01 * wall
    assert abs(t["kernel"]["after"] - t["kernel"]["before"]) / div < 0.05 * (hi - lo)  # the noise is a sliver
    assert any(a["text"].startswith("no change") for a in figure["layout"]["annotations"])
    assert "No change: no kernel changed beyond noise" in diff_page(doc)[0]


def test_report_tables_state_one_unit_per_column(small):
    """The trend's kernel and steps tables and the leaderboard page: every time column in one unit."""
    import re

    from helpers.tables import units as units_of

    _, _, _, out, _ = small
    for page, names in (("index.html", ("first", "latest", "before/iter", "after/iter")),
                        ("leaderboard.html", ("Total", "Avg", "Min–Max", "/iter/GPU"))):
        html = (out / page).read_text(encoding="utf-8")
        checked = 0
        for table in re.findall(r"<table>(.*?)</table>", html, re.DOTALL):
            head = [re.sub("<.*?>", "", h) for h in re.findall(r"<th>(.*?)</th>", table)]
            rows = [re.findall(r"<td[^>]*>(.*?)</td>", tr) for tr in re.findall(r"<tr><td.*?</tr>", table)]
            for name in (n for n in names if n in head):
                cells = [re.sub("<.*?>", "", r[head.index(name)]) for r in rows]
                assert len(units_of(cells)) == 1, (page, name, cells)
                checked += 1
        assert checked >= 2, page

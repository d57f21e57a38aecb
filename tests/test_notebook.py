"""kbase in a notebook: ``dir(kbase)`` lists the API; every result object has a short one-line ``repr`` (what it
is and its headline numbers) and a small HTML table (``_repr_html_``) in which a hostile kernel name stays text;
history, steps and baselines offer ``.table`` DataFrames like the leaderboard.

The objects come from a generated 6-commit history whose commit 3 makes a kernel with a hostile name 30% slower.
"""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser

import pytest

import kbase

from helpers.report_fixtures import EVIL_NAME, EVIL_SHORT, evil_kernel
from helpers.shared import REPO

pytestmark = pytest.mark.slow

ALLOWED_TAGS = {"div", "p", "b", "small", "table", "thead", "tbody", "tr", "th", "td"}


@pytest.fixture(scope="module")
def objects(tmp_path_factory):
    from kbase.synth.history import HistorySpec, InjectedStep, generate_history

    evil = evil_kernel()
    h = generate_history(tmp_path_factory.mktemp("nb") / "h",
                         HistorySpec(commits=6, steps=[InjectedStep(3, evil.name, 1.3, "evil: slower")], iterations=4,
                                     extra_kernels=[evil]))
    settings = kbase.Settings.load(repo=h.repo, db=h.db_url, name=h.workload, gpu_hour_cost=6.77, gpus=8)
    export = h.root / "exports" / "c005.sqlite"
    return {
        "Leaderboard": kbase.top(export, settings),
        "SnapshotResult": kbase.snapshot(export, settings, rev=h.commits[-1]),
        "StoredLeaderboard": kbase.baseline("@1", settings),
        "LeaderboardRows": kbase.baseline("@1", settings).leaderboard,
        "Comparison": kbase.compare(h.commits[2], h.commits[3], settings),
        "GateResult": kbase.gate(h.commits[2], h.commits[3], settings),
        "KernelHistory": kbase.history(EVIL_NAME, settings),
        "StepsReport": kbase.steps(settings),
        "Baselines": kbase.baselines(settings),
        "BudgetResult": kbase.budget("@4", settings),
    }


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.text = ""

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)

    def handle_data(self, data):
        self.text += data


def test_dir_lists_the_api_and_import_stays_light():
    names = dir(kbase)
    assert set(kbase.__all__) <= set(names) and "__version__" in names
    for call in ("gate", "compare", "snapshot", "report_data", "history", "steps", "baselines", "Settings"):
        assert call in names
    code = ("import sys, kbase; names = dir(kbase); "
            "print(int('gate' in names), int('kbase.api' in sys.modules), int('pandas' in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.split() == ["1", "0", "0"], out  # dir() lists the API without loading it


@pytest.mark.parametrize("kind", ["Leaderboard", "SnapshotResult", "StoredLeaderboard", "LeaderboardRows", "Comparison",
                                  "GateResult", "KernelHistory", "StepsReport", "Baselines", "BudgetResult"])
def test_short_repr_and_escaped_html(objects, kind):
    obj = objects[kind]
    assert type(obj).__name__ == kind
    text = repr(obj)
    assert text.startswith(f"<{kind}") and text.endswith(">") and "\n" not in text and len(text) <= 500, text
    assert not any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 for c in text), text  # names are inert here too
    html = obj._repr_html_()
    parsed = _Tags()
    parsed.feed(html)
    assert parsed.tags <= ALLOWED_TAGS, parsed.tags  # the name's <b>, <script>, <!-- never became markup
    assert "<table>" in html and len(html) < 20_000
    if kind not in ("Baselines", "BudgetResult"):  # a budget names no kernel
        assert EVIL_SHORT in parsed.text or EVIL_NAME.split("(")[0][:40] in parsed.text, (kind, parsed.text[:500])


def test_reprs_state_the_headline_numbers(objects):
    gate = objects["GateResult"]
    assert repr(gate).startswith("<GateResult FAIL (exit 1): failing: evil_kernel")
    assert "+30" in repr(gate) or "+29" in repr(gate)
    assert "/month at 8 GPUs" in repr(objects["Comparison"])  # the settings' pricing: the cost per month
    lb = objects["Leaderboard"]
    assert f"{len(lb.records()):,} kernels" in repr(lb)
    assert repr(objects["SnapshotResult"]).startswith("<SnapshotResult: already stored as @6 ")
    assert "baseline(s)" in repr(objects["KernelHistory"]) and "step(s)" in repr(objects["StepsReport"])


def test_tables_are_dataframes(objects):
    import pandas as pd

    h = objects["KernelHistory"]
    t = h.table
    assert isinstance(t, pd.DataFrame) and len(t) == len(h.rows) == 6
    assert {"commit", "per_iter_ns", "subject", "commit_date", "change_pct"} <= set(t.columns)
    steps = objects["StepsReport"]
    assert isinstance(steps.table, pd.DataFrame) and len(steps.table) == len(steps.steps) >= 1
    assert {"name", "rel", "effect", "subject", "commit_date"} <= set(steps.table.columns)
    assert steps.table["subject"].tolist()[0] == "evil: slower"
    b = objects["Baselines"]
    assert isinstance(b, list) and isinstance(b.table, pd.DataFrame) and len(b.table) == len(b) == 6
    assert b.table["subject"].tolist()[-1] == "train: housekeeping change 0"
    assert str(b.table["commit_date"].dtype).startswith("datetime64")
    assert isinstance(objects["Comparison"].table, pd.DataFrame)
    assert isinstance(objects["LeaderboardRows"].table, pd.DataFrame)


def test_budget_html_states_the_four_blocks_and_the_step(objects):
    """``kbase.budget``'s table: the four blocks per iteration per GPU adding up to the window, their shares, the
    step — the stored budget's numbers, formatted (nothing recomputed)."""
    from kbase.analysis.budget import BLOCK_LABELS, BLOCKS
    from kbase.render.budget import step_line
    from kbase.units import fmt_pct

    result = objects["BudgetResult"]
    b = result.budget
    parsed = _Tags()
    parsed.feed(result._repr_html_())
    for k in BLOCKS:
        assert f"{BLOCK_LABELS[k]}" in parsed.text and fmt_pct(b.share(k)) in parsed.text
    assert "GPU window" in parsed.text and "100%" in parsed.text
    assert step_line(b) in parsed.text and "@4" in parsed.text
    assert sum(b.share(k) for k in BLOCKS) == pytest.approx(1.0)


def test_comparison_and_gate_html_show_the_step_verdict(objects):
    """The step's verdict line as ``kbase diff`` prints it (``render.budget.step_verdict_lines`` of the diff's own
    budget object), in the Comparison's and the GateResult's table."""
    from kbase.render.budget import step_verdict_lines
    from kbase.render.diff import diff_doc

    for kind in ("Comparison", "GateResult"):
        obj = objects[kind]
        c = obj if kind == "Comparison" else obj.comparison
        line = step_verdict_lines(diff_doc(c)["budget"])[0]
        assert line.startswith("step per iteration")
        parsed = _Tags()
        parsed.feed(obj._repr_html_())
        assert line in parsed.text and "what grew (GPU time budget per iteration per GPU)" in parsed.text

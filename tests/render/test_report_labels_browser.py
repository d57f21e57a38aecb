"""The report's labels in Chromium at a phone's width (390 px) and a laptop's (1280 px), on short histories —
where commit ticks sat 75 px apart and collided (``6cebb7c2477946``) — generated, and on the real ResNet-50
captures of ../shared/data: no two labels of any chart overlap on any page, and the top-kernels chart names
distinct kernels distinctly (``#id``), brackets balanced. Uses ``test_report_browser``'s page driver and
layout check (Debian's chromium through Playwright; skipped, with why, without them)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from test_report_browser import LAYOUT, WIDTHS, _open, browser, layout_problems  # noqa: F401 - browser: a fixture
from test_report_labels import balanced

from helpers.cli import run_kbase

pytestmark = pytest.mark.slow

KINETO = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "kineto"


def _problems(b, site: Path) -> list[str]:
    """Layout problems of the site's pages (each page kind once: the kernel pages share one layout) at both
    widths, and checks the top-kernels chart's labels at 390 px."""
    kernel_pages = sorted(site.glob("kernel-*.html"))[:2]
    found = []
    for width in WIDTHS:
        for page_path in [p for p in sorted(site.glob("*.html")) if not p.name.startswith("kernel-")] + kernel_pages:
            page = _open(b, page_path, width)
            try:
                found += [f"{width} px {page_path.name}: {p}" for p in layout_problems(page.page.evaluate(LAYOUT), width)]
                found += [f"{width} px {page_path.name}: {p}" for p in page.problems]
                if page_path.name == "leaderboard.html" and width == 390:
                    ticks = page.page.evaluate(
                        "() => [...document.querySelectorAll('#fig-top .ytick text')].map(e => e.textContent)")
                    assert len(ticks) == len(set(ticks)) and all(balanced(t.split(" #")[0]) for t in ticks), ticks
            finally:
                page.close()
    return found


@pytest.mark.parametrize("commits", [3, 5])
def test_short_generated_histories_read_at_390_and_1280(browser, tmp_path, commits):  # noqa: F811
    from kbase.synth.history import HistorySpec, InjectedStep, _kernel, generate_history

    h = generate_history(tmp_path / "h", HistorySpec(commits=commits, iterations=4, steps=[
        InjectedStep(commits - 1, _kernel("nvjet_hsh_256x128"), 1.3, "gemm: slower tiles")]))
    site = tmp_path / "site"
    r = run_kbase("report", "--out", site, "--db", h.db_url, "--repo", h.repo, "--name", "train", "-q")
    assert r.rc == 0, r
    problems = _problems(browser, site)
    assert not problems, "\n".join(problems[:30])


def test_real_resnet_captures_read_at_390_and_1280(browser, tmp_path):  # noqa: F811
    names = ["v100_resnet50_w4_repeat_a", "v100_resnet50_w4_repeat_b", "v100_resnet50_workers0",
             "v100_resnet50_workers4", "v100_resnet50_workers4"]
    traces = [KINETO / f"{n}.pt.trace.json.gz" for n in names]
    if not all(t.is_file() for t in traces):
        pytest.skip("needs ../shared/data/kineto (the real ResNet-50 traces); not part of a fresh clone")
    repo, db = tmp_path / "repo", f"sqlite:///{tmp_path / 'k.db'}"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for i, trace in enumerate(traces):
        (repo / "train.py").write_text(f"step = {i}\n")
        subprocess.run(["git", "-C", str(repo), "add", "train.py"], check=True)
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m",
                        f"resnet: {names[i]}"], check=True)
        assert run_kbase("snapshot", trace, "--db", db, "--repo", repo, "--name", "resnet", "-q").rc == 0
    site = tmp_path / "site"
    assert run_kbase("report", "--out", site, "--db", db, "--repo", repo, "--name", "resnet", "-q").rc == 0
    problems = _problems(browser, site)
    assert not problems, "\n".join(problems[:30])

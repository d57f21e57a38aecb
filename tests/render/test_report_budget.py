"""The GPU time budget in the report, without a browser: the numbers drawn are the stored budgets' (read back
independently with ``kbase.budget("@ID")``), the four blocks add up to each window, a commit stored before the
budget draws no bar and says so, and the diff page states the step verdict ``kbase diff`` states — the gate's
banner naming a regressed step like any other failure.

The history: five commits; from commit 3 on the host waits 30 ms per step before loading its batch (a slow input
pipeline: every kernel holds, the step grows by about 45%); commit 0's baseline has its budget removed, as one
stored before kbase kept it.
"""

from __future__ import annotations

import html
import json
import re
import sqlite3

import pytest

from helpers.report_fixtures import evil_kernel

DELAY_NS = 30_000_000


@pytest.fixture(scope="module")
def budget_report(tmp_path_factory):
    import kbase
    from kbase.render.report.site import build_report
    from kbase.synth.history import HistorySpec, generate_history

    root = tmp_path_factory.mktemp("budget")
    history = generate_history(root / "h", HistorySpec(commits=5, steps=[], iterations=4, extra_kernels=[evil_kernel()],
                                                       changes={3: {"host_delay_ns": DELAY_NS}}))
    db = history.db_url.removeprefix("sqlite:///")
    with sqlite3.connect(db) as conn:  # commit 0: as stored before kbase kept the budget
        (text,) = conn.execute("SELECT summary_json FROM baseline WHERE id = ?", (history.baseline_ids[0],)).fetchone()
        summary = json.loads(text)
        summary.pop("budget")
        conn.execute("UPDATE baseline SET summary_json = ?, step_ns = NULL, idle_ns = NULL WHERE id = ?",
                     (json.dumps(summary), history.baseline_ids[0]))
    settings = kbase.Settings.load(repo=history.repo, db=history.db_url, name=history.workload)
    data = kbase.report_data(settings, before=2, after=3)
    out = root / "report"
    return history, settings, data, out, build_report(data, out)


def _figures(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="kbase-figures">(.*?)</script>', page, re.DOTALL)
    assert m
    return json.loads(m.group(1))


def _stored(settings, baseline_id: int):
    import kbase

    return kbase.budget(f"@{baseline_id}", settings).budget


def test_trend_bars_are_the_stored_budgets(budget_report):
    history, settings, data, _, _ = budget_report
    assert data.commits[0].budget is None
    assert data.budget_notes == ["GPU time budget: 1 of 5 commits have none (stored before kbase kept the budget): "
                                 "they show no bar"]
    for point, bid in zip(data.commits[1:], history.baseline_ids[1:]):
        b = _stored(settings, bid)
        bar = point.budget
        assert bar is not None
        assert bar.compute_ns == pytest.approx(b.per_unit(b.total.compute_ns))
        assert bar.communication_ns == pytest.approx(b.per_unit(b.total.communication_exposed_ns))
        assert bar.memory_ns == pytest.approx(b.per_unit(b.total.memory_exposed_ns))
        assert bar.idle_ns == pytest.approx(b.per_unit(b.total.idle_ns))
        assert bar.window_ns == pytest.approx(b.per_unit(b.total.window_ns))  # the four blocks are the window
        samples = b.step_samples()
        assert bar.step_ns == pytest.approx(sum(samples) / len(samples))
    # the injected host delay: the step (and the idle block) grows by about the delay, compute holds
    before, after = data.commits[2].budget, data.commits[3].budget
    assert after.step_ns - before.step_ns == pytest.approx(DELAY_NS, rel=0.15)
    assert after.idle_ns - before.idle_ns == pytest.approx(DELAY_NS, rel=0.15)
    assert after.compute_ns == pytest.approx(before.compute_ns, rel=0.02)


def test_trend_page_draws_a_bar_per_commit_and_the_step(budget_report):
    from kbase.render.report.figures import time_unit

    _, _, data, out, _ = budget_report
    page = (out / "index.html").read_text(encoding="utf-8")
    fig = _figures(page)["fig-budget-trend"]
    bars = [t for t in fig["data"] if t["type"] == "bar"]
    assert [t["name"] for t in bars] == ["compute", "exposed communication", "exposed memory", "idle"]
    assert fig["layout"]["barmode"] == "stack"
    _, div = time_unit(max(p.budget.step_ns for p in data.commits if p.budget))
    for t in bars:
        assert len(t["y"]) == 5 and t["y"][0] is None  # no bar for the commit without a budget
    step = next(t for t in fig["data"] if t["name"] == "step time")
    assert step["y"][0] is None
    assert step["y"][3] == pytest.approx(data.commits[3].budget.step_ns / div)
    assert "1 of 5 commits have none" in page and fig["narrow"]["layout"]["height"] >= 340


def test_leaderboard_page_bars_per_iteration_add_up_to_100(budget_report):
    from kbase.render.report.figures import time_unit

    _, settings, data, out, _ = budget_report
    view = data.leaderboard
    b = _stored(settings, view.baseline_id)
    page = (out / "leaderboard.html").read_text(encoding="utf-8")
    fig = _figures(page)["fig-budget"]
    bars = [t for t in fig["data"] if t["type"] == "bar"]
    assert len(bars) == 4 and all(len(t["y"]) == b.n_iterations for t in bars)
    for i in range(b.n_iterations):
        assert sum(t["y"][i] for t in bars) == pytest.approx(100.0)
    gpus = len(b.gpus)
    key, blocks = b.iterations[0]
    assert bars[0]["x"][0] == str(key)
    _, div = time_unit(max(it.window_ns for it in view.budget.iterations))
    assert bars[3]["customdata"][0] == pytest.approx(blocks.idle_ns / gpus / div)  # summed over GPUs, per GPU
    step = next(t for t in fig["data"] if t["name"] == "step time")
    assert step["yaxis"] == "y2" and step["y"] == pytest.approx([s / div for s in b.step_samples()])
    assert "budget-blocks" in page and "communication hidden under compute (not in the 100%)" in page


def test_diff_page_states_the_step_verdict_and_the_blocks(budget_report):
    from kbase.render.budget import step_verdict_lines
    from kbase.render.diff import diff_doc

    _, _, data, out, _ = budget_report
    doc = diff_doc(data.gate.comparison, data.gate.verdict)
    assert doc["budget"]["step"]["regressed"]
    page = (out / "diff.html").read_text(encoding="utf-8")
    line = step_verdict_lines(doc["budget"])[0]
    assert f"<p class='step-verdict regressed'>{html.escape(line, quote=True)}</p>" in page.replace("&#x27;", "'")
    table = re.search(r'<table class="budget-diff">(.*?)</table>', page, re.DOTALL).group(1)
    assert [re.sub("<.*?>", "", c) for c in re.findall(r"<tr[^>]*><td>(.*?)</td>", table)] == [
        "compute", "exposed communication", "exposed memory", "idle", "GPU window"]
    assert page.index('class="budget-diff"') < page.index("Changed kernels and what they are worth")
    fig = _figures(page)["fig-budget-diff"]
    assert [t["name"] for t in fig["data"]] == ["compute", "exposed communication", "exposed memory", "idle",
                                                "step time"]
    assert all(t["y"] == ["before", "after"] for t in fig["data"])
    assert html.escape(f"what grew: {doc['budget']['explained']}", quote=True) in page.replace("&#x27;", "'")


def test_gate_banner_names_the_step_finding(budget_report):
    from kbase.comparison.gate import STEP_TIME, FindingKind

    _, _, data, _, pages = budget_report
    v = data.gate.verdict
    assert v.status == "fail" and [f.kind for f in v.failing] == [FindingKind.STEP]
    for page in pages:
        text = page.read_text(encoding="utf-8")
        banner = re.search(r'<div class="verdict gate-banner fail".*?</div>', text, re.DOTALL).group(0)
        m = re.search(r'<span class="step-finding" title="([^"]*)">(step \+[0-9.]+% \(p=[^)]*\): idle \+[^<]*)</span>',
                      banner)
        assert m, banner
        assert html.unescape(m.group(1)) == STEP_TIME and html.unescape(m.group(2)).endswith(v.failing[0].explain)
        assert "failing:" not in banner  # no kernel failed: the step is the finding
    # the notebook's GateResult names it the same way: the step, not a kernel called "(step time per iteration)"
    assert repr(data.gate).startswith(f"<GateResult FAIL (exit 1): failing: step {v.failing[0].delta_pct:+.1f}%")


def test_a_pair_without_budgets_says_the_step_was_not_judged(budget_report):
    import kbase
    from kbase.render.diff import diff_doc
    from kbase.render.report import budget_pages

    history, settings, _, _, _ = budget_report
    data = kbase.report_data(settings, before=0, after=1)
    doc = diff_doc(data.gate.comparison, data.gate.verdict)
    assert doc["budget"] is None
    body, figs = budget_pages.diff_section(doc)
    assert "step not judged: a side has no GPU time budget" in body and figs == {}
    assert any("stored before kbase kept the GPU time budget" in n for n in doc["notes"])
    body, figs = budget_pages.leaderboard_section(None)
    assert "stores no GPU time budget" in body and figs == {}


def test_window_budgets_are_per_gpu_second():
    """Without iteration markers the bar is per GPU-second of window: the four blocks add up to one second."""
    from kbase.analysis.budget import Blocks, Budget, GpuBudget
    from kbase.api.report_budget import pooled_bar

    blocks = Blocks(window_ns=2_000_000_000, compute_ns=1_000_000_000, communication_exposed_ns=500_000_000,
                    memory_exposed_ns=100_000_000, idle_ns=400_000_000)
    gpus = [GpuBudget(gpu=g, rank=None, label=f"GPU {g}", blocks=blocks) for g in (0, 1)]
    total = Blocks()
    for g in gpus:
        total.add(g.blocks)
    b = Budget(unit="window", window="whole capture", n_iterations=0, gpus=gpus, total=total, iterations=[],
               gaps={"by_cause": {}, "by_size": {}}, largest_gaps=[])
    bar = pooled_bar("c", [b])
    assert bar.window_ns == pytest.approx(1e9) and bar.compute_ns == pytest.approx(0.5e9) and bar.step_ns is None

"""The GPU time budget in the report: per commit for the trend, per iteration for the leaderboard page — read
from the budget stored with each baseline (``summary_json``'s ``budget``, ``Budget.to_stored``), never
recomputed from kernels. One read: the summaries of the drawn baselines (``budget_summaries``).

Units as the diff's: per iteration per GPU (the blocks summed over GPUs and iterations, divided by
iterations x GPUs, ``Budget.per_unit``); a capture without iteration markers per GPU-second of window (the
blocks over the sum of its GPUs' windows, in seconds), as the trend draws such a commit. Repeat captures at one
commit are pooled as ``kbase diff`` pools them: a commit where any pooled capture has no budget has none.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kbase.render.report.model import BudgetBar, BudgetView

if TYPE_CHECKING:
    from kbase.analysis.budget import Blocks, Budget
    from kbase.render.report.model import CommitPoint
    from kbase.store.read.reader import StoreReader


def stored_budgets(reader: StoreReader, baseline_ids: list[int]) -> dict[int, dict[str, Any] | None]:
    """Each baseline's stored budget (None: stored before kbase kept one, or an unreadable summary)."""
    out: dict[int, dict[str, Any] | None] = {}
    for bid, text in reader.budget_summaries(baseline_ids):
        try:
            got = json.loads(text or "{}").get("budget")
        except (ValueError, AttributeError):
            got = None
        out[int(bid)] = got if isinstance(got, dict) and got else None
    return out


def _bar(label: str, blocks: Blocks, per: float, step_ns: float | None) -> BudgetBar:
    return BudgetBar(label=label, compute_ns=blocks.compute_ns / per,
                     communication_ns=blocks.communication_exposed_ns / per,
                     memory_ns=blocks.memory_exposed_ns / per, idle_ns=blocks.idle_ns / per, step_ns=step_ns)


def pooled_bar(label: str, budgets: list[Budget]) -> BudgetBar | None:
    """One bar of the pooled captures' budgets, pooled as the diff pools a side (``comparison.step.SideBudget``):
    per iteration per GPU (every capture with iteration markers), else per GPU-second of window."""
    from kbase.analysis.budget import Blocks
    from kbase.comparison.step import SideBudget

    if not budgets:
        return None
    side = SideBudget(budgets)
    total = Blocks()
    for b in budgets:
        total.add(b.total)
    if side.unit == "iteration" and all(b.n_iterations for b in budgets):
        per, step = float(side.units), side.step_mean()
    else:
        per, step = total.window_ns / 1e9, None  # ns of each block per GPU-second of window
    return _bar(label, total, per, step) if per > 0 else None


def commit_budgets(reader: StoreReader, points: list[CommitPoint]) -> int:
    """Set each point's ``budget`` from its pooled captures' stored budgets; returns how many have none."""
    from kbase.analysis.budget import budget_from_stored

    ids = [b for p in points for b in p.ref.baseline_ids]
    stored = stored_budgets(reader, ids) if ids else {}
    missing = 0
    for p in points:
        got = [stored.get(b) for b in p.ref.baseline_ids]
        if not got or any(g is None for g in got):
            p.budget = None
        else:
            p.budget = pooled_bar(p.ref.commit, [budget_from_stored(g) for g in got if g is not None])
        missing += p.budget is None
    return missing


def budget_view(stored: dict[str, Any] | None) -> BudgetView | None:
    """A baseline's stored budget as the leaderboard page draws it (None: it has none): the whole window and each
    iteration (the stored per-iteration rows are sums over GPUs: divided by the GPU count)."""
    from kbase.analysis.budget import budget_from_stored

    if not stored:
        return None
    b = budget_from_stored(stored)
    gpus = max(len(b.gpus), 1)
    total = pooled_bar("window", [b])
    if total is None:
        return None
    steps = b.step_samples()
    its = [_bar(str(key), blocks, float(gpus), steps[i] if i < len(steps) else None)
           for i, (key, blocks) in enumerate(b.iterations)]
    over = b.total.window_ns / 1e9 if b.unit != "iteration" else None
    return BudgetView(unit=b.unit, step_source=b.step_source, gpus=gpus, total=total, iterations=its,
                      communication_overlapped_ns=(b.total.communication_overlapped_ns / over if over else
                                                   b.per_unit(b.total.communication_overlapped_ns) or 0.0),
                      memory_overlapped_ns=(b.total.memory_overlapped_ns / over if over else
                                            b.per_unit(b.total.memory_overlapped_ns) or 0.0))


def trend_budget_note(missing: int, points: list[CommitPoint]) -> str | None:
    """What the trend says of the commits without a budget (None when every commit has one)."""
    if not missing:
        return None
    if missing == len(points):
        return ("GPU time budget: no baseline of this history stores one (stored before kbase kept the budget): "
                "snapshot a capture again to have one")
    return (f"GPU time budget: {missing:,} of {len(points):,} commits have none (stored before kbase kept the "
            "budget): they show no bar")

"""How the front door's own results show themselves in a notebook (``SnapshotResult``, ``StoredLeaderboard``,
``Baselines``, ``BudgetResult``): a one-line ``repr`` and a small HTML table, every name escaped
(``display.html_table``). They take what the objects hold (a baseline record and its rows, the budget), so this
layer needs no import of the API's types."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kbase.display import html_table, inert
from kbase.render.baselines import kernel_per_iter, list_cells
from kbase.render.budget import blocks_line
from kbase.render.notebook.leaderboard import leaderboard_html, leaderboard_line
from kbase.units import fmt_ns

if TYPE_CHECKING:
    from kbase.analysis.board import AnyLeaderboard
    from kbase.analysis.budget import Budget
    from kbase.gitrepo import CommitNote

TOP = 10


def _where(b: Any) -> str:
    return f"@{b.id} ({b.workload} at {b.commit[:12]}" + (f", {b.branch}" if b.branch else "") + ")"


def stored_line(kind: str, b: Any, lb: AnyLeaderboard, created: bool | None = None) -> str:
    """``<SnapshotResult: stored @12 (train at 1a2b3c4d5e6f, main); 245 kernels; ...>``."""
    what = "" if created is None else "stored " if created else "already stored as "
    return inert(f"<{kind}: {what}{_where(b)}; " + leaderboard_line(lb)[len("<Leaderboard: "):])


def stored_html(kind: str, b: Any, lb: AnyLeaderboard, created: bool | None = None) -> str:
    return leaderboard_html(lb, caption=stored_line(kind, b, lb, created)[1:-1])


def baselines_line(rows: Sequence[Any]) -> str:
    if not rows:
        return "<Baselines: none stored>"
    workloads = sorted({b.workload for b in rows})
    newest = rows[0]
    per = kernel_per_iter(newest)
    return inert(f"<Baselines: {len(rows)} of {len(workloads)} workload(s) ({', '.join(workloads[:5])}"
                 + (", …" if len(workloads) > 5 else "") + f"); newest {_where(newest)}"
                 + (f" {fmt_ns(per)} kernel time per iteration per GPU" if per is not None else "") + ">")


def baselines_html(rows: Sequence[Any], notes: Mapping[str, CommitNote]) -> str:
    keys = ["id", "commit", "date", "subject", "workload", "branch", "gpus", "kernel"]
    cells = list_cells(rows[:TOP], notes)
    extra = [f"{len(rows) - TOP} more: .table has every baseline"] if len(rows) > TOP else []
    return html_table(["id", "commit", "date", "subject", "workload", "branch", "GPUs", "kernel/iter/GPU"],
                      [[c[k] for k in keys] for c in cells], caption=baselines_line(rows)[1:-1], notes=extra,
                      numeric=(7,))


def budget_result_line(budget: Budget) -> str:
    return f"<BudgetResult {budget.unit} ({budget.window}): {blocks_line(budget)}>"


"""What ``kbase.compare``, ``kbase.gate`` and ``kbase.history`` return: one comparison (both resolved sides
and their diff) and, for the gate, its verdict; one kernel's stored history. Every output — terminal, JSON,
Markdown, JUnit, BMF, the HTML report — is rendered from these objects, so every output states what one
call computed. (Plain dataclasses, no numpy: ``kbase history`` stays light.)"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kbase.display import Shown
from kbase.enums import KernelClass
from kbase.units import fmt_delta_pct

if TYPE_CHECKING:
    import pandas as pd

    from kbase.analysis.cost import ChangeCost, Pricing
    from kbase.comparison.diff import DiffResult
    from kbase.comparison.gate import Verdict
    from kbase.comparison.inputs import Resolved

CHANGED = (KernelClass.REGRESSED, KernelClass.REGRESSED_BELOW_FLOOR, KernelClass.IMPROVED, KernelClass.NEW,
           KernelClass.GONE)  # the changes the diff flags (a swap's kernels net out: not among them)


# Comparison, GateResult, KernelHistory show themselves in a notebook with render.notebook's formatters (Shown).
@dataclass(repr=False)
class Comparison(Shown):
    result: DiffResult
    before: Resolved
    after: Resolved
    notes: list[str] = field(default_factory=list)
    pricing: Pricing | None = None  # the settings' gpu_hour_cost and gpus: every output states the cost per month

    @property
    def table(self) -> pd.DataFrame:
        """The diff's rows as a DataFrame (``result.rows``)."""
        return self.result.rows

    @property
    def cost(self) -> ChangeCost | None:
        """What the change costs per month on the settings' fleet (None without ``gpu_hour_cost`` and ``gpus``):
        ``analysis.cost.change_cost`` of the flagged kernels' effects on the iteration."""
        if self.pricing is None:
            return None
        from kbase.analysis.cost import change_cost

        t = self.result.totals
        b = self.result.budget
        step = b.step if b is not None else None
        step_effect = step.delta_pct / 100.0 if step is not None and (step.regressed or step.improved) else None
        return change_cost(self.pricing, flagged_effects(self), t.kernel.delta_ns, t.iteration_wall.before,
                           t.kernel.regressed, step_effect)


@dataclass(repr=False)
class GateResult(Shown):
    comparison: Comparison
    verdict: Verdict


@dataclass(repr=False)
class KernelHistory(Shown):
    """One stored kernel across the baselines that hold it (``kbase.history``)."""

    query: str  # what was asked for
    name: str  # the one stored kernel it names (full demangled name)
    short_name: str
    rows: list[dict[str, Any]]  # one record per baseline holding it, oldest first (plain rows: no pandas)
    workload: str | None = None  # the workload read (None: every one)
    branch: str | None = None

    @property
    def table(self) -> pd.DataFrame:
        """The rows as a DataFrame, one baseline a row (pandas is imported here, on first use)."""
        import pandas as pd

        columns = list(dict.fromkeys(k for r in self.rows for k in r)) or ["id", "commit", "created_at", "workload"]
        df = pd.DataFrame(self.rows, columns=columns)
        df["change_pct"] = history_changes(self.rows)
        return df


def flagged_effects(c: Comparison) -> list[float]:
    """The effects on the iteration of the kernels the diff flags (an algorithm swap's rows net out)."""
    t = c.result.table
    flagged = {k.value for k in CHANGED}
    return [float(e) for cls, e, swap in zip(t["class"].tolist(), t["effect"].tolist(), t["swap"].tolist())
            if cls in flagged and not swap and isinstance(e, (int, float)) and not isinstance(e, bool)
            and math.isfinite(e)]


def history_changes(rows: list[dict[str, Any]]) -> list[float | None]:
    """Per row of a kernel's history: per-iteration time against the previous row of the same workload, in
    percent."""
    prev: dict[str, float | None] = {}
    out: list[float | None] = []
    for r in rows:
        before, now = prev.get(r["workload"]), r["per_iter_ns"]
        out.append((now - before) / before * 100.0 if before and now is not None else None)
        prev[r["workload"]] = now
    return out


def row_sides(r: dict[str, Any]) -> tuple[float | None, float | None]:
    """A diff row's time before and after, None on the side where the kernel does not exist (a new kernel has
    no "before", a gone one no "after": every table shows ``units.ABSENT`` there, never a zero). By ``match``
    (a swapped kernel can be new or gone too), else by ``class``."""
    side = r.get("match") or r["class"]
    return (None if side == "new" else r.get("before")), (None if side == "gone" else r.get("after"))


def row_delta_pct(r: dict[str, Any]) -> str:
    """A diff row's Δ% as every table shows it: ``new`` for a kernel with no before side (no percentage exists),
    ``units.ABSENT`` for any other value that is not a number, never ``inf`` or ``nan``."""
    before, _ = row_sides(r)
    if before is None:
        return "new"
    x = r.get("delta_pct")
    return fmt_delta_pct(x if isinstance(x, (int, float)) and not isinstance(x, bool) else None)

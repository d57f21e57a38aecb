"""What ``kbase.compare``, ``kbase.gate`` and ``kbase.history`` return: one comparison (both resolved sides
and their diff) and, for the gate, its verdict; one kernel's stored history. Every output — terminal, JSON,
Markdown, JUnit, BMF, the HTML report — is rendered from these objects, so every output states what one
call computed. (Plain dataclasses, no numpy: ``kbase history`` stays light.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kbase.units import fmt_delta_pct

if TYPE_CHECKING:
    import pandas as pd

    from kbase.analysis.cost import ChangeCost, Pricing
    from kbase.comparison.diff import DiffResult
    from kbase.comparison.gate import Verdict
    from kbase.comparison.inputs import Resolved


@dataclass
class Comparison:
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
        from kbase.comparison.notebook import flagged_effects

        t = self.result.totals
        b = self.result.budget
        step = b.step if b is not None else None
        step_effect = step.delta_pct / 100.0 if step is not None and (step.regressed or step.improved) else None
        return change_cost(self.pricing, flagged_effects(self), t.kernel.delta_ns, t.iteration_wall.before,
                           t.kernel.regressed, step_effect)

    def __repr__(self) -> str:
        from kbase.comparison.notebook import comparison_line

        return comparison_line(self)

    def _repr_html_(self) -> str:
        from kbase.comparison.notebook import comparison_html

        return comparison_html(self)


@dataclass
class GateResult:
    comparison: Comparison
    verdict: Verdict

    def __repr__(self) -> str:
        from kbase.comparison.notebook import gate_line

        return gate_line(self)

    def _repr_html_(self) -> str:
        from kbase.comparison.notebook import gate_html

        return gate_html(self)


@dataclass
class KernelHistory:
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
        from kbase.comparison.notebook import history_table

        return history_table(self)

    def __repr__(self) -> str:
        from kbase.comparison.notebook import history_line

        return history_line(self)

    def _repr_html_(self) -> str:
        from kbase.comparison.notebook import history_html

        return history_html(self)


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

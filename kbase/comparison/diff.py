"""Stage 5 — diff two sides per aligned iteration, as column arithmetic.

Kernels are matched by full name, then by family key where it pairs one-to-one; every figure is a
numpy column, classes are vectorised selects, and only the significance tests run per kernel.
Sentences (diagnosis, Amdahl text, gate reasons) are the renderer's job. No pandas: a diff of stored
baselines never imports it (``DiffResult.rows`` builds a DataFrame on demand for the Python API).

Noise model (see docs/noise-model.md and ``comparison.noise``): each matched kernel's change is tested
against its own noise — run-to-run spread from history or repeat captures when the store has them,
else matched launch-duration quantiles or per-iteration samples plus a run-to-run floor — at the
policy's false-positive rate ``fpr`` per comparison; the absolute (``abs_floor_us``), share
(``share_floor``) and optional relative (``max_increase_pct``, 0 by default) floors must also hold.
Every row carries its noise source, z, p and minimum detectable effect. With no source the result is
low-confidence and never called a regression. A significant regression under ``min_effect_pct`` of the
iteration is ``regressed_below_floor`` ("below floor"). Algorithm swaps are reported, not gated per kernel: judged by
op where both sides know their kernels' ops (``comparison.ops``), else by the library rule (``swaps``);
a changed kernel they cover is ``swapped`` (its own class kept in ``own_class``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from kbase.analysis import columns as registry
from kbase.comparison import work
from kbase.comparison.side import KernelTable, Side, Unit
from kbase.comparison.significance import (
    BELOW_FLOOR,
    IMPROVED,
    REGRESSED,
    between_process_line,
    noise_line,
    significance,
)
from kbase.comparison.stats import mann_whitney_p
from kbase.comparison.step import BudgetDiff, budget_diff
from kbase.enums import Confidence, KernelClass, Match
from kbase.policy import THRESHOLD_KEYS, Policy

if TYPE_CHECKING:
    import pandas as pd

    from kbase.comparison.history import HistoryNoise
    from kbase.comparison.ops import OpDiff

DIFF_SCHEMA = "kbase.diff/4"
CLASSES = tuple(KernelClass)
NO_KERNELS = "candidate window holds no kernels"

# the rows' columns, in order: declared in ``analysis.columns.DIFF`` (the rows, JSON, CSV, the table and docs read it)
ROW_COLUMNS = registry.diff_row_columns()
# a swapped kernel's class as judged alone (the class column says ``swapped``): bisect's "did it move"
SWAPPABLE = (KernelClass.REGRESSED.value, KernelClass.REGRESSED_BELOW_FLOOR.value, KernelClass.IMPROVED.value,
             KernelClass.NEW.value, KernelClass.GONE.value, KernelClass.CANNOT_JUDGE.value)


@dataclass(frozen=True)
class TotalChange:
    before: float
    after: float
    delta_ns: float
    delta_pct: float  # NaN when before is 0


@dataclass(frozen=True)
class KernelTimeChange(TotalChange):
    """Total kernel time per unit per GPU, with its own significance test (the total rule)."""

    p_value: float = 1.0
    enough: bool = False
    regressed: bool = False


@dataclass(frozen=True)
class DiffTotals:
    unit: str  # Unit, or "mixed"
    kernel: KernelTimeChange
    compute: TotalChange
    communication: TotalChange
    memory: TotalChange
    iteration_wall: TotalChange
    step_wall: TotalChange | None = None
    unit_reason: str = ""  # why the unit was chosen (``work.align_units``: the one place that words it)


@dataclass
class DiffResult:
    before: Side
    after: Side
    # the declared row columns (ROW_COLUMNS) as arrays, regressions first, then by |effect on the iteration|
    table: dict[str, np.ndarray]
    totals: DiffTotals
    mismatches: list[str]
    policy: Policy
    notes: list[str] = field(default_factory=list)
    ops: OpDiff | None = None  # the diff by op (both sides know their kernels' ops), swaps judged by op
    budget: BudgetDiff | None = None  # the GPU time budget of both sides and the step's verdict (None: no budget)

    def __len__(self) -> int:
        return len(self.table["name"])

    def records(self) -> list[dict[str, Any]]:
        """The rows as dicts of Python scalars (NaN stays NaN), in order."""
        names = list(self.table)
        cols = [self.table[c].tolist() for c in names]
        return [dict(zip(names, values)) for values in zip(*cols)]

    @cached_property
    def rows(self) -> pd.DataFrame:
        """The rows as a DataFrame (ROW_COLUMNS), for the Python API and pandas-based renderers."""
        import pandas as pd

        return pd.DataFrame(self.table, columns=list(self.table))


def comparability(before: Side, after: Side, policy: Policy) -> list[str]:
    """Reasons the two sides do not measure the same thing (empty: comparable)."""
    out = []
    for key, what in (("workload", "workload"), ("gpu_models", "GPU model"), ("gpu_count", "GPU count"),
                      ("window_spec", "window spec")):
        a, b = getattr(before.meta, key), getattr(after.meta, key)
        if a is not None and b is not None and a != b:
            out.append(f"{what} differs: {a} vs {b}")
    if before.aligned != after.aligned:
        # per iteration on one side, per second of window on the other: no common unit
        out.append(f"iteration alignment differs: {before.unit} vs {after.unit} (one side has no iteration marker)")
    if not len(after.kernels) or not after.totals.kernel:
        out.append(NO_KERNELS)
    elif before.aligned and after.aligned and (after.n_units / after.n_captures
                                               < policy.min_iteration_ratio * before.n_units / before.n_captures):
        # per capture: repeat captures at one commit are processes, never more iterations
        out.append(f"candidate has far fewer iterations ({after.n_units / after.n_captures:g} per capture) than the "
                   f"baseline ({before.n_units / before.n_captures:g} per capture)")
    return out


def match_kernels(bk: KernelTable, ak: KernelTable) -> list[tuple[str | None, str | None, str]]:
    """Pairs (name_before, name_after, match): by full name (in name order), then by family key where
    the family has exactly one unmatched kernel on each side; the rest are gone (before only) or new
    (after only)."""
    b_names, a_names = bk.index.tolist(), ak.index.tolist()
    in_a = set(a_names)
    named = sorted(n for n in b_names if n in in_a)
    both = set(named)
    rest_b = [(n, _key(f)) for n, f in zip(b_names, bk["family"].tolist()) if n not in both]
    rest_a = [(n, _key(f)) for n, f in zip(a_names, ak["family"].tolist()) if n not in both]
    single_b, single_a = _single_family(rest_b), _single_family(rest_a)
    fam = [(n, single_a[f]) for n, f in rest_b if f in single_b and f in single_a]
    paired_b, paired_a = {p[0] for p in fam}, {p[1] for p in fam}
    return ([(n, n, Match.NAME.value) for n in named] + [(x, y, Match.FAMILY.value) for x, y in fam]
            + [(n, None, Match.GONE.value) for n, _ in rest_b if n not in paired_b]
            + [(None, n, Match.NEW.value) for n, _ in rest_a if n not in paired_a])


def _key(family: object) -> object:
    return "\0nan" if family is None or family != family else family  # missing families pair with each other


def _single_family(rest: list[tuple[str, object]]) -> dict[object, str]:
    """family -> its one kernel, for families with exactly one unmatched kernel."""
    seen: dict[object, list[str]] = {}
    for n, f in rest:
        seen.setdefault(f, []).append(n)
    return {f: ns[0] for f, ns in seen.items() if len(ns) == 1}


def _take(values: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """``values`` at ``pos``, NaN where ``pos`` is -1 (the kernel is absent on that side)."""
    have = pos >= 0
    if values.dtype == object:
        out = np.full(len(pos), np.nan, dtype=object)
    else:
        out = np.full(len(pos), np.nan)
    out[have] = values[pos[have]]
    return out


def compute_diff(before: Side, after: Side, policy: Policy | None = None,
                 history: HistoryNoise | None = None, unit: str | None = None) -> DiffResult:
    """``history``: per kernel name, the relative run-to-run sd from past baselines (``history.noise_from_history``);
    ``unit``: ``run``, ``window`` or ``iteration`` (None: chosen from the captures, ``work.choose_unit``)."""
    policy = policy or Policy()
    before, after, unit_reason, unit_notes = work.align_units(before, after, unit or policy.unit or None)
    pairs = match_kernels(before.kernels, after.kernels)
    n = len(pairs)
    name_b = np.empty(n, dtype=object)
    name_a = np.empty(n, dtype=object)
    name_b[:], name_a[:] = [p[0] for p in pairs], [p[1] for p in pairs]
    pos_b, pos_a = before.kernels.positions(name_b.tolist()), after.kernels.positions(name_a.tolist())
    has_b, has_a = pos_b >= 0, pos_a >= 0
    kb, ka = before.kernels, after.kernels

    def ref(c: str) -> np.ndarray:  # the after side's text, else before's
        return np.where(has_a, _take(ka[c], pos_a), _take(kb[c], pos_b))

    wall_b = before.unit_wall_ns if before.unit_wall_ns == before.unit_wall_ns else np.nan
    wall_a = after.unit_wall_ns
    b_ns = np.nan_to_num(_take(kb["per_unit_ns"], pos_b).astype(float), nan=0.0)
    a_ns = np.nan_to_num(_take(ka["per_unit_ns"], pos_a).astype(float), nan=0.0)
    delta = a_ns - b_ns
    avg_b, avg_a = _take(kb["avg_ns"], pos_b).astype(float), _take(ka["avg_ns"], pos_a).astype(float)
    count_b = np.nan_to_num(_take(kb["count_per_unit"], pos_b).astype(float), nan=0.0)
    count_a = np.nan_to_num(_take(ka["count_per_unit"], pos_a).astype(float), nan=0.0)
    nan = np.full(n, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        rows: dict[str, np.ndarray] = {
            "name": np.where(has_a, name_a, name_b), "name_before": name_b,
            "match": np.array([p[2] for p in pairs], dtype=object), "short_name": ref("short_name"),
            "family": ref("family"), "category": ref("category"), "tc_before": _take(kb["tc"], pos_b),
            "tc_after": _take(ka["tc"], pos_a), "before": b_ns, "after": a_ns, "delta_ns": delta,
            "delta_pct": np.where(b_ns != 0, delta / b_ns * 100, np.inf),
            "count_before": count_b, "count_after": count_a, "avg_before": avg_b, "avg_after": avg_a,
            "share_before": b_ns / wall_b if wall_b else nan, "share_after": a_ns / wall_a if wall_a else nan,
            "effect": delta / wall_b if wall_b else nan,
        }
        rows["delta_count"] = count_a - count_b
        rows["delta_avg_pct"] = np.where(has_a & has_b & (avg_b != 0) & ~np.isnan(avg_b),
                                         (avg_a - avg_b) / np.where(avg_b == 0, 1, avg_b) * 100, np.nan)
    # Without iteration markers the unit is a second of window, whose length moves every kernel's launches
    # per unit alike (a slower kernel lengthens it): launch counts are compared at equal total launches.
    count_same = count_a
    if not (before.aligned and after.aligned) and before.unit != Unit.RUN:
        total_b, total_a = float(np.nansum(kb["count_per_unit"])), float(np.nansum(ka["count_per_unit"]))
        count_same = count_a * (total_b / total_a) if total_a > 0 and total_b > 0 else count_a
    names = [str(x) for x in rows["name"].tolist()]
    shorts = [str(x) for x in rows["short_name"].tolist()]
    th = _per_kernel(policy, names, shorts)
    verdict, z_crit = significance(rows, pos_b, pos_a, before, after, policy, th, has_a & has_b, history,
                                    count_same)
    _classify(rows, policy, th, names, shorts, has_b, has_a, verdict)
    from kbase.comparison.ops import op_diff
    from kbase.comparison.swaps import NO_OP, home_ops, mark_algorithm_swaps, op_swap_notes

    by_op = op_diff(before, after, rows, policy, z_crit, history)
    rows["op"] = home_ops(rows["name"], by_op)
    # with op information the op rule judges swaps; kernels launched by no op keep the library-swap rule
    notes = mark_algorithm_swaps(rows, policy, count_same, among=None if by_op is None else rows["op"] == NO_OP)
    if by_op is not None:
        notes += op_swap_notes(by_op, rows)
    notes += [line for line in (noise_line(rows), between_process_line(rows, policy)) if line] + unit_notes
    if history is not None and history.unit != before.unit.value and any(v == v for v in history.sd.values()):
        notes.append(f"history noise not used: its levels are per {history.unit}, this comparison is "
                     f"{before.unit.per}")
    _name_swapped(rows)
    for name, compute in registry.computed(registry.DIFF):  # the declared columns that follow from the others
        rows[name] = np.asarray(compute(rows))
    if n:
        first = np.where(rows["class"] == KernelClass.REGRESSED.value, 0,
                         np.where(rows["class"] == KernelClass.REGRESSED_BELOW_FLOOR.value, 1, 2))
        order = np.lexsort((np.array(names, dtype=object), -np.nan_to_num(np.abs(rows["effect"]), nan=0.0), first))
        rows = {c: v[order] for c, v in rows.items()}
    for side in (before, after):
        if not side.aligned and side.unit != Unit.RUN:
            notes.append(f"not aligned: {side.label} is not iteration-aligned (compared per window-second)")
    totals = _totals(before, after, policy, rows, unit_reason)
    budget = None
    if before.budget is not None and after.budget is not None:
        kernel_delta = totals.kernel.delta_ns if before.aligned and after.aligned else None
        budget = budget_diff(before.budget, after.budget, policy, kernel_delta,
                             history.step_levels if history is not None else None)
        notes += budget.notes
    elif before.budget is not None or after.budget is not None:
        notes.append("step time not judged: one side was stored before kbase kept the GPU time budget")
    return DiffResult(before=before, after=after, table={c: rows[c] for c in registry.diff_row_columns()},
                      totals=totals, mismatches=comparability(before, after, policy),
                      policy=policy, notes=notes, ops=by_op, budget=budget)


def _per_kernel(policy: Policy, names: list[str], shorts: list[str]) -> dict[str, np.ndarray]:
    """Each threshold as a column: the policy's value, or the first matching per-kernel override."""
    out = {k: np.full(len(names), float(getattr(policy, k))) for k in THRESHOLD_KEYS}
    for pattern, over in reversed(list(policy.kernels.items())):  # reversed: the first match is applied last
        hit = policy.matches(pattern, names, shorts)
        for key, value in over.items():
            out[key][hit] = value
    return out


def _classify(rows: dict[str, np.ndarray], policy: Policy, th: dict[str, np.ndarray], names: list[str],
              shorts: list[str], has_b: np.ndarray, has_a: np.ndarray, v: np.ndarray) -> None:
    rows["ignored"] = policy.ignored_mask(names, shorts)
    pct = rows["delta_pct"]
    enough = rows["enough"]
    matched = has_a & has_b
    # a visible change nothing could measure the noise of (too few launches, no history, no repeats), in a kernel
    # that could matter: said so
    unjudged = matched & (rows["noise_source"] == "assumed") & ~(np.fmax(rows["share_before"], rows["share_after"])
                                                                 < th["share_floor"])
    cls = np.select(
        [~has_b, ~has_a, v == REGRESSED, v == BELOW_FLOOR, v == IMPROVED, np.abs(pct) < policy.unchanged_pct, unjudged],
        [KernelClass.NEW.value, KernelClass.GONE.value, KernelClass.REGRESSED.value,
         KernelClass.REGRESSED_BELOW_FLOOR.value, KernelClass.IMPROVED.value, KernelClass.UNCHANGED.value,
         KernelClass.CANNOT_JUDGE.value],
        KernelClass.WITHIN_NOISE.value)
    rows["class"] = cls.astype(object)
    rows["confidence"] = np.where(~matched | enough, Confidence.OK.value, Confidence.LOW.value).astype(object)
    new_gated = ~has_b & (np.nan_to_num(rows["share_after"], nan=0.0) >= th["share_floor"])
    rows["gated"] = ((cls == KernelClass.REGRESSED.value) | new_gated) & ~rows["ignored"]
    rows["swap"] = np.zeros(len(cls), dtype=bool)


def _name_swapped(rows: dict[str, np.ndarray]) -> None:
    """A changed kernel the swap rules cover is ``swapped``, never ``regressed``: its op (or the library rule)
    judged it (``own_class`` keeps what it was alone). Unchanged and within-noise kernels of a swap keep their
    class: nothing changed to call a swap."""
    rows["own_class"] = rows["class"].copy()
    hit = rows["swap"] & np.isin(rows["class"], SWAPPABLE)
    rows["class"][hit] = KernelClass.SWAPPED.value


def _change(b: float, a: float) -> TotalChange:
    return TotalChange(before=b, after=a, delta_ns=a - b, delta_pct=(a - b) / b * 100 if b else float("nan"))


def _totals(before: Side, after: Side, policy: Policy, rows: dict[str, np.ndarray],
            unit_reason: str = "") -> DiffTotals:
    k = _change(before.totals.kernel, after.totals.kernel)
    sb, sa = before.total_samples, after.total_samples
    enough = len(sb) >= policy.min_iterations and len(sa) >= policy.min_iterations
    if before.unit == Unit.RUN:  # the same work: from the kernels' paired tests
        p, enough = work.run_total_p(rows, policy.share_floor)
    else:
        p = mann_whitney_p(sb, sa) if enough else 1.0
    kernel = KernelTimeChange(**vars(k), p_value=p, enough=enough,
                              regressed=bool(enough and p < policy.alpha and k.delta_pct >= policy.total_increase_pct))
    step = None
    if before.step_wall_ns and after.step_wall_ns:
        step = _change(before.step_wall_ns, after.step_wall_ns)
    return DiffTotals(
        unit=before.unit.value if before.unit == after.unit else "mixed", kernel=kernel,
        compute=_change(before.totals.compute, after.totals.compute),
        communication=_change(before.totals.communication, after.totals.communication),
        memory=_change(before.totals.memory, after.totals.memory),
        iteration_wall=_change(before.unit_wall_ns, after.unit_wall_ns), step_wall=step, unit_reason=unit_reason)


__all__ = ["CLASSES", "DIFF_SCHEMA", "DiffResult", "DiffTotals", "KernelTimeChange", "NO_KERNELS", "ROW_COLUMNS",
           "TotalChange", "Unit", "compute_diff", "comparability", "match_kernels"]

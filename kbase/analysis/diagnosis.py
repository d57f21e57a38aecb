"""The field's three diagnoses of a fat kernel, decided from its leaderboard columns by stated rules.

- **fat**: ``share_kernel >= FAT_SHARE`` (5% of all kernel time); thinner kernels get no diagnosis.
- **unhealthy** (checked first): its longest launch is far above its median (``max >= 10 x median``;
  ``4 x`` for communication) *and* the excess is not a steady mix of problem sizes: with two or more
  iterations in the window, its time per iteration varies by ``ITER_SPREAD`` (1.25x) or more between the
  lightest and heaviest iteration (a steady mix of shapes repeats every iteration; warm-up autotuning,
  contention or a collective waiting for a slow peer does not); without iterations, the launches above the
  median hold at least half of its time.
- **expected**: matmul/convolution/attention work (tensor-core state ``✓`` or ``⚠``, or a matmul name), compute
  bound, and healthy communication (its cost is what overlap hides).
- **not expected**: everything else that is fat — elementwise, reductions, copies, norms; "piled up by Count"
  (``>= 20`` launches per iteration, or ``>= 200`` in a window without iterations, averaging under 50 µs) says
  a fusion candidate.

Pure functions of the rows: ``kbase top`` (table, JSON) and the report's leaderboard call :func:`annotate`
with the same rows, so they say the same thing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from kbase.analysis.classify import is_matmul_like
from kbase.analysis.prescription import tc_reason
from kbase.enums import Category, TcState

FAT_SHARE = 0.05
UNHEALTHY_MAX_OVER_MEDIAN = 10.0
COMM_MAX_OVER_MEDIAN = 4.0
ITER_SPREAD = 1.25
TAIL_SHARE = 0.5
PILE_PER_ITER = 20
PILE_COUNT = 200
PILE_AVG_NS = 50_000

EXPECTED, NOT_EXPECTED, UNHEALTHY = "expected", "not_expected", "unhealthy"
LABELS = {EXPECTED: "expected", NOT_EXPECTED: "not expected", UNHEALTHY: "unhealthy"}
LEGEND = ("Diagnosis of kernels >= 5% of kernel time: expected (matmul/conv/attention, steady NCCL), not expected "
          "(the rest; fusion candidates when piled up by Count), unhealthy (Max >= 10x median, 4x for NCCL, uneven "
          "across iterations)")


class Diagnosis(NamedTuple):
    kind: str | None  # EXPECTED, NOT_EXPECTED, UNHEALTHY; None: not fat
    reason: str


class Annotation(NamedTuple):
    """What a leaderboard row says beyond its columns: why its TC state (and the fix for a ``⚠``), and its
    diagnosis (JSON fields ``tc_reason``, ``diagnosis``, ``diagnosis_reason``)."""

    tc_reason: str
    diagnosis: str | None
    diagnosis_reason: str


def _num(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return math.nan
    return out


def _us(ns: float) -> str:
    from kbase.units import fmt_ns

    return fmt_ns(ns)


def diagnose(row: Mapping[str, Any], iter_bounds: tuple[float, float] | None = None, iterations: int = 0) -> Diagnosis:
    """One row's diagnosis. ``iter_bounds``: its lowest and highest time per iteration over the window's
    ``iterations`` (None when the window has no iterations)."""
    share = _num(row.get("share_kernel"))
    if not share >= FAT_SHARE:
        pct = "-" if math.isnan(share) else f"{share:.1%}"
        return Diagnosis(None, f"thin: {pct} of kernel time (< {FAT_SHARE:.0%})")
    fat = f"fat ({share:.1%} of kernel time)"
    comm = row.get("category") == Category.COMMUNICATION
    count = int(_num(row.get("count")) or 0)
    median, peak, total = _num(row.get("median_ns")), _num(row.get("max_ns")), _num(row.get("total_ns"))
    if _max_far_above_median(row):
        spread = ""
        if iter_bounds is not None and iterations >= 2 and iter_bounds[0] > 0:
            ratio = iter_bounds[1] / iter_bounds[0]
            if ratio >= ITER_SPREAD:
                spread = f"its time per iteration varies {ratio:.2f}x between iterations"
        elif total > 0 and (tail := (total - count * median) / total) >= TAIL_SHARE:
            spread = f"launches above the median hold {tail:.0%} of its time"
        if spread:
            why = ("NCCL waiting for peers (a straggler rank) or communication exposed on the critical path"
                   if comm else "warm-up/autotuning launches in the window, or contention with other work")
            return Diagnosis(UNHEALTHY, f"{fat} and unhealthy: Max {_us(peak)} is {peak / median:.0f}x the median "
                                        f"{_us(median)} and {spread}: {why}")
    if comm:
        return Diagnosis(EXPECTED, f"{fat} and expected: communication at a steady cost (median {_us(median)}); "
                                   "what matters is whether it overlaps compute")
    tc = row.get("tc")
    if tc in (TcState.YES, TcState.FALLBACK) or is_matmul_like(str(row.get("name", ""))):
        note = " — but on the CUDA cores (TC ⚠: see its fix)" if tc == TcState.FALLBACK else ""
        return Diagnosis(EXPECTED, f"{fat} and expected: matmul/convolution/attention work, compute bound{note}")
    per_iter = _num(row.get("count_per_iter"))
    avg = _num(row.get("avg_ns"))
    piled = (per_iter >= PILE_PER_ITER) if not math.isnan(per_iter) else count >= PILE_COUNT
    copies = row.get("category") == Category.MEMORY
    launches = (f"{per_iter:,.0f} launches per iteration" if not math.isnan(per_iter)
                else f"{count:,} launch{'es' if count != 1 else ''}")
    if piled and avg < PILE_AVG_NS:
        fix = ("avoid the copies (contiguous layouts, fewer casts) or fuse them (torch.compile)" if copies else
               "fuse them (torch.compile, fused optimizer/norm/activation kernels)")
        return Diagnosis(NOT_EXPECTED, f"{fat} and not expected: {launches} averaging {_us(avg)} — "
                                       f"{'copies' if copies else 'small non-matmul kernels'} piled up by Count, "
                                       f"a fusion candidate: {fix}")
    what = "copy/fill work" if copies else "non-matmul work (elementwise, reduction, norm, custom)"
    return Diagnosis(NOT_EXPECTED, f"{fat} and not expected: {what}, {launches} at {_us(avg)} each — usually "
                                   "memory bound: fuse it, cut its traffic or avoid it")


def annotate(rows: Sequence[Mapping[str, Any]], gpu_models: Sequence[str] | str | None = None,
             bounds: Callable[[], Mapping[str, tuple[float, float]]] | None = None,
             iterations: int = 0) -> list[Annotation]:
    """The :class:`Annotation` of each row. ``bounds``: a function giving each kernel's per-iteration (lowest,
    highest) time (``analysis.board.LeaderboardRows.bounds``: a pass over the samples, so called only when a fat
    row's Max/median asks); None for a window without iterations. ``iterations``: the window's."""
    found: dict[str, tuple[float, float]] | None = None
    out = []
    for r in rows:
        name = str(r.get("name", ""))
        spread = None
        if bounds is not None and _max_far_above_median(r):
            if found is None:
                found = dict(bounds())
            spread = found.get(name)
        d = diagnose(r, spread, iterations)
        out.append(Annotation(tc_reason(name, str(r.get("tc", "")), gpu_models), d.kind, d.reason))
    return out


def _max_far_above_median(row: Mapping[str, Any]) -> bool:
    median, peak = _num(row.get("median_ns")), _num(row.get("max_ns"))
    ratio = COMM_MAX_OVER_MEDIAN if row.get("category") == Category.COMMUNICATION else UNHEALTHY_MAX_OVER_MEDIAN
    return _num(row.get("share_kernel")) >= FAT_SHARE and int(_num(row.get("count")) or 0) >= 3 and median > 0 \
        and peak >= ratio * median

"""Captures without iteration markers: the unit they are compared in, and the paired test of fixed work.

Without markers a capture is either one run of a fixed amount of work (a benchmark, a solver, a test: the
same launches on both sides) or a slice of a steady state (0.3 s of a long job). Per second of window is
the wrong unit for the first: a kernel that fills its window always reads 1 s per window-second, and a
shorter host part raises every kernel's share of a second. So (``choose_unit``):

- both sides aligned: per iteration;
- neither aligned, no time slice, and both captures span their whole program (``analysis.span``: each is one
  run of the program's work, whatever its launches — a new block size, a kernel split in two), or the same work
  (kernels holding ``SAME_WORK_SHARE`` of the kernel time launch as often per capture on both sides): **per
  run** — totals per capture, and each kernel's launches paired by ordinal where its launch counts match
  (launch-order chunk k before vs chunk k after: the same launches, the same work, whatever the work does
  across the run);
- else per window-second (a slice: launch counts are an accident of where it was cut).

``--unit run|window|iteration`` overrides, where the captures allow it. Why the unit was chosen is worded once
(``align_units``): every surface that names the unit shows those words.

The paired test (``paired_estimates``) is symmetric and does not take a trend for noise: the change is the
log ratio of the kernel's totals (the reverse pair gives exactly its negative), and its noise comes from the
successive differences of the chunks' log ratios (von Neumann), which a smooth trend across launches
cancels — Gaussian elimination's launches each work on a smaller matrix than the one before, and a
slowdown that grows along the run is still one change, not spread.
"""

from __future__ import annotations

import math

import numpy as np

from kbase.analysis.sketch import COUNT, TOTAL
from kbase.analysis.span import PROGRAM, SLICE
from kbase.comparison.noise import POWER_Z, Estimate
from kbase.comparison.side import Side, Unit, side_from_captures
from kbase.enums import WindowMode
from kbase.errors import InputError

SAME_WORK_SHARE = 0.9  # of the kernel time: launched equally often per capture on both sides
COUNT_TOLERANCE = 0.02  # launch counts per capture this close are "the same work"
MIN_PAIRED_CHUNKS = 4  # launch-order chunks (so launches) each side needs for a within-capture estimate
UNIT_CHOICES = ("run", "window", "iteration")  # what ``--unit`` accepts
_UNIT_OF_CHOICE = {"run": Unit.RUN, "window": Unit.WINDOW_SECOND, "iteration": Unit.ITERATION}


def same_work(before: Side, after: Side) -> bool:
    """Whether both sides ran the same work: the kernels of both sides holding ``SAME_WORK_SHARE`` of their
    time launch (nearly) equally often per capture, and either they hold at least half of the before side's
    time or both sides launch (nearly) as many kernels in all (a kernel replaced by another, say a faster one,
    leaves the program's launches as they were). A slice cut from a job that got slower or faster holds more
    or fewer launches of every kernel."""
    kb, ka = before.kernels, after.kernels
    if not len(kb) or not len(ka):
        return False
    pos = ka.positions(kb.index.tolist())
    both = pos >= 0
    cb = kb["count"][both] / before.n_captures
    ca = ka["count"][pos[both]] / after.n_captures
    weight = np.asarray(kb["total_ns"], dtype=float)
    matched = weight[both].sum()
    equal = np.abs(ca - cb) <= np.maximum(COUNT_TOLERANCE * cb, 0.5)
    nb, na = kb["count"].sum() / before.n_captures, ka["count"].sum() / after.n_captures
    as_many = abs(na - nb) <= max(COUNT_TOLERANCE * nb, 0.5)
    return bool(matched > 0 and (matched >= 0.5 * weight.sum() or as_many)
                and weight[both][equal].sum() >= SAME_WORK_SHARE * matched)


def side_span(side: Side) -> tuple[str | None, str]:
    """What the captures pooled on ``side`` span (``analysis.span``), with the reason: ``SLICE`` when one is cut by
    a clock (a ``--trim`` window stored before kbase looked counts), ``PROGRAM`` when every one spans its whole
    program, else the first other capture's (``RANGE``, or None: it does not say)."""
    spans = [(SLICE, "a --trim window") if c.summary.mode == WindowMode.TRIM and c.summary.capture_span is None
             else (c.summary.capture_span, c.summary.capture_span_why or "stored before kbase looked at the span")
             for c in side.captures]
    if not spans:
        return None, "no capture kept"
    sliced = [s for s in spans if s[0] == SLICE]
    other = [s for s in spans if s[0] != PROGRAM]
    return sliced[0] if sliced else other[0] if other else spans[0]


def _words(before: Side, after: Side, unit: Unit, requested: str | None) -> str:
    """Why ``unit`` was chosen, in words: the one place every surface takes them from."""
    if requested is not None:
        return f"asked for: --unit {requested}"
    if unit == Unit.ITERATION:
        return "both sides have iteration markers"
    if before.aligned or after.aligned:
        return "one side has iteration markers and the other none: no common unit"
    spans = [(side.label, *side_span(side)) for side in (before, after)]
    if unit == Unit.RUN:
        if all(kind == PROGRAM for _, kind, _ in spans):
            return "no iteration markers; both captures span their whole program"
        return "no iteration markers; the same launches per capture"
    for label, kind, why in spans:
        if kind == SLICE:
            return f"no iteration markers; {label} is a slice ({why})"
    return "no iteration markers; launch counts differ and the captures do not both span their program"


def choose_unit(before: Side, after: Side, requested: str | None = None) -> Unit:
    """The unit the two sides are compared in (module doc); ``requested``: ``UNIT_CHOICES`` or None."""
    if requested is not None:
        if requested not in _UNIT_OF_CHOICE:
            raise InputError(f"must be one of {', '.join(UNIT_CHOICES)}", field="unit", value=requested)
        unit = _UNIT_OF_CHOICE[requested]
        if unit == Unit.ITERATION:
            for side in (before, after):
                if not all(c.summary.aligned for c in side.captures) or not side.captures and not side.aligned:
                    raise InputError(f"{side.label} has no iteration markers: compare it per run or per window",
                                     field="unit", value=requested)
        return unit
    if before.aligned and after.aligned:
        return Unit.ITERATION
    if before.aligned or after.aligned:
        return Unit.WINDOW_SECOND  # one side without markers: incomparable (``diff.comparability``)
    spans = side_span(before)[0], side_span(after)[0]
    if SLICE in spans:  # cut by a clock: its launch counts are an accident of where, even when equal
        return Unit.WINDOW_SECOND
    if spans == (PROGRAM, PROGRAM):
        return Unit.RUN  # one run of the program's work each, whatever its launches
    return Unit.RUN if same_work(before, after) else Unit.WINDOW_SECOND


def in_unit(side: Side, unit: Unit) -> Side:
    """``side`` re-pooled per ``unit`` (itself when it already is, or when it keeps no captures)."""
    if side.unit == unit or not side.captures:
        return side
    return side_from_captures(list(side.captures), side.label, side.meta, unit)


WHAT_THE_UNIT_DOES = {Unit.RUN: "totals per capture, launches paired by ordinal where counts match",
                      Unit.WINDOW_SECOND: "judged on time per launch",
                      Unit.ITERATION: "iteration k against iteration k"}


def align_units(before: Side, after: Side, requested: str | None = None) -> tuple[Side, Side, str, list[str]]:
    """Both sides in the unit chosen for them, why it was chosen (``_words``), and a note saying both. One side
    with iteration markers and one without stay as they are, unless a unit is asked for: they have no common
    unit (``diff.comparability`` says so)."""
    if before.aligned != after.aligned and not requested:
        return before, after, _words(before, after, Unit.WINDOW_SECOND, None), []
    unit = choose_unit(before, after, requested)
    b, a = in_unit(before, unit), in_unit(after, unit)
    why = _words(before, after, unit, requested)
    notes = [] if unit == Unit.ITERATION and not requested else [f"unit: the {unit.value} ({why}): "
                                                                 f"{WHAT_THE_UNIT_DOES[unit]}"]
    return b, a, why, notes


def _von_neumann(logs: np.ndarray) -> tuple[float, float]:
    """Variance of one chunk's log ratio from successive differences (a smooth trend cancels) and its
    effective degrees of freedom (the estimator is 2/3 as efficient as the plain variance)."""
    n = len(logs)
    d = np.diff(logs)
    var = float((d * d).sum() / (2.0 * (n - 1)))
    return var, 2.0 * (n - 1) ** 2 / (3.0 * n - 4.0)


def paired_estimates(before: np.ndarray, after: np.ndarray, resolution_ns: float = 0.0) -> list[Estimate | None]:
    """Per kernel ((k, CHUNKS, WIDTH) launch sketches each side), the paired change of its time per launch over
    the launch-order chunks that hold (nearly) as many launches on both sides (the same ordinals): the log
    ratio of the mean launch times — with equal counts, of the totals — and its standard error (module doc);
    None with fewer than ``MIN_PAIRED_CHUNKS`` such chunks."""
    out: list[Estimate | None] = []
    tb_all, ta_all = before[..., TOTAL], after[..., TOTAL]
    cb_all, ca_all = before[..., COUNT], after[..., COUNT]
    for tb, ta, cb, ca in zip(tb_all, ta_all, cb_all, ca_all):
        ok = ((tb > 0) & (ta > 0) & (np.abs(ca - cb) <= np.maximum(COUNT_TOLERANCE * cb, 0.5)) & np.isfinite(tb)
              & np.isfinite(ta))
        n = int(ok.sum())
        if n < MIN_PAIRED_CHUNKS:
            out.append(None)
            continue
        b, a = tb[ok] / cb[ok], ta[ok] / ca[ok]  # mean launch time per chunk
        logs = np.log(a / b)
        var, df = _von_neumann(logs)
        w = np.sqrt(a * b)
        w = w / w.sum()  # symmetric weights: the reverse pair gets the same
        se = math.sqrt(var * float((w * w).sum()))
        per = float(cb[ok].sum())
        floor = resolution_ns / math.sqrt(12.0) * math.sqrt(2.0 / per) / math.sqrt(float(a.mean() * b.mean()))
        out.append(Estimate(rel=float(math.log(a.sum() / b.sum())), se=max(se, floor), source="launches", n=n,
                            df=df))
    return out


def run_total_p(rows: dict[str, np.ndarray], share_floor: float) -> tuple[float, bool]:
    """Per run: the two-sided p of the change of total kernel time and whether it could be judged, from the
    kernels' own paired tests (the log ratio of the totals; each matched kernel's standard error weighted by
    its symmetric share of the time; new and gone kernels are certain). Not judged when a matched kernel above
    ``share_floor`` could not be judged itself: the total's noise is then unknown too."""
    b, a = np.asarray(rows["before"], float), np.asarray(rows["after"], float)
    if not len(b) or not b.sum() > 0 or not a.sum() > 0:
        return 1.0, False
    matched = (b > 0) & (a > 0)
    se = np.asarray(rows["noise_rel"], float)
    share = np.fmax(np.nan_to_num(rows["share_before"], nan=0.0), np.nan_to_num(rows["share_after"], nan=0.0))
    unjudged = matched & ~np.isfinite(se) & (share >= share_floor)
    if unjudged.any():
        return 1.0, False
    w = np.sqrt(b * a) / float(np.sqrt(b * a).sum())
    var = float(np.nansum(np.where(matched, (w * se) ** 2, 0.0)))
    z = math.log(a.sum() / b.sum()) / max(math.sqrt(var), 1e-12)
    return math.erfc(abs(z) / math.sqrt(2.0)), True


MIN_REPEATS = 3  # repeat captures of one commit whose spread is a kernel's run-to-run noise


def needed_mde(z_crit: float, run_noise: float, captures: tuple[int, int]) -> float:
    """For a kernel that cannot be judged: the MDE (80% power) a judgement would have with ``MIN_REPEATS``
    captures a side (at least those it has) whose spread were the assumed ``run_noise`` per capture."""
    n = (max(captures[0], MIN_REPEATS), max(captures[1], MIN_REPEATS))
    return (z_crit + POWER_Z) * run_noise * math.sqrt(1 / n[0] + 1 / n[1])

"""``kbase bisect``'s search, as pure functions: what a midpoint is judged (``judge_midpoint``), which commit to
probe next (``next_probe``) and what the probes found (``conclude``). No git, no store, no process: the API
(``api.bisecting``) runs the captures and hands the comparisons here.

The commits are the first-parent line from GOOD (index 0, good) to BAD (index n, bad). A midpoint is compared
with GOOD and with BAD (as the candidate side of both) by the diff the gate decides on (``comparison.diff``:
each kernel or op against its own noise, history and repeats included); the target's class in each says
whether it moved. Like GOOD: it did not
move from GOOD but does to BAD; like BAD: the reverse; **undecided** otherwise (moved from both — a partial
change — or from neither: within the noise of both). An undecided midpoint is never guessed into a side: the
search finds the last commit like GOOD and the first like BAD around it and reports that range.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from kbase.enums import KernelClass
from kbase.policy import name_matches

if TYPE_CHECKING:
    from kbase.comparison.diff import DiffResult
    from kbase.policy import Policy


class MidpointVerdict(StrEnum):
    GOOD = "good"  # like GOOD
    BAD = "bad"  # like BAD
    UNDECIDED = "undecided"  # like neither, or within the noise of both
    SKIPPED = "skipped"  # the capture command failed there (``git bisect skip``)


class TargetKind(StrEnum):
    KERNEL = "kernel"
    OP = "op"
    STEP = "step"


@dataclass(frozen=True)
class Target:
    """What is bisected: kernels matching a glob or ``/regex/`` (``kernel``), an op by its key or its name
    without scope (``op``), or the step time per iteration (``step``, ``pattern`` empty)."""

    kind: TargetKind
    pattern: str = ""
    label: str = ""  # how outputs name it (a kernel's short name); the pattern when empty

    def describe(self) -> str:
        if self.kind == TargetKind.STEP:
            return "the step time per iteration"
        return f"{self.kind} {self.label or self.pattern}"


# A change the diff established: significant against the noise (below the gate's min_effect_pct too: GOOD -> BAD
# already showed the change is real, a midpoint only has to say on which side it lies), or present on one side.
MOVED = frozenset({KernelClass.REGRESSED, KernelClass.REGRESSED_BELOW_FLOOR, KernelClass.IMPROVED,
                   KernelClass.NEW, KernelClass.GONE})


@dataclass(frozen=True)
class StepNoise:
    """The step time's run-to-run relative sd and where it came from (stored history or repeat captures; the
    policy's ``run_noise`` floor without either)."""

    rel_sd: float
    source: str


def step_noise(at_good: list[float], line: list[list[float]], policy: Policy) -> StepNoise:
    """The step time's run-to-run relative sd: from the repeat captures at GOOD (``at_good``: their step times),
    else the spread of the baselines along GOOD's first-parent line (``line``: each commit's step times, oldest
    first; consecutive relative changes, robust: median absolute / 0.6745, over sqrt 2), never below the policy's
    ``run_noise``; the policy's ``run_noise`` alone without either."""
    import statistics

    good = [v for v in at_good if math.isfinite(v) and v > 0]
    if len(good) >= 2:
        sd = statistics.stdev(good) / statistics.fmean(good)
        return StepNoise(max(sd, policy.run_noise), f"{len(good)} repeat captures at GOOD")
    levels = [statistics.fmean(vs) for vs in ([v for v in c if math.isfinite(v) and v > 0] for c in line) if vs]
    rel = [abs(b / a - 1.0) for a, b in zip(levels, levels[1:])]
    if len(rel) + 1 >= policy.min_history:
        sd = statistics.median(rel) / 0.6745 / math.sqrt(2.0)
        return StepNoise(max(sd, policy.run_noise), f"history of {len(levels)} baselines")
    return StepNoise(policy.run_noise, "policy run_noise (assumed: too little history)")


def step_moved(result: DiffResult, noise: StepNoise, fpr: float) -> bool:
    """Whether the step time per iteration moved between the sides: the diff's step rule
    (``comparison.step.judge``: regressed or improved, on the sides' budgets), with the between-process noise
    bisect measured (repeat captures at GOOD, the line's history) in place of the rule's fallback when it has
    one. Baselines stored before the budget: a two-sided z test of the step (or GPU wall) change of two
    captures, each with sd ``noise.rel_sd``, at false-positive rate ``fpr``."""
    from kbase.comparison.noise import z_threshold
    from kbase.comparison.step import judge

    b, sb, sa = result.budget, result.before.budget, result.after.budget
    if b is not None and b.step is not None and sb is not None and sa is not None:
        run = None if noise.source == "policy run_noise" else (max(noise.rel_sd, result.policy.run_noise),
                                                               noise.source)
        j = judge(sb.samples(b.step_source), sa.samples(b.step_source), result.policy, run_sd=run)
        return j is not None and (j.regressed or j.improved)
    t = result.totals.step_wall or result.totals.iteration_wall
    if not t.before or not math.isfinite(t.delta_pct):
        return False
    return abs(t.delta_pct / 100.0) > z_threshold(fpr, 1) * noise.rel_sd * math.sqrt(2.0)


def target_moved(result: DiffResult, target: Target, step_noise: StepNoise | None = None) -> bool | None:
    """Whether the target changed between the two sides of ``result``; None when neither side has it."""
    if target.kind == TargetKind.STEP:
        return step_moved(result, step_noise or StepNoise(result.policy.run_noise, "policy run_noise"),
                          result.policy.fpr)
    if target.kind == TargetKind.OP:
        rows = [r for r in (result.ops.records() if result.ops is not None else [])
                if r["op"] == target.pattern or r["bare"] == target.pattern]
    else:
        rows = [r for r in result.records()
                if name_matches(target.pattern, r["name"]) or name_matches(target.pattern, r["short_name"])]
    if not rows:
        return None
    # a swapped kernel moved when it did alone (``own_class``), whatever its op's verdict; an op row has its own
    return any(r.get("own_class", r["class"]) in MOVED for r in rows)


def judge_midpoint(vs_good: DiffResult, vs_bad: DiffResult, target: Target,
                   step_noise: StepNoise | None = None) -> MidpointVerdict:
    """GOOD -> midpoint and BAD -> midpoint (a move either way counts): like GOOD when only the second moved,
    like BAD when only the first did, undecided otherwise. The one place a midpoint is judged (the step verdict
    plugs in here)."""
    from_good = target_moved(vs_good, target, step_noise)
    to_bad = target_moved(vs_bad, target, step_noise)
    if from_good is None or to_bad is None:
        return MidpointVerdict.UNDECIDED
    if to_bad and not from_good:
        return MidpointVerdict.GOOD
    if from_good and not to_bad:
        return MidpointVerdict.BAD
    return MidpointVerdict.UNDECIDED


def default_target(good_vs_bad: DiffResult) -> Target | None:
    """The kernel whose change between GOOD and BAD weighs most on the iteration: a gate-failing regression
    first, then any change the diff established (largest |effect|); an op judged as a unit (swapped kernels)
    when no kernel alone moved. None: nothing moved beyond the noise."""
    from kbase.analysis.lookup import exact_pattern

    rows = [r for r in good_vs_bad.records() if r["class"] in MOVED and not r["swap"]]
    if rows:
        best = max(rows, key=lambda r: (r["gated"], abs(r["effect"]) if math.isfinite(r["effect"]) else 0.0))
        return Target(TargetKind.KERNEL, exact_pattern(best["name"]), best["short_name"])
    ops = [r for r in (good_vs_bad.ops.records() if good_vs_bad.ops is not None else []) if r["class"] in MOVED]
    if ops:
        best = max(ops, key=lambda r: (r["gated"], abs(r["effect"]) if math.isfinite(r["effect"]) else 0.0))
        return Target(TargetKind.OP, str(best["bare"]), str(best["bare"]))
    return None


# ------------------------------------------------------------------------------------------ the search


@dataclass(frozen=True)
class Bounds:
    """Where the search stands on indices 0..n: ``good`` the last index like GOOD below ``bad``, the first like
    BAD; ``undecided`` the undecided indices between them (sorted)."""

    good: int
    bad: int
    undecided: list[int] = field(default_factory=list)


def bounds(n: int, verdicts: Mapping[int, MidpointVerdict]) -> Bounds:
    """The innermost pair of decided indices: the first bad index, and the last good one below it (0 and n are
    GOOD and BAD themselves). A noisy inversion (good above bad) is ignored by construction: bad wins below."""
    bad = min([i for i, v in verdicts.items() if v == MidpointVerdict.BAD and 0 < i < n] + [n])
    good = max([i for i, v in verdicts.items() if v == MidpointVerdict.GOOD and 0 < i < bad] + [0])
    undecided = sorted(i for i, v in verdicts.items() if v == MidpointVerdict.UNDECIDED and good < i < bad)
    return Bounds(good, bad, undecided)


def _middle(lo: int, hi: int, verdicts: Mapping[int, MidpointVerdict]) -> int | None:
    """The untested index strictly between ``lo`` and ``hi`` nearest their middle (lower one on a tie)."""
    open_ = [i for i in range(lo + 1, hi) if i not in verdicts]
    if not open_:
        return None
    mid = (lo + hi) / 2.0
    return min(open_, key=lambda i: (abs(i - mid), i))


def next_probe(n: int, verdicts: Mapping[int, MidpointVerdict]) -> int | None:
    """The index to capture next, or None when the probes settle all they can. Without undecided midpoints:
    the middle of (last good, first bad). With some: the middle of the larger of the two gaps left to close,
    (last good, first undecided) and (last undecided, first bad), so the answer is the range from the last
    commit like GOOD to the first like BAD."""
    b = bounds(n, verdicts)
    if not b.undecided:
        return _middle(b.good, b.bad, verdicts)
    gaps = [(b.good, b.undecided[0]), (b.undecided[-1], b.bad)]
    candidates = [(sum(1 for i in range(lo + 1, hi) if i not in verdicts), lo, hi) for lo, hi in gaps]
    for _, lo, hi in sorted(candidates, key=lambda c: -c[0]):
        probe = _middle(lo, hi, verdicts)
        if probe is not None:
            return probe
    return None


@dataclass(frozen=True)
class Conclusion:
    """``first_bad``: the index of the first commit like BAD when the probes single it out (its parent like
    GOOD); else ``range``: (last like GOOD, first like BAD) with the undecided or skipped commits between."""

    first_bad: int | None
    range: tuple[int, int] | None
    undecided: list[int]
    skipped: list[int]


def conclude(n: int, verdicts: Mapping[int, MidpointVerdict]) -> Conclusion:
    b = bounds(n, verdicts)
    skipped = sorted(i for i, v in verdicts.items() if v == MidpointVerdict.SKIPPED and b.good < i < b.bad)
    if b.bad == b.good + 1:
        return Conclusion(b.bad, None, [], [])
    return Conclusion(None, (b.good, b.bad), b.undecided, skipped)


def probes_needed(n: int) -> int:
    """Captures a clean search over n commits after GOOD takes at most: ceil(log2 n)."""
    return max(0, math.ceil(math.log2(n))) if n > 1 else 0

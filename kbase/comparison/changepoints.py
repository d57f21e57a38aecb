"""Step changes in one kernel's history: binary segmentation of its per-commit levels.

Plain Python for one kernel's history (no numpy, no change-point library: ``kbase history`` stays light);
``kbase steps`` hands every kernel over thousands of baselines as one numpy matrix, and then the same
arithmetic runs on arrays (``_best_split_array``, ``level_noise_array``, ``commit_levels``: the same
operations in the same order, so the same results to the bit). A segment is split
where the two halves' means differ most (the least-squares gain n_l·n_r/n·(mean_l - mean_r)², from
cumulative sums: O(n) per segment), when that gain exceeds a penalty ``penalty · log(n) · sigma²``;
sigma is the run-to-run noise, estimated robustly from the series itself (median absolute successive
difference: steps do not inflate it) unless given. After the recursion every boundary is re-checked
against its neighbouring segments. Several small steps in one direction in a row are reported as one
creep with their cumulative size.

``ruptures`` (BinSeg with an L2 cost) does the same search: measured, the same boundaries on 2,000
generated 40-point series, ~30x slower per series, and its import (scipy) takes ~0.9 s; these few
cumulative sums need no dependency, so it is not one. Results
equal the former numpy version's (checked on 3,000 random series with steps and gaps).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING, Any

from kbase.comparison.levels import MAD_TO_SD, level_noise, median

if TYPE_CHECKING:
    import numpy as np

PENALTY = 6.0  # in units of log(n)·sigma²: calibrated on noise-only generated histories (benchmarks/calibrate.py)
MIN_SIZE = 2  # points per segment
CREEP_MAX_REL = 0.025  # a step at most this large (relative) may be part of a creep
CREEP_MIN_STEPS = 3


@dataclass(frozen=True)
class Step:
    index: int  # first point at the new level
    before: float  # mean level of the segment before
    after: float  # mean level of the segment after
    z: float  # |after - before| in standard errors of the difference

    @property
    def rel(self) -> float:
        return self.after / self.before - 1.0 if self.before else float("inf")


@dataclass(frozen=True)
class Creep:
    first: int  # index of the first step's new level
    last: int  # index of the last step's new level
    steps: int
    before: float  # level before the first step
    after: float  # level after the last step

    @property
    def rel(self) -> float:
        return self.after / self.before - 1.0 if self.before else float("inf")


def _best_split(x: Sequence[float], min_size: int) -> tuple[int, float]:
    n = len(x)
    if n < 2 * min_size:
        return -1, 0.0
    if _is_array(x):
        return _best_split_array(x, min_size)  # type: ignore[arg-type]
    s = list(accumulate(x))
    total = s[-1]
    whole = total * total / n
    best_k, best = -1, -math.inf
    for k in range(min_size, n - min_size + 1):
        left = s[k - 1]
        right = total - left
        gain = left * left / k + right * right / (n - k) - whole
        if gain > best:  # the first of equal gains, as argmax
            best_k, best = k, gain
    return best_k, best


def _best_split_array(x: np.ndarray, min_size: int) -> tuple[int, float]:
    """``_best_split`` of a numpy series: the same sums (a cumulative sum adds left to right, as
    ``accumulate``) and the same operations per candidate, so the same split and gain."""
    import numpy as np

    n = len(x)
    s = np.cumsum(x)
    total = float(s[-1])
    whole = total * total / n
    k = np.arange(min_size, n - min_size + 1)
    left = s[k - 1]
    right = total - left
    gain = left * left / k + right * right / (n - k) - whole
    i = int(np.argmax(gain))  # the first of equal gains
    return int(k[i]), float(gain[i])


def _mean(x: Sequence[float]) -> float:
    return math.fsum(x.tolist() if _is_array(x) else x) / len(x)  # type: ignore[attr-defined]


def detect_steps(levels: Iterable[float], sigma: float | None = None, *, penalty: float = PENALTY,
                 min_size: int = MIN_SIZE, min_rel: float = 0.0) -> list[Step]:
    """Steps in a 1-D series of levels (oldest first, finite values). ``sigma``: absolute noise sd of
    one level (default: estimated robustly from the series). ``min_rel``: smallest relative step kept."""
    x: Any = _as_series(levels)
    n = len(x)
    if n < 2 * min_size:
        return []
    if sigma is None:
        array = _is_array(x)
        rel_sd = level_noise_array(x) if array else level_noise(x)
        sigma = rel_sd * (_median_array(x) if array else median(x)) if math.isfinite(rel_sd) else 0.0
    biggest = float(abs(x).max()) if _is_array(x) else max(abs(v) for v in x)
    sigma = max(float(sigma), 1e-9 * max(biggest, 1.0))
    pen = penalty * math.log(n) * sigma * sigma
    cuts: list[int] = []
    todo = [(0, n)]
    while todo:
        lo, hi = todo.pop()
        k, gain = _best_split(x[lo:hi], min_size)
        if k > 0 and gain > pen:
            cuts.append(lo + k)
            todo += [(lo, lo + k), (lo + k, hi)]
    cuts.sort()
    changed = True
    while changed and cuts:  # prune boundaries that no longer hold against their neighbours
        changed = False
        edges = [0, *cuts, n]
        for j in range(1, len(edges) - 1):
            a, b, c = edges[j - 1], edges[j], edges[j + 1]
            ml, mr = _mean(x[a:b]), _mean(x[b:c])
            nl, nr = b - a, c - b
            if nl * nr / (nl + nr) * (ml - mr) ** 2 <= pen or (ml and abs(mr / ml - 1.0) < min_rel):
                cuts.remove(b)
                changed = True
                break
    edges = [0, *cuts, n]
    out = []
    for j in range(1, len(edges) - 1):
        a, b, c = edges[j - 1], edges[j], edges[j + 1]
        ml, mr = _mean(x[a:b]), _mean(x[b:c])
        se = sigma * math.sqrt(1 / (b - a) + 1 / (c - b))
        out.append(Step(index=b, before=ml, after=mr, z=abs(mr - ml) / se))
    return out


def _is_array(x: Any) -> bool:
    """A numpy array (checked without importing numpy: ``kbase history`` never loads it)."""
    return type(x).__name__ == "ndarray"


def _as_series(levels: Iterable[float]) -> Any:
    """A list of floats, or a float64 numpy array as it is (the vectorised path)."""
    if _is_array(levels):
        return levels.astype(float)  # type: ignore[attr-defined]
    return [float(v) for v in levels]


def _median_array(x: np.ndarray) -> float:
    """``levels.median`` of a numpy series (the middle value, or the mean of the two middle ones: the same)."""
    import numpy as np

    return float(np.median(x))


def level_noise_array(x: np.ndarray) -> float:
    """``levels.level_noise`` of a numpy series of finite levels: the same statistics, vectorised."""
    import numpy as np

    if len(x) < 3:
        return float("nan")
    centre = _median_array(x)
    if centre <= 0:
        return float("nan")
    return float(np.median(np.abs(x[1:] - x[:-1]))) * MAD_TO_SD / centre


def _sign(v: float) -> float:
    return math.nan if v != v else float((v > 0) - (v < 0))  # NaN matches nothing, as numpy's sign


def find_creeps(steps: list[Step], *, max_rel: float = CREEP_MAX_REL, min_steps: int = CREEP_MIN_STEPS) -> list[Creep]:
    """Runs of at least ``min_steps`` consecutive steps in one direction, each at most ``max_rel``."""
    out: list[Creep] = []
    run: list[Step] = []

    def flush() -> None:
        if len(run) >= min_steps:
            out.append(Creep(first=run[0].index, last=run[-1].index, steps=len(run), before=run[0].before,
                             after=run[-1].after))

    for s in steps:
        small = abs(s.rel) <= max_rel
        same = run and _sign(s.rel) == _sign(run[-1].rel)
        if small and (not run or same):
            run.append(s)
        else:
            flush()
            run = [s] if small else []
    flush()
    return out


STEPS_SCHEMA = "kbase.steps/1"
MIN_STEP_REL = 0.005  # steps under 0.5% of the kernel's time are not listed


@dataclass(frozen=True)
class KernelStep:
    """One detected change of one kernel over a line of commits (a step, or a creep of several)."""

    name: str
    short_name: str
    kind: str  # "step" | "creep"
    from_commit: str  # last commit at the old level
    to_commit: str  # first commit at the new level (a creep: of its last step)
    first_commit: str  # a creep: first commit at its first new level (a step: = to_commit)
    before_ns: float  # per iteration per GPU
    after_ns: float
    rel: float
    effect: float  # (after - before) / iteration wall time
    steps: int
    z: float


def commit_levels(levels: Any, commits: list[str]) -> tuple[Any, list[str]]:
    """Per row (one value per baseline, in line order) the mean of its finite values per commit (NaN where
    none), commits in first-seen order. One pass (a 10,000-baseline history has up to 10,000 commits:
    no per-commit scan); a numpy matrix gives a matrix, its repeated commits summed left to right as here."""
    index: dict[str, int] = {}
    col = [index.setdefault(c, len(index)) for c in commits]
    if _is_array(levels):
        return _commit_levels_array(levels, col, len(index)), list(index)
    out = []
    for row in levels:
        sums, counts = [0.0] * len(index), [0] * len(index)
        for j, v in zip(col, row):
            v = float(v)
            if math.isfinite(v):
                sums[j] += v
                counts[j] += 1
        out.append([t / m if m else math.nan for t, m in zip(sums, counts)])
    return out, list(index)


def _commit_levels_array(levels: np.ndarray, col: list[int], n_commits: int) -> np.ndarray:
    import numpy as np

    levels = np.asarray(levels, dtype=float)
    if n_commits == len(col) and col == list(range(n_commits)):  # one baseline per commit: the levels
        return levels if not np.isinf(levels).any() else np.where(np.isinf(levels), np.nan, levels)
    finite = np.isfinite(levels)
    out = np.full((len(levels), n_commits), np.nan)
    groups: dict[int, list[int]] = {}
    for j, c in enumerate(col):
        groups.setdefault(c, []).append(j)
    for c, js in groups.items():  # in baseline order, as the loop above adds them
        sums, counts = np.zeros(len(levels)), np.zeros(len(levels), dtype=np.int64)
        for j in js:
            sums += np.where(finite[:, j], levels[:, j], 0.0)
            counts += finite[:, j]
        out[:, c] = np.divide(sums, counts, out=np.full(len(levels), np.nan), where=counts > 0)
    return out


def series_steps(values: Sequence[float], commits: list[str], *, min_rel: float = MIN_STEP_REL) -> list[tuple]:
    """(step or creep, from_commit, first_commit, to_commit) of one kernel's per-commit levels
    (NaN: not run at that commit, skipped); steps inside a creep are reported as the creep."""
    series: Any
    ok: Any  # positions of the finite levels: a numpy array for a numpy row (its items index a list as ints do)
    if _is_array(values):  # a numpy row
        import numpy as np

        ok = np.flatnonzero(np.isfinite(values))
        series = values[ok]
    else:
        ok = [i for i, v in enumerate(values) if math.isfinite(v)]
        series = [values[i] for i in ok]
    if len(ok) < 2 * MIN_SIZE:
        return []
    found = detect_steps(series, min_rel=min_rel)
    creeps = find_creeps(found)
    inside = {s.index for c in creeps for s in found if c.first <= s.index <= c.last}
    out: list[tuple] = [(c, commits[ok[c.first - 1]], commits[ok[c.first]], commits[ok[c.last]]) for c in creeps]
    out += [(s, commits[ok[s.index - 1]], commits[ok[s.index]], commits[ok[s.index]]) for s in found
            if s.index not in inside]
    return out


def kernel_steps(levels: Iterable[Iterable[float]], names: list[str], shorts: list[str], commits: list[str],
                 wall_ns: float) -> list[KernelStep]:
    """Steps and creeps of every kernel (rows of ``levels``: per baseline, in line order), largest
    effect on the iteration first."""
    per_commit, order = commit_levels(levels, commits)
    out = []
    for i, name in enumerate(names):
        for found, frm, first, to in series_steps(per_commit[i], order):
            creep = isinstance(found, Creep)
            z = float("nan") if creep else found.z
            out.append(KernelStep(name=name, short_name=shorts[i], kind="creep" if creep else "step",
                                  from_commit=frm, first_commit=first, to_commit=to, before_ns=found.before,
                                  after_ns=found.after, rel=found.rel,
                                  effect=(found.after - found.before) / wall_ns if wall_ns else float("nan"),
                                  steps=found.steps if creep else 1, z=z))
    out.sort(key=lambda s: (-abs(s.effect) if s.effect == s.effect else 0.0, s.name))
    return out


def kernel_history_steps(per_iter_ns: list[float | None], commits: list[str]) -> list[KernelStep]:
    """Steps and creeps in one kernel's per-iteration time over baselines (oldest first)."""
    if not per_iter_ns:
        return []
    levels = [math.nan if v is None else float(v) for v in per_iter_ns]
    return kernel_steps([levels], ["kernel"], ["kernel"], commits, float("nan"))

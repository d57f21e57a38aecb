"""Pick the window a leaderboard is built on: iterations (default), or a time trim.

Default: every complete iteration after the warm-up ones (autotuning, allocator growth, lazy
init). ``DEFAULT_WARMUP`` iterations are skipped when at least ``DEFAULT_WARMUP + 2`` exist, so a
short capture keeps at least two steps. ``--iterations A:B`` (positions among detected
iterations, Python slice rules) overrides the warm-up skip. ``--trim START END`` (seconds on the
capture clock) is the escape hatch; a trimmed window is not iteration-aligned.

Nothing is left out silently: a GPU whose rank or process has no step marker would fall out of an
iteration window, so it is an error unless ``WindowSpec.allow_missing_ranks`` (then it is listed
in ``Window.missing_gpus`` and a note). Every note the reader left in ``profile.extra["notes"]``
(rows excluded, ranks unreadable) is carried into ``Window.notes``, so every output shows it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kbase.analysis.iterations import NOT_IN_ITERATION, Iterations, MarkerRanges, attribute, gpus_left_out
from kbase.analysis.span import Span, capture_span
from kbase.analysis.spec import WindowSpec
from kbase.enums import AttributionMode, WindowMode
from kbase.errors import WindowError
from kbase.readers.profile import Profile, gpu_bounds

if TYPE_CHECKING:
    import pandas as pd

DEFAULT_WARMUP = 1
_RUN_MIN_LAUNCHES = 512  # below that many kept launches per run on average, a column is gathered by the mask


@dataclass
class Window:
    """The selected launches, as a mask over ``profile.columns`` (no copy of a 10M-launch table)."""

    profile: Profile
    spec: WindowSpec
    mask: np.ndarray  # bool, one per launch of profile.columns
    iteration: np.ndarray  # int64 iteration key per launch (-1: none)
    aligned: bool
    mode: WindowMode
    marker: str
    iteration_keys: list[int]
    available_keys: list[int]
    warmup_skipped: int
    start_ns: int
    end_ns: int
    n_gpus: int
    no_launch: int = 0  # kernels of the capture whose launch call is not in it
    outside: int = 0  # kernels launched outside every iteration
    notes: list[str] = field(default_factory=list)
    missing_gpus: list[int] = field(default_factory=list)  # left out: no step marker (allowed by the spec)
    # the host's marker ranges with their iteration key (iteration windows): the step time the budget reads
    marker_ranges: MarkerRanges | None = None
    span: Span | None = None  # whether the capture spans its whole program (``analysis.span``)
    gpus: list[int] | None = None  # the GPUs with a launch in the window, ascending (None: not counted)
    # the mask's runs of kept launches, [start, end) (None: too many, or not found yet; see ``_kept_runs``)
    _runs: list[tuple[int, int]] | None = field(default=None, init=False, repr=False, compare=False)
    _runs_found: bool = field(default=False, init=False, repr=False, compare=False)

    def column(self, name: str) -> np.ndarray:
        """One column of the window's launches ("iteration" included) as a numpy array (a new one: callers may
        write to it)."""
        col = self.iteration if name == "iteration" else getattr(self.profile.columns, name)
        if col is None:
            raise KeyError(f"{name} was dropped from the profile")
        runs = self._kept_runs()
        if runs is None:
            return col[self.mask]
        return np.concatenate([col[a:b] for a, b in runs]) if runs else col[:0].copy()

    def _kept_runs(self) -> list[tuple[int, int]] | None:
        """The runs of kept launches when they are long (an iteration window of launches in (GPU, start) order:
        one run per GPU): copying them costs half the gather by a boolean mask. Found once per window."""
        if not self._runs_found:
            m = self.mask
            edges = np.flatnonzero(m[1:] != m[:-1]) + 1
            if len(edges) * _RUN_MIN_LAUNCHES <= 2 * len(m):  # runs of at least that many launches on average
                cuts = ([0] if len(m) and m[0] else []) + edges.tolist() + ([len(m)] if len(m) and m[-1] else [])
                self._runs = list(zip(cuts[0::2], cuts[1::2]))
            self._runs_found = True
        return self._runs

    @property
    def n_launches(self) -> int:
        return int(np.count_nonzero(self.mask))

    @property
    def kernels(self) -> pd.DataFrame:
        """The window's launches as a DataFrame copy, with their iteration (for inspection)."""
        k = self.profile.kernels[self.mask].copy()
        k["iteration"] = self.iteration[self.mask]
        return k

    @property
    def length_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    @property
    def gpu_ns(self) -> int:
        """The share denominator: window length × GPUs."""
        return self.length_ns * self.n_gpus

    @property
    def n_iterations(self) -> int:
        return len(self.iteration_keys)

    def describe(self) -> str:
        if self.mode == "iterations":
            keys = self.iteration_keys
            rng = f"{keys[0]}..{keys[-1]}" if len(keys) > 1 else f"{keys[0]}"
            return (
                f"iterations {rng} ({len(keys)} of {len(self.available_keys)}, marker {self.marker}, "
                f"warm-up skipped: {self.warmup_skipped})"
            )
        if self.mode == "trim":
            return f"trim {self.start_ns / 1e9:.6f}s..{self.end_ns / 1e9:.6f}s (NOT iteration-aligned)"
        return "whole capture (NOT iteration-aligned: no iteration marker found)"


def parse_slice(text: str) -> tuple[int | None, int | None]:
    parts = text.split(":")
    if len(parts) != 2:
        raise WindowError("expected A:B (for example 2:10, 3: or :5)", field="iterations", value=text)
    try:
        a = int(parts[0]) if parts[0].strip() else None
        b = int(parts[1]) if parts[1].strip() else None
    except ValueError:
        raise WindowError("A and B must be integers", field="iterations", value=text) from None
    return a, b


def select_window(profile: Profile, spec: WindowSpec) -> Window:
    if spec.gpu is not None:
        present = np.flatnonzero(np.bincount(profile.columns.gpu)).tolist() if len(profile.columns) else []
        if spec.gpu not in present:
            raise WindowError(f"no such GPU in {profile.source}", field="gpu", value=spec.gpu, available=present)
    if spec.trim is not None:
        return _trim_window(profile, spec)
    its = attribute(profile, spec.marker, spec.iteration_kernel)
    if its.mode == AttributionMode.NONE:
        return _whole_window(profile, spec, its)
    return _iteration_window(profile, spec, its)


def _gpu_filter(profile: Profile, spec: WindowSpec, mask: np.ndarray) -> np.ndarray:
    if spec.gpu is not None:
        mask &= profile.columns.gpu == spec.gpu
    return mask


def _make(profile, spec, mask, iteration, gpus: list[int] | None = None, **kw) -> Window:
    """The window of ``mask``; ``gpus``: the GPUs with a launch in it when the caller counted them."""
    if gpus is None:
        gpu = profile.columns.gpu[mask]
        gpus = np.flatnonzero(np.bincount(gpu)).tolist() if len(gpu) else []
    if "start_ns" not in kw:
        start, end = profile.columns.start, profile.columns.end
        if gpus:  # reductions where the mask holds: no copy of the kept launches' columns
            kw["start_ns"] = int(np.min(start, where=mask, initial=np.iinfo(start.dtype).max))
            kw["end_ns"] = int(np.max(end, where=mask, initial=np.iinfo(end.dtype).min))
        else:  # no launch: numpy's own error, as ever
            kw["start_ns"], kw["end_ns"] = int(start[mask].min()), int(end[mask].max())
    # the reader's notes (rows excluded, ranks left out) travel with every window of the profile
    notes = [str(n) for n in profile.extra.get("notes", [])]
    span = capture_span(profile, mask, trimmed=kw["mode"] == WindowMode.TRIM, no_launch=kw.get("no_launch", 0),
                        start_ns=kw["start_ns"], end_ns=kw["end_ns"])
    return Window(profile=profile, spec=spec, mask=mask, iteration=iteration, n_gpus=len(gpus), notes=notes, span=span,
                  gpus=gpus, **kw)


def _trim_window(profile: Profile, spec: WindowSpec) -> Window:
    assert spec.trim is not None
    lo_s, hi_s = spec.trim
    if not (math.isfinite(lo_s) and math.isfinite(hi_s)):
        raise WindowError("START and END must be finite numbers of seconds", field="trim", value=spec.trim)
    if hi_s <= lo_s:
        raise WindowError("END must be after START", field="trim", value=spec.trim)
    lo, hi = round(lo_s * 1e9), round(hi_s * 1e9)
    start = profile.columns.start
    mask = _gpu_filter(profile, spec, (start >= lo) & (start < hi))
    if not mask.any():
        first, last = profile.span()
        raise WindowError(f"no kernel starts in that window; the capture's kernels run from {first / 1e9:.6f}s "
                          f"to {last / 1e9:.6f}s", field="trim", value=spec.trim)
    it = np.full(len(start), NOT_IN_ITERATION, dtype=np.int64)
    return _make(profile, spec, mask, it, aligned=False, mode=WindowMode.TRIM, marker="", iteration_keys=[],
                 available_keys=[], warmup_skipped=0, start_ns=lo, end_ns=hi)


def _whole_window(profile: Profile, spec: WindowSpec, its: Iterations) -> Window:
    if spec.iterations is not None:
        raise WindowError(f"{profile.source} has no iteration marker (give a marker or an iteration kernel regex)",
                          field="iterations", value=spec.iterations)
    mask = _gpu_filter(profile, spec, np.ones(len(profile.columns), dtype=bool))
    w = _make(profile, spec, mask, its.kernel_iteration, aligned=False, mode=WindowMode.WHOLE, marker="",
              iteration_keys=[], available_keys=[], warmup_skipped=0, no_launch=its.no_launch)
    w.notes.append("window is NOT iteration-aligned: no step marker found (set a marker or an iteration kernel)")
    return w


def _iteration_window(profile: Profile, spec: WindowSpec, its: Iterations) -> Window:
    keys = its.keys
    if not keys:
        raise WindowError(f"ranges found in {profile.source} but no kernel was launched inside them",
                          field="marker", value=spec.marker if spec.marker is not None else its.marker)
    if spec.iterations is not None:
        a, b = parse_slice(spec.iterations)
        chosen = keys[a:b]
        skipped = 0
        if not chosen:
            raise WindowError(f"selects no iteration; {len(keys)} detected (positions 0..{len(keys) - 1}, "
                              f"keys {keys[0]}..{keys[-1]})", field="iterations", value=spec.iterations)
    else:
        default = DEFAULT_WARMUP if len(keys) >= DEFAULT_WARMUP + 2 else 0
        skipped = default if spec.warmup is None else spec.warmup
        if skipped < 0 or skipped >= len(keys):
            raise WindowError(f"must be between 0 and {len(keys) - 1} ({len(keys)} iterations detected)",
                              field="warmup", value=skipped)
        chosen = keys[skipped:]
    it = its.kernel_iteration
    mask = _gpu_filter(profile, spec, _in_keys(it, chosen, keys))
    present, stepped, kept = _gpu_presence(profile.columns.gpu, it, mask)
    left_out = (gpus_left_out(profile, its, spec.gpu, (present, stepped))
                | _outside_selection(profile, spec, it, chosen, stepped, kept))
    n_all = int(np.count_nonzero(present)) if spec.gpu is None else 1
    if not kept.any():
        if left_out and len(left_out) == n_all:
            g, why = next(iter(left_out.items()))
            if spec.gpu is not None:
                raise WindowError(f"{gpu_label(profile, g)} has no kernel in the iteration window of {profile.source}: "
                                  f"{why}", field="gpu", value=spec.gpu)
            raise WindowError(f"no GPU ran a kernel launched inside the {its.marker} ranges of {profile.source} "
                              f"({gpu_label(profile, g)}: {why})", field="marker",
                              value=spec.marker if spec.marker is not None else its.marker)
        if spec.gpu is not None:
            raise WindowError(f"no kernel of iterations {chosen[0]}..{chosen[-1]} ran on that GPU",
                              field="gpu", value=spec.gpu)
        raise WindowError(f"no kernel launch of {profile.source} falls inside iterations {chosen[0]}..{chosen[-1]}",
                          field="marker", value=spec.marker if spec.marker is not None else its.marker)
    if left_out and not spec.allow_missing_ranks:
        g, why = next(iter(left_out.items()))
        more = f" (and {len(left_out) - 1} more)" if len(left_out) > 1 else ""
        raise WindowError(
            f"{profile.source}: {gpu_label(profile, g)}{more} would be left out of the iteration window: {why}; "
            f"{len(left_out)} of {n_all} GPUs affected",
            remedy=("allow_missing_ranks", "leaves them out and shows the loss"))
    w = _make(profile, spec, mask, it, np.flatnonzero(kept).tolist(), aligned=True, mode=WindowMode.ITERATIONS,
              marker=its.marker, iteration_keys=list(chosen), available_keys=list(keys), warmup_skipped=skipped,
              no_launch=its.no_launch, outside=its.outside, marker_ranges=its.ranges)
    if its.no_launch:
        w.notes.append(f"{its.no_launch} kernels have no launch call in the capture (sliced export): unattributed")
    if spec.marker is not None and spec.iteration_kernel is None:  # a marker given by hand: are they iterations?
        from kbase.analysis.marker_check import marker_notes

        w.notes += marker_notes(profile, its, spec.marker)
    if left_out:
        w.missing_gpus = sorted(left_out)
        for g, why in sorted(left_out.items()):
            w.notes.append(f"{gpu_label(profile, g)} left out of the window (missing ranks allowed): {why}")
    return w


def _in_keys(it: np.ndarray, chosen: list[int], keys: list[int]) -> np.ndarray:
    """Whether each launch's iteration is one of ``chosen`` (a slice of the sorted ``keys``, which hold every
    iteration of ``it``): two comparisons when the chosen keys are all the keys from the first to the last
    (as a slice is), else a set look-up."""
    lo, hi = min(chosen), max(chosen)
    if lo > NOT_IN_ITERATION and sum(1 for k in keys if lo <= k <= hi) == len(set(chosen)):
        inside = it >= lo
        inside &= it <= hi
        return inside
    return np.isin(it, np.asarray(chosen, dtype=np.int64))


def _gpu_presence(gpus: np.ndarray, it: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per GPU (index up to the largest present): whether it has launches, launches in some iteration, launches
    in the window ``mask``: one count over a class per launch (2 x in the window + in an iteration)."""
    if not len(gpus):
        none = np.zeros(0, dtype=bool)
        return none, none, none
    first = gpu_bounds(gpus, int(gpus[-1]) + 1)
    if first is not None:  # the readers' (GPU, start) order: one reduction per GPU's run of launches
        n = len(first) - 1
        present = first[1:] > first[:-1]
        runs = first[:-1][present]
        stepped, kept = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        stepped[present] = np.maximum.reduceat(it, runs) >= 0
        kept[present] = np.logical_or.reduceat(mask, runs)
        return present, stepped, kept
    cls = mask.astype(np.int8)
    cls *= 2
    cls += it >= 0
    key = gpus.astype(np.int64)
    key *= 4
    key += cls
    n = int(gpus.max()) + 1
    counts = np.bincount(key, minlength=4 * n).reshape(n, 4)
    return counts.sum(axis=1) > 0, (counts[:, 1] + counts[:, 3]) > 0, (counts[:, 2] + counts[:, 3]) > 0


def _outside_selection(profile: Profile, spec: WindowSpec, it: np.ndarray, chosen: list[int],
                       stepped: np.ndarray, kept: np.ndarray) -> dict[int, str]:
    """GPUs with kernels in some iteration (``stepped``) but none in the chosen ones (``kept``: a rank that
    captured other steps than the rest): {gpu: why}."""
    gpus = profile.columns.gpu
    lost = stepped & ~kept
    if spec.gpu is not None:
        lost &= np.arange(len(lost)) == spec.gpu
    out = {}
    for g in np.nonzero(lost)[0]:
        own = it[(gpus == g) & (it >= 0)]
        out[int(g)] = (f"none of its iterations ({int(own.min())}..{int(own.max())}) is among the selected "
                       f"ones ({chosen[0]}..{chosen[-1]})")
    return out


def gpu_label(profile: Profile, gpu: int) -> str:
    """'GPU 1 (rank 1, r1.json)' for a Kineto rank, 'GPU 1 (pid 4242, device 0)' otherwise."""
    for r in profile.extra.get("ranks", []):
        if gpu in r.get("gpus", []):
            return f"GPU {gpu} (rank {r['rank']}, {Path(r['file']).name})"
    g = profile.gpu_columns
    row = np.flatnonzero(g.gpu == gpu)
    if len(row):
        return f"GPU {gpu} (pid {int(g.pid[row[0]])}, device {int(g.device[row[0]])})"
    return f"GPU {gpu}"

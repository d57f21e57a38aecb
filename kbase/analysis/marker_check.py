"""Whether a chosen marker's ranges are iterations.

A marker given by hand (``--marker``, ``[tool.kbase] marker``) matches whatever its regex finds: ``step`` finds
``Optimizer.step#SGD.step`` as well as ``ProfilerStep#7``. The window then holds each optimizer call as an
"iteration" — 1.3 ms of a 98 ms training step — and every figure per iteration is a figure of something else.
Two signs, each said as a note naming the better choice (``marker_notes``):

- **short**: the marker's ranges launched under ``MIN_HELD`` of the capture's kernel time (of the kernels whose
  launch call the capture holds): an iteration's ranges hold all of a step's work, one range after the other;
- **nested**: most of its ranges lie inside the ranges of an iteration marker that the capture also has (the
  automatic markers: ``ProfilerStep#N``, ``step N``, …) — ranges inside an iteration are parts of one.

The better choice is that automatic marker when the capture has one (leaving ``--marker`` out finds it), else a
range around the whole training step or ``--iteration-kernel``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kbase.analysis.iterations import Iterations
    from kbase.readers.profile import Profile, RangeColumns

MIN_HELD = 0.5  # of the capture's attributable kernel time: less, and the ranges are not whole iterations
NESTED = 0.5  # of the marker's ranges inside ranges of an iteration marker: more, and they are parts of one


def marker_notes(profile: Profile, its: Iterations, marker: str) -> list[str]:
    """Notes for a hand-given ``marker`` whose ranges do not look like iterations (module doc); none otherwise."""
    from kbase.analysis.iterations import AUTO_MARKERS, pick_marker

    k = profile.columns
    if k.launch_start is None or not len(k) or not len(its.ranges):
        return []
    dur = (k.end - k.start).astype(np.float64)
    launched = k.launch_start >= 0
    total = float(dur[launched].sum())
    held = float(dur[launched & (its.kernel_iteration >= 0)].sum())
    signs = []
    if total > 0 and held < MIN_HELD * total:
        signs.append(f"its ranges launched {held / total:.1%} of the capture's kernel time (an iteration's ranges "
                     "hold all of a step's work)")
    auto = pick_marker(profile, None)
    better = None
    if auto is not None:
        regex, label = auto
        if not any(regex.search(str(n)) for n in its.ranges.ranges.name[:1000].tolist()):  # another marker
            pattern = next(p for name, p in AUTO_MARKERS if name == label)
            better = f"--marker '{pattern}' ({label} ranges, which this capture has; or leave --marker out)"
            share = _nested_share(its.ranges.ranges, _closed(profile.range_columns, regex))
            if share >= NESTED:
                signs.append(f"{share:.0%} of its ranges lie inside {label} ranges (parts of an iteration, not "
                             "iterations)")
    if not signs:
        return []
    better = better or "a range around the whole training step, or --iteration-kernel (a kernel run once per step)"
    return [f"marker {marker!r} may not mark iterations: {'; '.join(signs)}; the better choice: {better}"]


def _closed(r: RangeColumns, regex) -> RangeColumns:
    hit = np.fromiter((regex.search(str(n)) is not None for n in r.name.tolist()), dtype=bool, count=len(r))
    return r.take(hit & (r.end > r.start))


def _nested_share(inner: RangeColumns, outer: RangeColumns) -> float:
    """The share of ``inner``'s ranges that lie inside a range of ``outer`` of the same process."""
    if not len(inner) or not len(outer):
        return 0.0
    inside = 0
    for pid in np.unique(inner.pid).tolist():
        o = outer.pid == pid
        if not o.any():
            continue
        order = np.argsort(outer.start[o], kind="stable")
        starts, ends = outer.start[o][order], outer.end[o][order]
        reach = np.maximum.accumulate(ends)  # the latest end of the ranges starting at or before each
        i = inner.pid == pid
        at = np.searchsorted(starts, inner.start[i], side="right") - 1
        ok = at >= 0
        inside += int((reach[np.maximum(at, 0)][ok] >= inner.end[i][ok]).sum())
    return inside / len(inner)

"""The GPU time budget's numeric core (``analysis.budget``): one GPU's activities, sorted by start, swept into
the four blocks per window, and its idle gaps with their likely cause. Pure numpy, a few passes per class: a
10M-launch capture is swept in about a second."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kbase.analysis.budget_blocks import (
    COMMUNICATION,
    COMPUTE,
    GAP_BUCKETS,
    GAP_CAUSES,
    LAUNCH_GAP_NS,
    MEMORY,
    Blocks,
)

_MIN = np.iinfo(np.int64).min


def _pieces(s: np.ndarray, e: np.ndarray, mask: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The union of the intervals (sorted by start; only where ``mask``) as disjoint pieces in start order, one per
    interval: the coverage it adds beyond everything before it (zero-length for an interval inside earlier ones
    or left out by ``mask``). No merge and no compress: a few passes over the arrays."""
    ee = e if mask is None else np.where(mask, e, _MIN)
    reach = np.maximum.accumulate(ee)
    ps = np.empty_like(reach)
    ps[:1] = s[:1]  # (nothing before the first: its own start)
    np.maximum(s[1:], reach[:-1], out=ps[1:])
    return ps, np.maximum(ee, ps)


def _covered(s: np.ndarray, e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Time covered by the disjoint pieces (s, e), sorted by start, before each instant of ``t``."""
    if not len(s):
        return np.zeros(len(t), dtype=np.int64)
    i = np.searchsorted(s, t, side="right") - 1
    j = np.maximum(i, 0)
    inside = np.clip(t - s[j], 0, e[j] - s[j])
    return np.where(i < 0, 0, _sums_before(e - s, j) + inside)


def _sums_before(x: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``x[:k].sum()`` for each ``k`` of ``at`` (each below ``len(x)``): one pass summing the stretches between
    them (``reduceat``), not a running sum the length of ``x`` for a hundred window edges."""
    cuts = np.sort(at[at > 0])
    if not len(cuts):
        return np.zeros(len(at), dtype=np.int64)
    cuts = cuts[np.flatnonzero(np.r_[True, cuts[1:] != cuts[:-1]])]  # distinct, ascending
    before = np.zeros(len(cuts) + 1, dtype=np.int64)
    np.cumsum(np.add.reduceat(x, np.r_[0, cuts])[: len(cuts)], out=before[1:])  # the sums before each cut
    return before[np.searchsorted(cuts, at, side="right")]


def _sweep(s: np.ndarray, e: np.ndarray, cls: np.ndarray, edges: np.ndarray) -> tuple[Blocks, list[Blocks]]:
    """The blocks of each window between consecutive ``edges``, and their sum. ``s``/``e``/``cls``: every
    activity of the GPU sorted by start (one sort serves the five unions)."""
    present = np.bincount(cls, minlength=3) > 0

    def within(mask: np.ndarray | None) -> np.ndarray:
        ps, pe = _pieces(s, e, mask)
        return np.diff(_covered(ps, pe, edges))

    zero = np.zeros(len(edges) - 1, dtype=np.int64)
    comp = within(cls == COMPUTE) if present[COMPUTE] else zero
    comm = within(cls == COMMUNICATION) if present[COMMUNICATION] else zero
    mem = within(cls == MEMORY) if present[MEMORY] else zero
    # a class that never ran adds nothing to a union: skip its pass
    cx = within(cls <= COMMUNICATION) if present[COMPUTE] and present[COMMUNICATION] else comp + comm
    cxm = within(None) if present[MEMORY] and (present[COMPUTE] or present[COMMUNICATION]) else cx + mem
    length = np.diff(edges)
    comm_exp, mem_exp = cx - comp, cxm - cx
    columns = [length, comp, comm_exp, comm - comm_exp, mem_exp, mem - mem_exp, length - cxm]
    out = [Blocks(*row) for row in zip(*(c.tolist() for c in columns))]
    # (the windows' sum in numpy: integer ns, as the sum of their Blocks)
    return Blocks(*(int(c.sum()) for c in columns)), out


# ------------------------------------------------------------------------------------------ idle gaps


_BUCKET_LIMITS = np.array([limit for limit, _ in GAP_BUCKETS if limit is not None], dtype=np.int64)


@dataclass
class _Gaps:
    """A GPU's idle gaps in its window: those under ``LAUNCH_GAP_NS`` counted in bulk (launch latency whatever the
    launch calls say), the longer ones as arrays (cause: an index of ``GAP_CAUSES``; ``nxt``: the position, in
    start order, of the activity after the gap)."""

    short_count: int
    short_ns: int
    cause: np.ndarray
    size: np.ndarray
    start: np.ndarray
    nxt: np.ndarray


def _gaps(s: np.ndarray, e: np.ndarray, edges: np.ndarray, launches: Any, order: np.ndarray, syncs) -> _Gaps:
    """The idle gaps inside the window between the activities (``s``/``e`` sorted by start; ``launches``: the
    launch calls by row, ``budget._Launches``; ``order``: start position -> row). A gap is where an activity starts
    after everything before it ended."""
    lo, hi = int(edges[0]), int(edges[-1])
    z = np.zeros(0, dtype=np.int64)
    if len(s) < 2 or hi <= lo:
        return _Gaps(0, 0, z.astype(np.int8), z, z, z)
    reach = np.maximum.accumulate(e)
    nxt = np.flatnonzero(s[1:] > reach[:-1]) + 1
    g_start, g_end = np.maximum(reach[nxt - 1], lo), np.minimum(s[nxt], hi)  # clipped to the window
    size = g_end - g_start
    long = size >= LAUNCH_GAP_NS
    short = ~long & (size > 0)
    short_ns = int(size[short].sum())
    short_count = int(np.count_nonzero(short))
    nxt, size, g_start = nxt[long], size[long], g_start[long]
    rows = order[nxt]
    nl = launches.start(rows)
    cause = np.full(len(size), GAP_CAUSES.index("launch"), dtype=np.int8)
    cause[nl < 0] = GAP_CAUSES.index("unknown")
    host = np.flatnonzero(nl >= g_start)
    cause[host] = GAP_CAUSES.index("host")
    cause[host[_blocked(syncs, launches.tid(rows[host]) >> 24, g_start[host])]] = GAP_CAUSES.index("sync")
    return _Gaps(short_count, short_ns, cause, size, g_start, nxt)


def _before(s: np.ndarray, e: np.ndarray, nxt: int) -> int:
    """The position of the activity before the gap ending at ``nxt``: the last of those before it to finish."""
    reach = int(e[:nxt].max())
    lo = max(0, nxt - 4096)  # nearly always the one just before; look back a little, then everywhere
    hit = np.flatnonzero(e[lo:nxt] == reach)
    if len(hit):
        return lo + int(hit[-1])
    return int(np.flatnonzero(e[:nxt] == reach)[-1])


def _blocked(syncs, pid: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Whether a synchronize call of process ``pid`` was in progress at each instant ``at``."""
    out = np.zeros(len(at), dtype=bool)
    if not len(syncs) or not len(at):
        return out
    for p in sorted(set(pid.tolist())):  # (np.unique would import numpy.ma: ~10 ms of every top)
        mine = syncs.pid == p
        if not mine.any():
            continue
        order = np.argsort(syncs.start[mine], kind="stable")
        s, e = syncs.start[mine][order], np.maximum.accumulate(syncs.end[mine][order])
        sel = np.flatnonzero(pid == p)
        i = np.searchsorted(s, at[sel], side="right") - 1
        out[sel] = (i >= 0) & (e[np.maximum(i, 0)] >= at[sel])
    return out



"""The GPU time budget's numeric core (``analysis.budget``): one GPU's activities merged in start order, swept
into the four blocks per window, and its idle gaps with their likely cause. Pure numpy, a handful of passes over
the activities: the union of everything (its running end, shared by the sweep and the gaps), one union per class
that shares the GPU with another, and the rest on the ~100 window edges or the few gaps above ``LAUNCH_GAP_NS``.

Every activity satisfies ``start <= end`` (``readers.profile``'s invariant): the union's pieces below rely on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kbase.analysis.budget_blocks import (
    COMMUNICATION,
    COMPUTE,
    GAP_BUCKETS,
    GAP_CAUSES,
    LAUNCH_GAP_NS,
    MEMORY,
)
from kbase.readers.profile import gpu_bounds

# ------------------------------------------------------------------------------------------ start order


def _rows_by_gpu(gpu: np.ndarray, n_gpus: int) -> Callable[[int], slice | np.ndarray]:
    """GPU -> its rows, in row order: a slice (a view of each column, no gather) where the rows are grouped by
    GPU, as the readers write them; else the rows' indices."""
    grouped = gpu_bounds(gpu, n_gpus)
    if grouped is not None:
        bounds = grouped.tolist()
        return lambda g: slice(bounds[g], bounds[g + 1])
    order = np.argsort(gpu, kind="stable")
    bounds = np.searchsorted(gpu[order], np.arange(n_gpus + 1)).tolist()
    return lambda g: order[bounds[g]:bounds[g + 1]]


def _count(rows: slice | np.ndarray) -> int:
    return rows.stop - rows.start if isinstance(rows, slice) else len(rows)


def _pick(rows: slice | np.ndarray, at: np.ndarray) -> np.ndarray:
    """Rows of the table for the positions ``at`` of ``rows`` (a GPU's slice or indices)."""
    return at + rows.start if isinstance(rows, slice) else rows[at]


class _Order:
    """Position in start order -> row (the GPU's kernels 0..n-1, then its memcpy/memset rows n..): the sort's
    permutation, or, where the kernels were already in start order, the positions the others were merged into."""

    def __init__(self, perm: np.ndarray | None = None, inserted_at: np.ndarray | None = None,
                 inserted_rows: np.ndarray | None = None) -> None:
        self.perm, self.at, self.rows_at = perm, inserted_at, inserted_rows

    def rows(self, pos: np.ndarray) -> np.ndarray:
        pos = np.asarray(pos, dtype=np.int64)
        if self.perm is not None:
            return self.perm[pos]
        if self.at is None or self.rows_at is None or not len(self.at):
            return pos
        j = np.searchsorted(self.at, pos)  # merged rows before ``pos``
        hit = np.minimum(j, len(self.at) - 1)
        merged = self.at[hit] == pos  # (j past the end: at[hit] < pos, not merged)
        return np.where(merged, self.rows_at[hit], pos - j)


def _merge(ks: np.ndarray, ke: np.ndarray, kc: np.ndarray, as_: np.ndarray,
           ae: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, _Order]:
    """A GPU's kernels (start, end, class) and memcpy/memset (start, end; class memory) in start order, ties in
    row order (a stable sort of kernels then the others), and where each position came from. The readers list a
    GPU's kernels in start order: then the few others are merged in (no sort, no gather of every launch)."""
    n, na = len(ks), len(as_)
    if n > 1 and not bool((ks[1:] >= ks[:-1]).all()):
        s = np.concatenate([ks, as_])
        perm = np.argsort(s, kind="stable")
        cls = np.concatenate([kc, np.full(na, MEMORY, dtype=np.int8)])
        return s[perm], np.concatenate([ke, ae])[perm], cls[perm], _Order(perm=perm)
    if not na:
        return ks, ke, kc, _Order()
    a_order = np.argsort(as_, kind="stable")
    # after the kernels that start at the same time; each one past those merged before it
    at = np.searchsorted(ks, as_[a_order], side="right") + np.arange(na)
    kept = np.ones(n + na, dtype=bool)
    kept[at] = False
    out = []
    for k_col, a_col in ((ks, as_[a_order]), (ke, ae[a_order]), (kc, np.full(na, MEMORY, dtype=np.int8))):
        merged = np.empty(n + na, dtype=k_col.dtype)
        merged[kept] = k_col
        merged[at] = a_col
        out.append(merged)
    return out[0], out[1], out[2], _Order(inserted_at=at, inserted_rows=n + a_order)


# ------------------------------------------------------------------------------------------ the sweep


def _reach(e: np.ndarray) -> np.ndarray:
    """The latest end so far at each position (a running maximum). The ends of a serialised stream already
    ascend: one comparison then, instead of the running maximum (several times slower)."""
    if len(e) < 2 or bool((e[1:] >= e[:-1]).all()):
        return e
    return np.maximum.accumulate(e)


def _piece_starts(s: np.ndarray, reach: np.ndarray) -> np.ndarray:
    """The union of the intervals (sorted by start, ``reach`` their running end) as disjoint pieces in start order,
    one per interval: from ``max(start, reach before it)`` to its own ``reach`` (zero-length for an interval inside
    earlier ones)."""
    ps = np.empty_like(reach)
    ps[:1] = s[:1]  # (nothing before the first: its own start)
    np.maximum(s[1:], reach[:-1], out=ps[1:])
    return ps


def _covered(ps: np.ndarray, pe: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Time covered by the disjoint pieces [``ps``, ``pe``] (sorted by start) before each instant of ``t``."""
    if not len(ps):
        return np.zeros(len(t), dtype=np.int64)
    i = np.searchsorted(ps, t, side="right") - 1
    j = np.maximum(i, 0)
    inside = np.clip(t - ps[j], 0, pe[j] - ps[j])
    return np.where(i < 0, 0, _lengths_before(ps, pe, j) + inside)


def _lengths_before(ps: np.ndarray, pe: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``(pe - ps)[:k].sum()`` for each ``k`` of ``at`` (each below ``len(ps)``): the stretches between them summed
    (``reduceat``), not a running sum the length of the pieces for a hundred window edges; and the ends' sums less
    the starts' (no array of lengths): int64 sums wrap, but their difference is exact, as a time fits in int64."""
    cuts = np.sort(at[at > 0])
    if not len(cuts):
        return np.zeros(len(at), dtype=np.int64)
    distinct = np.empty(len(cuts), dtype=bool)
    distinct[0] = True
    np.not_equal(cuts[1:], cuts[:-1], out=distinct[1:])
    cuts = cuts[distinct]
    bounds = np.concatenate(([0], cuts))
    stretch = np.add.reduceat(pe, bounds)[:-1] - np.add.reduceat(ps, bounds)[:-1]
    before = np.zeros(len(cuts) + 1, dtype=np.int64)
    np.cumsum(stretch, out=before[1:])  # the lengths before each cut
    return before[np.searchsorted(cuts, at, side="right")]


def _union_within(s: np.ndarray, e: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Time the union of the intervals (sorted by start) covers in each window between consecutive ``edges``."""
    reach = _reach(e)
    ps = _piece_starts(s, reach)
    return np.diff(_covered(ps, reach, edges))


def _sweep(s: np.ndarray, e: np.ndarray, cls: np.ndarray,
           edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The blocks of each window between consecutive ``edges`` (a row per ``budget_blocks.FIELDS``, a column per
    window), and the union of everything (its running end and piece starts: the gaps are read off them).
    ``s``/``e``/``cls``: every activity of the GPU sorted by start. A class alone on the GPU is the union of
    everything; one that shares it is swept over its own activities (a compress: the classes partition them)."""
    n = len(s)
    reach = _reach(e)
    ps = _piece_starts(s, reach)
    everything = np.diff(_covered(ps, reach, edges))
    count = [int(np.count_nonzero(cls == c)) for c in (COMPUTE, COMMUNICATION, MEMORY)]
    zero = np.zeros(len(edges) - 1, dtype=np.int64)

    def union(keep: np.ndarray, size: int) -> np.ndarray:
        if not size:
            return zero
        return everything if size == n else _union_within(s[keep], e[keep], edges)

    comp = union(cls == COMPUTE, count[COMPUTE])
    comm = union(cls == COMMUNICATION, count[COMMUNICATION])
    mem = union(cls == MEMORY, count[MEMORY])
    cx = union(cls <= COMMUNICATION, n - count[MEMORY]) if count[COMPUTE] and count[COMMUNICATION] else comp + comm
    cxm = everything
    length = np.diff(edges)
    comm_exp, mem_exp = cx - comp, cxm - cx
    return np.array([length, comp, comm_exp, comm - comm_exp, mem_exp, mem - mem_exp, length - cxm]), reach, ps


# ------------------------------------------------------------------------------------------ idle gaps


_BUCKET_LIMITS = np.array([limit for limit, _ in GAP_BUCKETS if limit is not None], dtype=np.int64)


class _Gaps:
    """A GPU's idle gaps in its window: those under ``LAUNCH_GAP_NS`` counted in bulk (launch latency whatever the
    launch calls say), the longer ones as arrays (cause: an index of ``GAP_CAUSES``; ``nxt``: the position, in
    start order, of the activity after the gap). (A plain class: a dataclass costs ~0.5 ms at import.)"""

    __slots__ = ("short_count", "short_ns", "cause", "size", "start", "nxt")

    def __init__(self, short_count: int, short_ns: int, cause: np.ndarray, size: np.ndarray, start: np.ndarray,
                 nxt: np.ndarray) -> None:
        self.short_count, self.short_ns, self.cause, self.size, self.start, self.nxt = (short_count, short_ns, cause,
                                                                                         size, start, nxt)


def _gaps(s: np.ndarray, reach: np.ndarray, ps: np.ndarray, edges: np.ndarray, launches: Any, order: _Order,
          syncs) -> _Gaps:
    """The idle gaps inside the window between the activities (``s`` sorted by start; ``reach``, ``ps``: the running
    end and piece starts of their union, ``_sweep``'s; ``launches``: the launch calls by row, ``budget._Launches``).
    A gap is where an activity starts after everything before it ended: before position k, from ``reach[k-1]`` to
    ``s[k]``, cut to the window."""
    lo, hi = int(edges[0]), int(edges[-1])
    z = np.zeros(0, dtype=np.int64)
    none = _Gaps(0, 0, z.astype(np.int8), z, z, z)
    n = len(s)
    if n < 2 or hi <= lo:
        return none
    # s and reach ascend: the gaps that can meet (lo, hi) are those before positions first..last (a gap needs
    # s[k] > lo and reach[k-1] < hi), and only the first and last of them can reach past lo or hi
    first = max(1, int(np.searchsorted(s, lo, side="right")))
    last = min(n - 1, int(np.searchsorted(reach, hi, side="left")))
    if last < first:
        return none
    size = ps[first:last + 1] - reach[first - 1:last]  # max(s[k] - reach[k-1], 0)
    for i, k in ((0, first), (-1, last)):
        size[i] = max(0, min(int(s[k]), hi) - max(int(reach[k - 1]), lo))
    long = np.flatnonzero(size >= LAUNCH_GAP_NS)
    total_count, total_ns = int(np.count_nonzero(size)), int(size.sum())
    nxt, size = long + first, size[long]
    g_start = np.maximum(reach[nxt - 1], lo)
    rows = order.rows(nxt)
    nl = launches.start(rows)
    cause = np.full(len(size), GAP_CAUSES.index("launch"), dtype=np.int8)
    cause[nl < 0] = GAP_CAUSES.index("unknown")
    host = np.flatnonzero(nl >= g_start)
    cause[host] = GAP_CAUSES.index("host")
    cause[host[_blocked(syncs, launches.tid(rows[host]) >> 24, g_start[host])]] = GAP_CAUSES.index("sync")
    return _Gaps(total_count - len(size), total_ns - int(size.sum()), cause, size, g_start, nxt)


def _before(e: np.ndarray, reach: np.ndarray, nxt: int) -> int:
    """The position of the activity before the gap ending at ``nxt``: the last of those before it to finish."""
    latest = int(reach[nxt - 1])
    lo = max(0, nxt - 4096)  # nearly always the one just before; look back a little, then everywhere
    hit = np.flatnonzero(e[lo:nxt] == latest)
    if len(hit):
        return lo + int(hit[-1])
    return int(np.flatnonzero(e[:nxt] == latest)[-1])


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

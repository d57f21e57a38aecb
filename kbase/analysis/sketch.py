"""Launch sketches, built: a compact, shape-mix-robust summary of one kernel's launch durations in one capture.

A kernel's launches (in the window, in start order across all GPUs) are split into ``CHUNKS`` equal
runs by their order within the capture; each chunk keeps ``QUANTILES`` quantiles of its launch
durations plus its launch count and total ns. Stored as little-endian float32, ``CHUNKS x WIDTH``
(576 bytes per kernel per baseline).

Why quantiles matched chunk by chunk: one kernel name can cover very different shapes (150 µs to
7.9 ms launches of one convolution kernel), so a pooled mean/std test has no power, while a uniform
slowdown moves every quantile by the same factor. Comparing quantile q of chunk c before with the same
quantile of the same chunk after cancels the mix; the eight chunk ratios give both the estimate and,
from their spread, its noise. Chunk totals double as per-"iteration" samples for captures without
iteration markers (the total-kernel-time rule needs samples).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kbase.analysis.window import Window

CHUNK_BITS = 3
CHUNKS = 1 << CHUNK_BITS  # 8
QUANTILES = 16
WIDTH = QUANTILES + 2  # quantiles, launches, total ns
COUNT, TOTAL = QUANTILES, QUANTILES + 1
QPOS = (np.arange(QUANTILES) + 0.5) / QUANTILES
_BLOCK = 1 << 16  # launches per block while building the sort key
DUR_MASK = (1 << 40) - 1  # durations sit in a key's low 40 bits (whole ns, up to ~18 minutes)


def build_sketches(codes: np.ndarray, start: np.ndarray | None, dur: np.ndarray, n_names: int) -> np.ndarray:
    """(n_names, CHUNKS, WIDTH) float64 sketches; NaN quantiles (and 0 counts) where a chunk is empty.
    ``start`` None: the launches are already in start order."""
    return sketches_in_order(codes, start_order(start), dur, n_names)


def start_order(start: np.ndarray | None) -> np.ndarray | None:
    """The launches' stable start order, None when they are in it already. int32 when it fits: it is
    alive while the sort key is built (the peak), the start times need not be."""
    if start is None or _sorted(start):
        return None
    order = np.argsort(start, kind="stable")
    return order.astype(np.int32) if len(order) < 1 << 31 else order


def sketches_in_order(codes: np.ndarray, by_start: np.ndarray | None, dur: np.ndarray, n_names: int,
                      kernel_keys: list[np.ndarray] | None = None) -> np.ndarray:
    """:func:`build_sketches` given the start order (:func:`start_order`; None: the launches are in it).
    ``kernel_keys``: a list that receives the launches' (kernel << 40 | duration) keys in ascending order,
    from this sort (what ``analysis.kernel_stats.group_stats`` sorts; see :func:`window_sketches_and_keys`).

    Vectorised: each launch's order within its kernel (start order) gives its chunk; one in-place sort
    of a (kernel, chunk, duration) key gives every chunk's durations in order; quantiles are positions.
    Durations are whole ns (up to 2^40). ~1 s per 10M launches; memory: the key (8 bytes per launch)
    and per-block temporaries.
    """
    out = np.full((n_names, CHUNKS, WIDTH), np.nan)
    out[:, :, COUNT] = 0.0
    out[:, :, TOTAL] = 0.0
    n = len(codes)
    if not n:
        return out
    if n_names * CHUNKS >= (1 << 23):  # the key below has 23 bits for the group: a million names do not fit
        order = np.argsort(codes if by_start is None else codes[by_start], kind="stable")
        order = order if by_start is None else by_start[order]
        return _build_sketches_lexsort(out, codes[order], dur[order], n_names)
    # key = (kernel * CHUNKS + chunk) << 40 | duration, chunk = the launch's order within its kernel (start
    # order) * CHUNKS // its count. Built block by block in start order, each launch's order within its
    # kernel = launches of that kernel in earlier blocks + its place in this block (a stable sort of the
    # block): no temporary is as long as the capture, the key is the one full-length array.
    blocks = [slice(lo, min(lo + _BLOCK, n)) for lo in range(0, n, _BLOCK)]
    count = np.zeros(n_names, dtype=np.int64)
    for sl in blocks:
        count += np.bincount(codes[sl if by_start is None else by_start[sl]], minlength=n_names)
    seen = np.zeros(n_names, dtype=np.int64)
    key = np.empty(n, dtype=np.int64)
    narrow = n_names <= 1 << 16
    for sl in blocks:
        idx = sl if by_start is None else by_start[sl]
        cb = codes[idx]
        # numpy's stable sort is a radix sort only for 16-bit integers (int32 codes: timsort, 6x slower)
        ob = np.argsort(cb.astype(np.uint16) if narrow else cb, kind="stable")
        c = cb.astype(np.int64)
        in_block = np.bincount(c, minlength=n_names)
        k = np.empty(len(c), dtype=np.int64)
        k[ob] = np.arange(len(c), dtype=np.int64) - (np.cumsum(in_block) - in_block)[c[ob]]
        k += seen[c]
        seen += in_block
        k *= CHUNKS
        k //= count[c]
        k += c * CHUNKS
        k <<= 40
        k |= np.clip(dur[idx], 0, (1 << 40) - 1).astype(np.int64, copy=False)
        key[sl] = k
    n_groups = n_names * CHUNKS
    key.sort()  # in place
    bounds = np.searchsorted(key, np.arange(n_groups + 1, dtype=np.int64) << 40)  # where each group starts
    gfirst, gcount = bounds[:-1], np.diff(bounds)
    if kernel_keys is None:
        key &= DUR_MASK  # now the durations, in group order, ascending within a group
        return _fill(out, key, gfirst, gcount)
    # (kernel * CHUNKS + chunk) << 40 | duration -> kernel << 40 | duration, in place block by block (a fresh
    # full-length array costs its page faults: ~0.2 s per 80 MB on the benchmark VM).
    for lo in range(0, n, 1 << 20):
        block = key[lo : lo + (1 << 20)]
        high = block >> (40 + CHUNK_BITS)
        high <<= 40
        block &= DUR_MASK
        block |= high
    _fill(out, key, gfirst, gcount, high=(np.arange(n_groups, dtype=np.int64) >> CHUNK_BITS) << 40)
    # Each kernel's durations are now CHUNKS sorted runs: a stable sort (timsort) merges them into the
    # leaderboard's order in 0.11 s at 10M launches, where sorting the keys afresh took 0.88 s.
    key.sort(kind="stable")
    kernel_keys.append(key)
    return out


def _fill(out: np.ndarray, durations: np.ndarray, gfirst: np.ndarray, gcount: np.ndarray,
          high: np.ndarray | None = None) -> np.ndarray:
    """Quantiles (by position), counts and totals of each (kernel, chunk) group into ``out``, from the int64
    ``durations`` in group order (ascending within a group) and each group's first index and size.
    ``high``: each group's bits above the low 40 that its values in ``durations`` carry (keys, not bare
    durations): taken off the quantiles, and off the sums (int64 sums wrap, so subtracting count x high
    leaves the exact sum of the durations)."""
    n_groups = len(gcount)
    present = np.flatnonzero(gcount)
    gtotal = np.zeros(n_groups)
    sums = np.add.reduceat(durations, gfirst[present])  # exact int64 sums
    if high is not None:
        sums -= gcount[present] * high[present]
    gtotal[present] = sums.astype(np.float64)
    pos = gfirst[present, None] + np.minimum((QPOS[None, :] * gcount[present, None]).astype(np.int64),
                                             gcount[present, None] - 1)
    flat = out.reshape(n_groups, WIDTH)
    values = durations[pos]
    if high is not None:
        values &= DUR_MASK
    flat[present, :QUANTILES] = values.astype(np.float64)
    flat[:, COUNT] = gcount
    flat[:, TOTAL] = gtotal
    return out


def _sorted(x: np.ndarray) -> bool:
    return len(x) < 2 or bool(np.all(x[1:] >= x[:-1]))


def _build_sketches_lexsort(out: np.ndarray, c: np.ndarray, dur: np.ndarray, n_names: int) -> np.ndarray:
    """``build_sketches`` for more than 2^20 names (launches grouped by kernel, start order within)."""
    c = c.astype(np.int64)
    count = np.bincount(c, minlength=n_names)
    first = np.concatenate([[0], np.cumsum(count)[:-1]])
    group = c * CHUNKS + (np.arange(len(c)) - first[c]) * CHUNKS // count[c]
    dd = np.clip(dur, 0, (1 << 40) - 1).astype(np.int64)
    o2 = np.lexsort((dd, group))
    gcount = np.bincount(group[o2], minlength=n_names * CHUNKS)
    return _fill(out, dd[o2], np.concatenate([[0], np.cumsum(gcount)[:-1]]), gcount)


def pack(sketch: np.ndarray) -> bytes:
    return np.asarray(sketch, dtype="<f4").tobytes()


def unpack(blob: bytes | None) -> np.ndarray | None:
    if not blob or len(blob) != CHUNKS * WIDTH * 4:
        return None
    return np.frombuffer(blob, dtype="<f4").astype(np.float64).reshape(CHUNKS, WIDTH)


def window_sketches(window: Window) -> dict[str, np.ndarray]:
    """The launch sketch of every kernel of a window, by full name."""
    return window_sketches_and_keys(window, keys=False)[0]


def window_sketches_and_keys(window: Window, keys: bool = True) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """:func:`window_sketches`, and (``keys``) the window's (name code << 40 | duration) keys sorted, as
    ``analysis.kernel_stats.group_stats`` takes them (None past 2^20 names, where the sketch sorts otherwise)."""
    names = window.profile.columns.names
    codes = window.column("name")
    start = window.column("start")
    dur = window.column("end")
    dur -= start  # in place: the window's columns are copies (one 10M-launch array less at the peak)
    by_start = start_order(start)
    del start  # only its order is needed from here on
    got: list[np.ndarray] | None = [] if keys else None
    sk = sketches_in_order(codes, by_start, dur, len(names), got)
    present = np.flatnonzero(sk[:, :, COUNT].sum(axis=1))  # kernels with launches in the window
    return {str(names[i]): sk[i] for i in present}, (got[0] if got else None)

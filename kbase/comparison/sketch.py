"""Launch sketches: a compact, shape-mix-robust summary of one kernel's launch durations in one capture.

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

import warnings
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kbase.analysis.window import Window

CHUNKS = 8
QUANTILES = 16
WIDTH = QUANTILES + 2  # quantiles, launches, total ns
COUNT, TOTAL = QUANTILES, QUANTILES + 1
QPOS = (np.arange(QUANTILES) + 0.5) / QUANTILES


def build_sketches(codes: np.ndarray, start: np.ndarray, dur: np.ndarray, n_names: int) -> np.ndarray:
    """(n_names, CHUNKS, WIDTH) float64 sketches; NaN quantiles (and 0 counts) where a chunk is empty.

    Vectorised: a stable sort by kernel over start-ordered launches gives each launch its order within
    its kernel, one sort of a (kernel, chunk, duration) key gives every chunk's durations in order;
    quantiles are positions. Durations are whole ns (up to 2^40). ~1 s per 10M launches.
    """
    out = np.full((n_names, CHUNKS, WIDTH), np.nan)
    out[:, :, COUNT] = 0.0
    out[:, :, TOTAL] = 0.0
    if not len(codes):
        return out
    # launches of each kernel in start order: a stable sort of the kernel codes over start-ordered
    # launches (radix sort for 16-bit codes; readers give launches in start order, else one argsort)
    by_start = None if len(start) < 2 or bool((np.diff(start) >= 0).all()) else np.argsort(start, kind="stable")
    c = codes if by_start is None else codes[by_start]
    small = c.astype(np.int16 if n_names < (1 << 15) else np.int64, copy=False)
    order = np.argsort(small, kind="stable")
    if by_start is not None:
        order = by_start[order]
    c = codes[order].astype(np.int64)
    count = np.bincount(c, minlength=n_names)
    first = np.concatenate([[0], np.cumsum(count)[:-1]])
    rank = np.arange(len(c)) - first[c]
    group = c * CHUNKS + rank * CHUNKS // count[c]
    del rank
    n_groups = n_names * CHUNKS
    dd = np.clip(dur[order], 0, (1 << 40) - 1).astype(np.int64)
    if n_groups < (1 << 23):  # one sort of a composite (group << 40 | duration) key
        key = group << 40
        key |= dd
        key.sort()
        g = key >> 40
        d = (key & ((1 << 40) - 1)).astype(np.float64)
    else:
        o2 = np.lexsort((dd, group))
        g, d = group[o2], dd[o2].astype(np.float64)
    gcount = np.bincount(g, minlength=n_groups)
    gtotal = np.bincount(g, weights=d, minlength=n_groups)
    gfirst = np.concatenate([[0], np.cumsum(gcount)[:-1]])
    present = np.flatnonzero(gcount)
    pos = gfirst[present, None] + np.minimum((QPOS[None, :] * gcount[present, None]).astype(np.int64),
                                             gcount[present, None] - 1)
    flat = out.reshape(n_groups, WIDTH)
    flat[present, :QUANTILES] = d[pos]
    flat[:, COUNT] = gcount
    flat[:, TOTAL] = gtotal
    return out


def pack(sketch: np.ndarray) -> bytes:
    return np.asarray(sketch, dtype="<f4").tobytes()


def unpack(blob: bytes | None) -> np.ndarray | None:
    if not blob or len(blob) != CHUNKS * WIDTH * 4:
        return None
    return np.frombuffer(blob, dtype="<f4").astype(np.float64).reshape(CHUNKS, WIDTH)


def pool(sketches: list[np.ndarray]) -> np.ndarray:
    """Several captures' sketches of one side (repeat captures): quantiles averaged, counts and totals
    summed (an approximation: the quantiles of a pooled set lie between the parts')."""
    arr = np.stack(sketches)
    out = np.empty_like(arr[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a chunk empty in every capture stays NaN
        out[..., :QUANTILES] = np.nanmean(arr[..., :QUANTILES], axis=0)
    out[..., COUNT] = arr[..., COUNT].sum(axis=0)
    out[..., TOTAL] = arr[..., TOTAL].sum(axis=0)
    return out


def chunk_ratios(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Per chunk, after/before - 1 of the summed matched quantiles (chunks empty on either side: NaN).
    Works on (..., CHUNKS, WIDTH) arrays."""
    qb, qa = before[..., :QUANTILES], after[..., :QUANTILES]
    ok = ~(np.isnan(qb) | np.isnan(qa))
    sb = np.where(ok, qb, 0.0).sum(axis=-1)
    sa = np.where(ok, qa, 0.0).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((sb > 0) & ok.any(axis=-1), sa / sb - 1.0, np.nan)


def compare(before: np.ndarray, after: np.ndarray) -> tuple[float, float, int]:
    """(relative change, its standard error, chunks used) of matched quantiles of one kernel."""
    r = chunk_ratios(before, after)
    r = r[~np.isnan(r)]
    if len(r) < 3:
        return float("nan"), float("nan"), int(len(r))
    # the chunks are independent runs of the kernel's launches: their mean ratio and its standard error
    # (Student's t with chunks - 1 degrees of freedom; a median/MAD version flagged 1 kernel in 140 of
    # pure noise with few launches per chunk, 14x the target rate)
    return float(r.mean()), float(r.std(ddof=1)) / float(np.sqrt(len(r))), int(len(r))


def window_sketches(window: Window) -> dict[str, np.ndarray]:
    """The launch sketch of every kernel of a window, by full name."""
    categories = window.profile.kernels["name"].cat.categories
    codes = window.column("name")
    start = window.column("start")
    dur = window.column("end") - start
    sk = build_sketches(codes, start, dur, len(categories))
    present = np.flatnonzero(np.bincount(codes.astype(np.int64), minlength=len(categories)))
    names = np.asarray(categories, dtype=object)
    return {str(names[i]): sk[i] for i in present}

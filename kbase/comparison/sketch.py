"""Launch sketches, compared: repeat captures' sketches pooled, and one kernel's sketches before and after
matched chunk by chunk and quantile by quantile (what a sketch is and how it is built: ``analysis.sketch``).
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from kbase.analysis.medians import row_medians
from kbase.analysis.sketch import CHUNKS, COUNT, QUANTILES, TOTAL
from kbase.comparison.stats import t_two_sided_quantile


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
    rel, se, chunks = compare_many(before[None], after[None])
    return float(rel[0]), float(se[0]), int(chunks[0])


def compare_many(before: np.ndarray, after: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``compare`` of every kernel at once: (k, CHUNKS, WIDTH) sketches -> k changes, standard errors
    and chunks used (NaN change and error where fewer than 3 chunks match). Gross outlier chunks are
    left out first (:func:`outlier_chunks`)."""
    r = chunk_ratios(before, after)
    ok = ~np.isnan(r)
    ok &= ~outlier_chunks(r, ok)
    n = ok.sum(axis=-1)
    # the chunks are independent runs of the kernel's launches: their mean ratio and its standard error
    # (Student's t with chunks - 1 degrees of freedom; a median/MAD version flagged 1 kernel in 140 of
    # pure noise with few launches per chunk, 14x the target rate)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(ok, r, 0.0).sum(axis=-1) / n
        dev = np.where(ok, r - mean[..., None], 0.0)
        se = np.sqrt((dev * dev).sum(axis=-1) / (n - 1)) / np.sqrt(n)
    enough = n >= 3
    return np.where(enough, mean, np.nan), np.where(enough, se, np.nan), n


OUTLIER_ALPHA = 0.01  # generalized ESD test level
OUTLIER_MODIFIED_Z = 8.0  # and at least this far out in modified z-scores (median/MAD)
MAX_OUTLIERS = CHUNKS // 4
MIN_CHUNKS_FOR_OUTLIERS = 6


@lru_cache(maxsize=64)
def _esd_critical(n: int, i: int) -> float:
    """Rosner's generalized ESD critical value for the i-th (1-based) suspect among n values."""
    m = n - i + 1  # values left when the i-th suspect is tested
    p = OUTLIER_ALPHA / m  # two-sided tail of t at m - 2 degrees of freedom
    t = t_two_sided_quantile(p, m - 2, NormalDist().inv_cdf(1.0 - p / 2.0))
    return (m - 1) * t / math.sqrt((m - 2 + t * t) * m)


def outlier_chunks(r: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """The chunk ratios (rows of ``r``, usable where ``ok``) to leave out as gross outliers: those that
    Rosner's generalized ESD test calls outliers (level ``OUTLIER_ALPHA``, at most ``MAX_OUTLIERS``,
    rows of at least ``MIN_CHUNKS_FOR_OUTLIERS`` chunks) and that also lie ``OUTLIER_MODIFIED_Z``
    modified z-scores from the row's median.

    Why: with few launches, a chunk holds one or two; one odd launch (interrupted, overlapped, a clock
    dip) moves its chunk's ratio by 10%, and the spread of the chunk ratios then hides a uniform 3%
    slowdown of every other launch (a real ResNet-50 convolution: one such launch in each of two
    repeat captures). Why both tests: ESD's critical values assume normal chunks, and the MAD of 8
    values is a noisy scale; each alone, at a level that finds such launches, left out chunks of pure
    normal noise often enough to raise the simulated pure-noise false flags 1.2-1.7x; together they
    raise them ~1.2x (docs/noise-model.md)."""
    out = np.zeros_like(ok)
    n = ok.sum(axis=-1)
    rows = np.flatnonzero(n >= MIN_CHUNKS_FOR_OUTLIERS)
    if not len(rows):
        return out
    x, live, at = r[rows], ok[rows].copy(), np.arange(len(rows))
    crit = np.array([[_esd_critical(m, i) for i in range(1, MAX_OUTLIERS + 1)] for m in n[rows].tolist()])
    suspects = np.empty((len(rows), MAX_OUTLIERS), dtype=np.int64)
    # ESD: the outliers are the first i suspects, i the largest with R_i > lambda_i
    found = np.zeros(len(rows), dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        for i in range(MAX_OUTLIERS):
            m = live.sum(axis=-1)
            mean = np.where(live, x, 0.0).sum(axis=-1) / m
            dev = np.where(live, np.abs(x - mean[:, None]), -1.0)
            sd = np.sqrt(np.where(live, dev * dev, 0.0).sum(axis=-1) / (m - 1))
            j = dev.argmax(axis=-1)
            found = np.where(dev[at, j] > crit[:, i] * sd, i + 1, found)
            suspects[:, i] = j
            live[at, j] = False
        # np.nanmedian's values to the bit, without the numpy.ma it imports (~12 ms of every stored diff and gate)
        xs = np.where(ok[rows], x, np.nan)
        med = row_medians(xs, ~np.isnan(xs))
        dev_med = np.abs(xs - med[:, None])
        mad = row_medians(dev_med, ~np.isnan(dev_med))
        for i in range(MAX_OUTLIERS):
            j = suspects[:, i]
            far = 0.6745 * np.abs(x[at, j] - med) > OUTLIER_MODIFIED_Z * mad
            hit = (found > i) & far
            out[rows[hit], j[hit]] = True
    return out

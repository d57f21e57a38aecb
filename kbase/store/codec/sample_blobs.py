"""The ``samples`` and ``sketches`` blobs of ``baseline_kernels`` (numpy): per-iteration samples and launch
sketches as mantissa codes (``mantissa.mantissa_codes``), coded against what each kernel's own
values predict so the residuals are small integers. docs/store-format.md has the layout and the figures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbase.analysis.sketch import CHUNKS, COUNT, QUANTILES, TOTAL, WIDTH
from kbase.store.codec.mantissa import (
    LOSSLESS_BITS,
    QUANTILE_BITS,
    SAMPLE_BITS,
    mantissa_codes,
    mantissa_values,
    row_medians,
)
from kbase.store.codec.packed import Packed, PackedError
from kbase.store.codec.packing import pack

if TYPE_CHECKING:
    import numpy as np

MICROSECOND = 1000.0  # Kineto's timer unit: quantiles that are all whole µs are coded in µs, and stay whole


def _row_median(codes: np.ndarray, has: np.ndarray) -> np.ndarray:
    """Each row's median code over the entries ``has`` (0 for a row with none), rounded."""
    import numpy as np

    out = np.zeros(len(codes), dtype=np.int64)
    live = has.any(axis=1)
    if live.any():
        out[live] = np.rint(row_medians(codes[live], has[live])).astype(np.int64)
    return out


# ------------------------------------------------------------------------------------------ samples


def encode_samples(ns: np.ndarray, count: np.ndarray, bits: int = SAMPLE_BITS) -> bytes:
    """(kernels, keys) ns and launches per iteration key, summed over GPUs. Launch counts are whole (kept
    exactly, against each kernel's median); ns as ``bits``-bit mantissa codes against the kernel's
    median code where it launched, 0 where it did not."""
    import numpy as np

    k, n = ns.shape
    c = np.rint(np.nan_to_num(count)).astype(np.int64)
    c_med = np.rint(row_medians(c)).astype(np.int64) if n else np.zeros(k, dtype=np.int64)
    codes = mantissa_codes(ns, bits)
    has = c > 0
    med = _row_median(codes, has)
    pred = np.where(has, med[:, None], 0)
    return pack(k, {"count_median": (c_med, {}), "count": ((c - c_med[:, None]).ravel(), {}),
                    "ns_median": (med, {}), "ns": ((codes - pred).ravel(), {})}, {"keys": n, "bits": bits})


def decode_samples(blob: bytes, rows: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(ns, launches) per kernel and iteration key, float64 (kernels, keys); of the kernels ``rows`` only
    when given (the report's series: 25 kernels of each of thousands of baselines)."""
    import numpy as np

    p = Packed(blob)
    k, n = p.rows, int(p.meta["keys"])
    at = np.arange(k) if rows is None else np.asarray(rows, dtype=np.int64)
    c = p.array("count_median")[at, None] + p.array("count", rows=(at, n))
    pred = np.where(c > 0, p.array("ns_median")[at, None], 0)
    codes = pred + p.array("ns", rows=(at, n))
    return mantissa_values(codes, int(p.meta["bits"])), c.astype(np.float64)


# ------------------------------------------------------------------------------------------ sketches


def _even_split(n: np.ndarray) -> np.ndarray:
    """Launches per chunk when ``n`` launches are split by launch order (``analysis.sketch``: chunk
    k * CHUNKS // n): ceil((c + 1) n / CHUNKS) - ceil(c n / CHUNKS)."""
    import numpy as np

    c = np.arange(CHUNKS + 1, dtype=np.int64)
    edges = -((-c[None, :] * n[:, None]) // CHUNKS)
    return np.diff(edges, axis=1)


def _fill(codes: np.ndarray, finite: np.ndarray) -> np.ndarray:
    """``codes`` (rows, CHUNKS, QUANTILES) with every missing entry set to its prediction (the chunk's previous
    quantile; a chunk's first: the previous chunk's first, 0 for the first chunk): a residual of 0."""
    import numpy as np

    out = np.where(finite, codes, 0)
    first = np.where(finite[:, :, 0], out[:, :, 0], -1)
    for c in range(CHUNKS):  # a chunk's first quantile from the previous chunk's
        prev = out[:, c - 1, 0] if c else np.zeros(len(out), dtype=np.int64)
        out[:, c, 0] = np.where(first[:, c] >= 0, first[:, c], prev)
    idx = np.where(finite, np.arange(QUANTILES), 0)
    idx[:, :, 0] = 0
    idx = np.maximum.accumulate(idx, axis=2)
    return np.take_along_axis(out, idx, axis=2)


def _quantile_residuals(codes: np.ndarray) -> np.ndarray:
    import numpy as np

    res = np.diff(codes, axis=2, prepend=0)
    res[:, :, 0] = np.diff(codes[:, :, 0], axis=1, prepend=0)
    return res


def encode_sketches(sketches: np.ndarray, counts: np.ndarray, bits: int = QUANTILE_BITS) -> bytes | None:
    """(kernels, CHUNKS, WIDTH) launch sketches, NaN rows for kernels without one; ``counts``: the kernels'
    launches (the even split predicts the chunk counts). None when no kernel has a sketch."""
    import numpy as np

    q = sketches[:, :, :QUANTILES]
    present = np.isfinite(q).any(axis=(1, 2)) | (np.nan_to_num(sketches[:, :, COUNT]) != 0).any(axis=1)
    if not present.any():
        return None
    sk = sketches[present]
    q, finite = sk[:, :, :QUANTILES], np.isfinite(sk[:, :, :QUANTILES])
    unit = MICROSECOND if finite.any() and not np.any(np.mod(q[finite], MICROSECOND)) else 1.0
    if unit == 1.0 and finite.any():
        back = mantissa_values(mantissa_codes(q, bits), bits)[finite]
        if not np.any(np.mod(back, MICROSECOND)):  # would read as whole-µs timestamps (a coarser timer): exact
            bits = LOSSLESS_BITS
    return _pack_sketches(sk, finite, present, counts, unit, bits)


def _pack_sketches(sk: np.ndarray, finite: np.ndarray, present: np.ndarray, counts: np.ndarray, unit: float,
                   bits: int) -> bytes:
    import numpy as np

    codes = _fill(mantissa_codes(sk[:, :, :QUANTILES] / unit, bits), finite)
    chunk_count = np.rint(np.nan_to_num(sk[:, :, COUNT])).astype(np.int64)
    totals = mantissa_codes(sk[:, :, TOTAL], SAMPLE_BITS)
    # a chunk's total against its launches x its quantiles' mean, or against the previous chunk's: the smaller
    by_mean = totals - _total_prediction(codes, finite, chunk_count, bits, unit)
    by_prev = np.diff(totals, axis=1, prepend=0)
    use_mean = bool(np.abs(by_mean).sum() <= np.abs(by_prev).sum())
    return pack(int(present.sum()), {
        "present": (present.astype(np.int64), {}),
        "quantiles": (_quantile_residuals(codes).ravel(), {}),
        "missing": ((~finite).astype(np.int64).ravel(), {}),
        "chunk_count": ((chunk_count - _even_split(np.asarray(counts, dtype=np.int64)[present])).ravel(), {}),
        "chunk_total": ((by_mean if use_mean else by_prev).ravel(), {}),
    }, {"bits": bits, "total_bits": SAMPLE_BITS, "unit": unit, "total_from": "mean" if use_mean else "previous"})


def _total_prediction(codes: np.ndarray, finite: np.ndarray, chunk_count: np.ndarray, bits: int,
                      unit: float) -> np.ndarray:
    """Each chunk's launches x the mean of its (decoded) quantiles, as mantissa codes of ``SAMPLE_BITS``."""
    import numpy as np

    q = np.where(finite, mantissa_values(codes, bits) * unit, 0.0)
    n = finite.sum(axis=2)
    mean = np.divide(q.sum(axis=2), n, out=np.zeros(n.shape), where=n > 0)
    return mantissa_codes(chunk_count * mean, SAMPLE_BITS)


def decode_sketches(blob: bytes, counts: np.ndarray) -> np.ndarray:
    """(kernels, CHUNKS, WIDTH) float64 sketches, NaN rows for kernels without one."""
    import numpy as np

    p = Packed(blob)
    present = p.array("present", len(counts)).astype(bool)
    if len(present) != len(counts) or int(present.sum()) != p.rows:
        raise PackedError("sketches: kernel count does not match the levels")
    k, shape = p.rows, (p.rows, CHUNKS, QUANTILES)
    res = p.array("quantiles", k * CHUNKS * QUANTILES).reshape(shape)
    codes = np.cumsum(res, axis=2)
    codes += (np.cumsum(res[:, :, 0], axis=1) - res[:, :, 0])[:, :, None]
    bits, unit = int(p.meta["bits"]), float(p.meta["unit"])
    missing = p.array("missing", k * CHUNKS * QUANTILES).reshape(shape).astype(bool)
    q = mantissa_values(codes, bits) * unit
    q[missing] = np.nan
    out = np.full((len(counts), CHUNKS, WIDTH), np.nan)
    part = out[present]
    part[:, :, :QUANTILES] = q
    chunk_count = _even_split(np.asarray(counts, dtype=np.int64)[present]) + p.array(
        "chunk_count", k * CHUNKS).reshape(k, CHUNKS)
    part[:, :, COUNT] = chunk_count
    total_res = p.array("chunk_total", k * CHUNKS).reshape(k, CHUNKS)
    if p.meta.get("total_from") == "mean":
        total_codes = total_res + _total_prediction(codes, ~missing, chunk_count, bits, unit)
    else:
        total_codes = np.cumsum(total_res, axis=1)
    part[:, :, TOTAL] = mantissa_values(total_codes, int(p.meta["total_bits"]))
    out[present] = part
    return out

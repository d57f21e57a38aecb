"""Mantissa codes: the stored form of per-iteration times, chunk totals and sketch quantiles (``kernel_blobs``,
``sample_blobs``, ``op_blobs``): a value kept to a few significant bits, as a small monotone integer that
delta-codes and compresses well."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbase.analysis.medians import row_medians  # noqa: F401 - re-exported (its home before)

if TYPE_CHECKING:
    import numpy as np

SAMPLE_BITS = 10  # significant bits of per-iteration ns and chunk totals: <= 0.049% relative error
QUANTILE_BITS = 8  # ... of sketch quantiles: <= 0.2% each; a chunk's comparison sums 16 of them
LOSSLESS_BITS = 24  # float32's significand: every value the 0008 store held comes back exactly


def mantissa_codes(values: np.ndarray, bits: int) -> np.ndarray:
    """Monotone integer codes of non-negative values with ``bits`` significant bits: a value below 2^(bits+1)
    is its rounded self; above, code = e * 2^bits + m for the value m * 2^e, 2^bits <= m < 2^(bits+1)
    (relative error <= 2^-(bits+1)). NaN and negatives code as 0."""
    import numpy as np

    v = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0)
    v = np.maximum(v, 0.0)
    _, x = np.frexp(v)
    e = np.maximum(x.astype(np.int64) - 1 - bits, 0)
    m = np.rint(np.ldexp(v, -e)).astype(np.int64)
    return np.where(e > 0, e * (1 << bits) + m, m)


def mantissa_values(codes: np.ndarray, bits: int) -> np.ndarray:
    """The values of ``mantissa_codes`` (float64, exact)."""
    import numpy as np

    codes = np.asarray(codes, dtype=np.int64)
    e = np.maximum(codes >> bits, 1) - 1
    return np.ldexp((codes - e * (1 << bits)).astype(np.float64), e.astype(np.int32))


def mantissa_value(code: int, bits: int) -> float:
    """``mantissa_values`` of one code, in Python."""
    e = max(code >> bits, 1) - 1
    return float((code - (e << bits)) << e)

"""Writing packed columns (``packed`` reads them; the layout is its docstring's): each column's values narrowed to
the fewest bytes that hold them, zigzagged when signed, differenced when asked, shuffled byte plane by byte plane,
and every column's bytes compressed as one Zstandard stream. Numpy; deterministic (same columns, same bytes)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kbase.store.codec.packed import DELTA, FLOAT, MAGIC, VERSION, ZIGZAG, ZSTD, _zstd

if TYPE_CHECKING:
    import numpy as np


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _compress(raw: bytes) -> bytes:
    return _zstd("compressor").compress(raw)


def _column(values: np.ndarray, *, delta: bool = False, as_float: bool = False) -> tuple[int, bytes]:
    """(kind, uncompressed shuffled bytes) of one column: int64 values (zigzag when any is negative, after
    differencing when ``delta``), or float64 bits (``as_float``)."""
    import numpy as np

    if as_float:
        u = np.ascontiguousarray(values, dtype="<f8").view("<u8")
        kind = FLOAT
    else:
        v = np.asarray(values, dtype=np.int64)
        if delta:
            v = np.diff(v, prepend=np.int64(0))
        kind = DELTA if delta else 0
        if len(v) and v.min() < 0:
            v = (v << 1) ^ (v >> 63)
            kind |= ZIGZAG
        u = v.view(np.uint64)
    top = int(u.max()) if len(u) else 0
    if not top:
        return kind, b""
    width = next(w for w in (1, 2, 4, 8) if top < 1 << (8 * w))
    if as_float:
        width = 8
    narrow = u.astype(f"<u{width}")
    return kind | width, narrow.view(np.uint8).reshape(-1, width).T.tobytes()


def pack(n: int, columns: dict[str, tuple[np.ndarray, dict[str, bool]]], meta: dict[str, Any] | None = None
         ) -> bytes:
    """The blob of ``n`` rows: ``columns`` maps a name to (values, options: ``delta`` / ``as_float``), each of
    ``n`` values (an array of another length is a column of that many: per-row matrices flattened)."""
    head = json.dumps(meta or {}, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    out = [MAGIC, bytes([VERSION, ZSTD]), _varint(n), _varint(len(head)), head, _varint(len(columns))]
    raws = []
    for name, (values, options) in columns.items():
        kind, raw = _column(values, **options)
        label = name.encode()
        out += [_varint(len(label)), label, bytes([kind]), _varint(len(raw))]
        raws.append(raw)
    body = b"".join(raws)
    out.append(_compress(body) if body else b"")
    return b"".join(out)

"""Packed columns: named integer and float columns of one table in one self-describing, deterministic blob
(the store's per-baseline kernel data, ``kernel_blobs``; the layout is docs/store-format.md's).

Layout (little-endian; ``varint``: unsigned LEB128)::

    b"KBP" | version u8 | codec u8 | varint rows | varint meta length | meta (JSON) | varint columns |
    per column: varint name length | name (UTF-8) | kind u8 | varint payload length | payload

``kind``: bits 0-3 the byte width of each stored value (0: every value is 0, no payload; 1, 2, 4, 8),
bit 4 zigzag (signed values), bit 5 delta (the values are the running sums of those stored), bit 6 float
(8-byte IEEE 754 bits). The payload is the values' bytes *shuffled* (every value's first byte, then every
second byte, ...: the high bytes of small numbers form long runs of zeros) and compressed with the blob's
codec (1 raw deflate (zlib level 9), 2 raw LZMA2, preset 6, 1 MiB window). Same columns in, same bytes
out (for a given zlib/liblzma).

Decoding needs no numpy (``Packed.ints``/``floats``: ``kbase show`` and ``history`` load none); the
numpy readers (``Packed.array``) serve the bulk decoders. Encoding is numpy.
"""

from __future__ import annotations

import json
import lzma
import sys
import zlib
from array import array
from itertools import accumulate
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

MAGIC = b"KBP"
VERSION = 1
ZLIB, LZMA = 1, 2
WIDTH_MASK, ZIGZAG, DELTA, FLOAT = 0x0F, 0x10, 0x20, 0x40
# preset 6 with a 1 MiB window: a blob is smaller than that, and the default 8-64 MiB took up to ~70 ms per
# call to set up for no gain; "extreme" saved ~1% for 5x the time (docs/store-format.md has the figures)
_LZMA_FILTERS = [{"id": lzma.FILTER_LZMA2, "preset": 6, "dict_size": 1 << 20}]
_TYPECODES = {1: "B", 2: "H", 4: "I", 8: "Q"}
for _w, _t in list(_TYPECODES.items()):  # 'I' and 'L' differ between platforms: take the one of that width
    if array(_t).itemsize != _w:
        _TYPECODES[_w] = next(t for t in "BHILQ" if array(t).itemsize == _w)


class PackedError(ValueError):
    """A blob that is not packed columns of a version this kbase reads."""


# ------------------------------------------------------------------------------------------ varints


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if pos >= len(buf):
            raise PackedError("packed columns: truncated")
        byte = buf[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return n, pos
        shift += 7


# ------------------------------------------------------------------------------------------ encoding


def _compress(raw: bytes, codec: int) -> bytes:
    if codec == LZMA:
        return lzma.compress(raw, format=lzma.FORMAT_RAW, filters=_LZMA_FILTERS)
    z = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: no zlib header and checksum (6 bytes a column)
    return z.compress(raw) + z.flush()


def _decompress(payload: bytes, codec: int) -> bytes:
    try:
        if codec == LZMA:
            return lzma.decompress(payload, format=lzma.FORMAT_RAW, filters=_LZMA_FILTERS)
        return zlib.decompress(payload, -15)
    except (lzma.LZMAError, zlib.error) as exc:
        raise PackedError(f"packed columns: corrupt payload ({exc})") from None


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


def pack(n: int, columns: dict[str, tuple[np.ndarray, dict[str, bool]]], meta: dict[str, Any] | None = None,
         codec: int = ZLIB) -> bytes:
    """The blob of ``n`` rows: ``columns`` maps a name to (values, options: ``delta`` / ``as_float``), each of
    ``n`` values (an array of another length is a column of that many: per-row matrices flattened)."""
    head = json.dumps(meta or {}, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
    out = [MAGIC, bytes([VERSION, codec]), _varint(n), _varint(len(head)), head, _varint(len(columns))]
    for name, (values, options) in columns.items():
        kind, raw = _column(values, **options)
        payload = _compress(raw, codec) if raw else b""
        label = name.encode()
        out += [_varint(len(label)), label, bytes([kind]), _varint(len(payload)), payload]
    return b"".join(out)


# ------------------------------------------------------------------------------------------ decoding


class Packed:
    """A decoded blob's header; each column is decompressed when asked for."""

    def __init__(self, blob: bytes) -> None:
        if not isinstance(blob, bytes | bytearray | memoryview) or bytes(blob[:3]) != MAGIC:
            raise PackedError("not packed columns (bad magic)")
        blob = bytes(blob)
        if len(blob) < 5 or blob[3] != VERSION or blob[4] not in (ZLIB, LZMA):
            raise PackedError(f"packed columns: version {blob[3] if len(blob) > 3 else '?'} is not one this "
                              "kbase reads (upgrade kbase)")
        self.codec = blob[4]
        self.rows, pos = _read_varint(blob, 5)
        size, pos = _read_varint(blob, pos)
        try:
            self.meta: dict[str, Any] = json.loads(blob[pos : pos + size])
        except ValueError:
            raise PackedError("packed columns: unreadable header") from None
        pos += size
        count, pos = _read_varint(blob, pos)
        self._cols: dict[str, tuple[int, bytes]] = {}
        for _ in range(count):
            size, pos = _read_varint(blob, pos)
            name = blob[pos : pos + size].decode()
            kind = blob[pos + size]
            size, pos = _read_varint(blob, pos + size + 1)
            self._cols[name] = (kind, blob[pos : pos + size])
            pos += size
        if pos != len(blob):
            raise PackedError("packed columns: trailing or missing bytes")

    def __contains__(self, name: str) -> bool:
        return name in self._cols

    @property
    def names(self) -> list[str]:
        return list(self._cols)

    def _raw(self, name: str) -> tuple[int, int, bytes]:
        """(kind, count, unshuffled little-endian bytes) of column ``name``."""
        kind, payload = self._cols[name]
        width = kind & WIDTH_MASK
        if not width:
            return kind, 0, b""
        raw = _decompress(payload, self.codec)
        if len(raw) % width:
            raise PackedError(f"packed columns: column {name} is {len(raw)} bytes, not a multiple of {width}")
        n = len(raw) // width
        if width == 1:
            return kind, n, raw
        out = bytearray(len(raw))
        for j in range(width):  # un-shuffle: byte j of every value
            out[j::width] = raw[j * n : (j + 1) * n]
        return kind, n, bytes(out)

    def length(self, name: str) -> int | None:
        """The number of values column ``name`` stores (None for an all-zero column, which takes the
        length its reader asks for)."""
        kind, payload = self._cols[name]
        return None if not kind & WIDTH_MASK else len(_decompress(payload, self.codec)) // (kind & WIDTH_MASK)

    def ints(self, name: str, n: int | None = None) -> list[int]:
        """Column ``name`` as Python ints (``n``: the length of an all-zero column; default ``rows``)."""
        kind, count, raw = self._raw(name)
        if not count:
            return [0] * (self.rows if n is None else n)
        a = array(_TYPECODES[kind & WIDTH_MASK])
        a.frombytes(raw)
        if sys.byteorder == "big":
            a.byteswap()
        values: list[int] = a.tolist()
        if kind & ZIGZAG:
            values = [(v >> 1) ^ -(v & 1) for v in values]
        if kind & DELTA:
            values = list(accumulate(values))
        return values

    def floats(self, name: str, n: int | None = None) -> list[float]:
        """A float column as Python floats (all-zero bits: 0.0)."""
        kind, count, raw = self._raw(name)
        if not count:
            return [0.0] * (self.rows if n is None else n)
        a = array("d")
        a.frombytes(raw)
        if sys.byteorder == "big":
            a.byteswap()
        return a.tolist()

    def array(self, name: str, n: int | None = None) -> np.ndarray:
        """Column ``name`` as a numpy array: int64, or float64 for a float column."""
        import numpy as np

        kind, count, raw = self._raw(name)
        if kind & FLOAT:
            return np.frombuffer(raw, dtype="<f8").astype(np.float64) if count else np.zeros(
                self.rows if n is None else n)
        if not count:
            return np.zeros(self.rows if n is None else n, dtype=np.int64)
        u = np.frombuffer(raw, dtype=f"<u{kind & WIDTH_MASK}").astype(np.uint64)
        v = u.view(np.int64)
        if kind & ZIGZAG:
            v = (u >> np.uint64(1)).view(np.int64) ^ -(u & np.uint64(1)).view(np.int64)
        if kind & DELTA:
            v = np.cumsum(v)
        return v

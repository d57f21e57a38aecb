"""The two values ``kbase history`` reads from each of thousands of ``levels`` blobs (a kernel's launches and
total ns), read straight from the blob's bytes: no ``Packed`` object, no per-column table.

``levels_reader`` answers exactly what ``kernel_blobs.history_row(Packed(blob), i)`` answers, for the blobs
every writer of format 2 produces (two integer columns, ``count`` and ``total_ns``, neither delta-coded nor
float, the divisors in the header). For anything else — another layout, a stored float column, a delta
column, a damaged header or payload — it answers None and the caller takes the general decoder, which reads
or refuses that blob as always (its errors are the ones a user sees). tests/store/test_history_levels.py
checks both against each other on generated blobs.

Why not ``Packed``: at 10,000 baselines its header parse (a dict of columns, lazily parsed JSON, two
``int_at`` calls each re-checking the column) was ~0.1 s of a 0.6 s command. Here the column table, which
is the same bytes in every blob of the same kernel count and widths, is parsed once and then recognised by
one ``bytes.startswith`` (the table is self-delimiting: the same bytes parse to the same columns and end at
the same offset).
"""

from __future__ import annotations

from typing import Any

import zstandard

from kbase.store.codec.kernel_format import history_values
from kbase.store.codec.packed import (
    MAGIC,
    VERSION,
    WIDTH_MASK,
    ZIGZAG,
    ZSTD,
    PackedError,
    _json_object,
    _read_varint,
    _zstd,
)

_HEAD = MAGIC + bytes([VERSION, ZSTD])
_WANTED = ("count", "total_ns")

# (count, total_ns, avg_ns, per_iter_ns, share_window) of one row
HistoryValues = tuple[int, int, float, float, float]


class _Table:
    """The column table of the last blob read: its bytes and what they say."""

    __slots__ = ("count", "length", "raw", "size", "total")

    def __init__(self, raw: bytes, size: int, count: tuple[int, int, int, int],
                 total: tuple[int, int, int, int]) -> None:
        self.raw = raw  # the table's bytes, from the column count to the payload
        self.length = len(raw)
        self.size = size  # the decompressed payload's length (the sum of the column lengths)
        self.count, self.total = count, total  # (zigzag, start, end, values) in the payload


def _parse_table(blob: bytes, pos: int) -> _Table | None:
    """The column table at ``pos`` when it is exactly ``count`` then ``total_ns``, each an integer column of 1,
    2, 4 or 8 bytes a value, plain or zigzag (no delta, no float), of whole values; else None."""
    try:
        start = pos
        n, pos = _read_varint(blob, pos)
        if n != 2:
            return None
        cols: list[tuple[int, int, int, int]] = []
        at = 0
        for want in _WANTED:
            size, pos = _read_varint(blob, pos)
            if blob[pos : pos + size] != want.encode():
                return None
            kind = blob[pos + size]
            length, pos = _read_varint(blob, pos + size + 1)
            width = kind & WIDTH_MASK
            if kind & ~(WIDTH_MASK | ZIGZAG) or width not in (1, 2, 4, 8) or length % width or not length:
                return None
            cols.append((kind & ZIGZAG, at, at + length, length // width))
            at += length
    except (PackedError, IndexError):
        return None
    return _Table(blob[start:pos], at, cols[0], cols[1])


class LevelsReader:
    """``read(blob, i)``: row ``i``'s history values of a ``levels`` blob, or None (take the general decoder).
    One reader per read of many blobs: it keeps the last column table seen."""

    __slots__ = ("_content_size", "_decompressor", "_table")

    def __init__(self) -> None:
        self._table: _Table | None = None
        self._decompressor = _zstd("decompressor")  # (this thread's, as ``packed`` keeps them)
        self._content_size = zstandard.frame_content_size

    def read(self, blob: Any, i: int) -> HistoryValues | None:
        if type(blob) is not bytes or not blob.startswith(_HEAD):
            return None
        try:
            # rows (one or two bytes below 16,384) and the header's length (one byte below 128): nearly always
            pos = 6 if blob[5] < 0x80 else 7 if blob[6] < 0x80 else _read_varint(blob, 5)[1]
            size = blob[pos]
            if size < 0x80:
                meta_at = pos + 1
            else:
                size, meta_at = _read_varint(blob, pos)
            meta_end = meta_at + size
            table = self._table
            if table is None or not blob.startswith(table.raw, meta_end):
                table = _parse_table(blob, meta_end)
                if table is None:
                    return None
                self._table = table
            payload_at = meta_end + table.length
            if payload_at >= len(blob):
                return None
            meta = _json_object(blob[meta_at:meta_end].decode())
            payload, size = blob[payload_at:], table.size
            # ``packed._decompress``'s bounds, called here (10,000 calls): a frame that states more than the
            # header's size is refused before anything is allocated, and none decodes past that size
            if self._content_size(payload) > size:
                return None
            body = self._decompressor.decompress(payload, max_output_size=size, allow_extra_data=False)
        except (PackedError, IndexError, ValueError, zstandard.ZstdError):
            return None  # (UnicodeDecodeError is a ValueError) the general decoder reads or refuses the blob
        if len(body) != size or type(meta) is not dict:
            return None
        # byte j of every value is plane j (``packed``): the row's bytes are every n-th from its column's start
        zigzag, start, end, n = table.count
        if not 0 <= i < n:
            return None  # (the general decoder's IndexError)
        count = int.from_bytes(body[start + i : end : n], "little")
        if zigzag:
            count = (count >> 1) ^ -(count & 1)
        zigzag, start, end, n = table.total
        if i >= n:
            return None
        total = int.from_bytes(body[start + i : end : n], "little")
        if zigzag:
            total = (total >> 1) ^ -(total & 1)
        return history_values(count, total, meta)  # (as ``kernel_blobs.history_row`` derives them)

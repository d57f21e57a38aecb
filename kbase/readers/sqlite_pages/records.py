"""The records of a batch of table leaf pages decoded at once, in numpy: each cell's two varints (payload length,
rowid), each record's serial types, then each needed integer as one gather of 8 big-endian bytes and a shift
(which also extends the sign). What is not an integer, or not surely where it seems, raises
:class:`~kbase.readers.sqlite_pages.btree.Unsure`."""

from __future__ import annotations

import numpy as np

from kbase.readers.sqlite_pages.btree import LEAF, PAD, Pages, Unsure, cell_pointers

_HIGH_BITS = np.uint64(0x8080808080808080)
# Bytes of a value by serial type (0 NULL, 1-6 integers, 8 and 9 the constants 0 and 1); the others (a float,
# text, a blob, or a serial type longer than one byte) get a width no page holds, so the record-end check
# refuses the chunk.
_UNSURE = 1 << 40
_INT_SIZE = np.full(256, _UNSURE, dtype=np.int64)
_INT_SIZE[[0, 1, 2, 3, 4, 5, 6, 8, 9]] = [0, 1, 2, 3, 4, 6, 8, 0, 0]
# Bytes of any value by serial type, for the columns before or between the needed ones
_ANY_SIZE = _INT_SIZE.copy()
_ANY_SIZE[7] = 8
_ANY_SIZE[12:128] = (np.arange(12, 128) - 12) // 2
# Right shift that leaves a big-endian 8-byte read holding only the value's bytes (NULL and the constants:
# fixed afterwards)
_SHIFT = 8 * (8 - np.clip(_INT_SIZE, 1, 8))
_ONE_BYTE_VARINT = np.uint64(1 << 63)  # a big-endian word below it starts with a one-byte varint


def _words(buf: np.ndarray) -> np.ndarray:
    """The 8 bytes at every offset of ``buf`` as a big-endian int64 (a strided view: one gather per value)."""
    return np.ndarray(shape=(len(buf) - 7,), dtype=">i8", buffer=buf, strides=(1,))


def _unsigned(big_endian: np.ndarray) -> np.ndarray:
    return big_endian.astype(np.int64).view(np.uint64)  # (a view of the big-endian bytes would not swap them)


def _varint_length(word: np.ndarray) -> np.ndarray:
    """Bytes of the varint at the start of each ``word`` (8 bytes, big-endian, as uint64); 9: longer than
    the word."""
    last = ~word & _HIGH_BITS  # the high bit of each byte that ends a varint
    last |= last >> np.uint64(8)
    last |= last >> np.uint64(16)
    last |= last >> np.uint64(32)
    return 9 - np.bitwise_count(last).astype(np.int64)  # bytes from the first ending byte on


def _varint(word: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(value, length) of the varints at the start of ``word`` (see :func:`_varint_length`)."""
    length = _varint_length(word)
    if (length > 8).any():  # 9-byte varints (keys past 2^56, negative ones): SQLite's
        raise Unsure
    value = ((word >> np.uint64(56)) & np.uint64(0x7F)).astype(np.int64)
    for k in range(1, int(length.max(initial=0))):
        byte = ((word >> np.uint64(56 - 8 * k)) & np.uint64(0x7F)).astype(np.int64)
        value = np.where(length > k, (value << 7) | byte, value)
    return value, length


def decode_leaves(pages: Pages, numbers: np.ndarray, positions: list[int]) -> tuple[list[np.ndarray], list]:
    """(values, NULL masks) of the columns at ``positions`` in leaf pages ``numbers``."""
    size, usable = pages.size, pages.usable
    last = max(positions)
    buf = pages.read(numbers)
    base = np.arange((len(buf) - PAD) // size, dtype=np.int64) * size
    if (buf[base] != LEAF).any():
        raise Unsure
    _, page_of_cell, cell = cell_pointers(buf, base, 8, usable)
    words = _words(buf)
    # A cell: its payload's length and its rowid (two varints, nearly always within the same 8 bytes), then
    # the record: the header's length (a varint), one serial type per column, the values in that order.
    word = _unsigned(words[cell])
    n1: np.ndarray | int
    if (word < _ONE_BYTE_VARINT).all():  # every payload under 128 bytes (nsys rows): a one-byte varint
        payload, n1 = (word >> np.uint64(56)).astype(np.int64), 1
        n2 = _varint_length(word << np.uint64(8))
    else:
        payload, n1 = _varint(word)
        n2 = _varint_length(word << (n1 * 8).astype(np.uint64))  # (zeros shifted in end a varint: 9 = past it)
    past = np.flatnonzero(n1 + n2 > 8)
    if len(past):
        n2[past] = _varint(_unsigned(words[cell[past] + (n1 if isinstance(n1, int) else n1[past])]))[1]
    record = cell + n1 + n2
    local = payload
    if (payload > usable - 35).any():  # overflow: the page keeps only the first bytes (fileformat2 §1.6)
        min_local = (usable - 12) * 32 // 255 - 23
        local = np.where(payload <= usable - 35, payload, min_local + (payload - min_local) % (usable - 4))
        local = np.where(local <= usable - 35, local, min_local)
    end = record + local
    if (end > page_of_cell + usable).any():
        raise Unsure
    first = buf[record]
    head: np.ndarray
    n3: np.ndarray | int
    if (first < 0x80).all():  # a record header under 128 bytes (as nsys writes them): its length is one byte
        head, n3 = first.astype(np.int64), 1
    else:
        head, n3 = _varint(_unsigned(words[record]))
    if (head < n3 + last + 1).any():  # fewer columns stored than needed
        raise Unsure
    types_at = record + n3
    # each record's serial types, 8 at a time: the gathered big-endian words keep the file's byte order, so
    # their bytes are the types in column order (a serial type past one byte, >= 128, has an "unsure" width)
    type_bytes = [words[types_at + 8 * k].view(np.uint8).reshape(-1, 8) for k in range(last // 8 + 1)]
    at = record + head  # where the value of the column being passed starts
    found: dict[int, tuple[np.ndarray, np.ndarray, int, int]] = {}
    for column in range(last + 1):
        # A column's serial types, contiguous: nearly always one or two kinds in a batch (the same widths),
        # so their range decides most steps at once instead of a lookup per row.
        kind = np.ascontiguousarray(type_bytes[column // 8][:, column % 8])
        lo, hi = int(kind.min(initial=255)), int(kind.max(initial=0))
        sizes = _INT_SIZE if column in positions else _ANY_SIZE
        if column in positions:
            found[column] = (at, kind, lo, hi)
        if lo != hi:
            at = at + sizes[kind]
        elif sizes[lo]:
            at = at + int(sizes[lo])
    if (at > end).any():  # past the record: or a value this reader does not read (an "unsure" width)
        raise Unsure
    # A record whose header ends with the columns read must fill its payload exactly (SQLite's own check).
    if ((head == n3 + last + 1) & (at != record + payload)).any():
        raise Unsure
    values: list[np.ndarray] = []
    nulls: list[np.ndarray | None] = []
    for column in positions:
        start, kind, lo, hi = found[column]
        if lo == hi and lo in (0, 8, 9):  # every row NULL, or the same constant (0, 1): no bytes to read
            values.append(np.full(len(kind), 0 if lo == 0 else lo - 8, dtype=np.int64))
            nulls.append(np.ones(len(kind), dtype=bool) if lo == 0 else None)
            continue
        value = words[start].astype(np.int64)
        if lo == hi:
            value >>= int(_SHIFT[lo])  # one width: one shift (arithmetic: the sign extends)
        else:
            value >>= _SHIFT[kind]
        if hi >= 8:
            constant = np.flatnonzero(kind >= 8)  # the constants 0 and 1 (types 8 and 9): no bytes
            value[constant] = kind[constant] - 8
        null = kind == 0 if lo == 0 else None
        if null is not None and null.any():
            value[null] = 0
            nulls.append(null)
        else:
            nulls.append(None)
        values.append(value)
    return values, nulls

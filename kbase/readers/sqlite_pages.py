"""Integer columns of a SQLite table decoded straight from the file's B-tree pages, in numpy.

SQLite steps through a table one row at a time: ~0.4 CPU-seconds per 1M kernel rows through ADBC, most of
what ``kbase top`` and ``kbase snapshot`` cost. The records of an nsys table are small and all-integer, and
the file format (https://www.sqlite.org/fileformat2.html) lays them out so that whole pages decode as
arrays: a leaf page's cell pointers, each cell's two varints, each record's serial types and its big-endian
values. No library reads SQLite pages into arrays (ADBC, the ``sqlite3`` module and apsw all step rows), so
this module does, for the one shape it needs.

It reads only what it is sure of, and answers ``None`` for everything else, so the caller reads the table
through SQLite as before, with SQLite's own errors: a ``WITHOUT ROWID`` or generated-column table, a column
that aliases the rowid, a page or cell pointer out of place, a record shorter than the columns asked for,
a needed value that is not an integer (text, a float: the reader's strict path takes over), a value
reaching past its page (an overflowing record), a varint longer than 8 bytes. The file must be the committed
database (:func:`kbase.readers.sqlite_source.committed_export`).
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kbase.readers.sqlite_source import connect_readonly

_LEAF, _INTERIOR = 13, 5  # table B-tree page types
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
_PAD = 64
_ONE_BYTE_VARINT = np.uint64(1 << 63)  # a big-endian word below it starts with a one-byte varint
# Leaf pages decoded at once: bounded memory at any table size, few enough numpy calls per row.
CHUNK_PAGES = 1024


class _Unsure(Exception):
    """Something this reader does not decode: SQLite reads the table instead."""


# (IndexError: an offset past the pages read, in a damaged file)
_NOT_SURE = (_Unsure, OSError, sqlite3.Error, IndexError)


class Assist:
    """A thread with nothing left to read lends itself (``offer``) to the table another thread is decoding:
    it takes chunks from the table's far end while that thread works from the front, until they meet. (The
    runtime table decodes in about half the kernel table's time; two threads on the kernel table beside it
    instead cost more CPU than they saved: 1M kernels 0.36-0.57 s against 0.36-0.44 s, the 10M snapshot
    6.9-7.8 s against 6.5-6.9 s.)"""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._job: _Decode | None = None

    def offer(self) -> None:
        with self._lock:
            job = self._job
        if job is not None:
            job.from_back()

    def _hold(self, job: _Decode | None) -> None:
        with self._lock:
            self._job = job


def int_columns(path: Path, table: str, columns: list[str],
                derive: Callable[[list[np.ndarray], list[np.ndarray | None]], list[np.ndarray]],
                n_out: int, capacity: int, progress=None, assist: Assist | None = None
                ) -> tuple[list[np.ndarray], int] | None:
    """``derive`` of every batch of ``columns`` (int64, NULL read as 0, and their NULL masks) of ``table``, in
    rowid order: ``n_out`` int64 arrays of ``capacity`` and the rows at their start; None when the pages are not
    sure to decode (see the module). ``capacity``: room for every row (max(rowid) + 1 when rowids are positive;
    more rows: None, and SQLite reads the table). ``assist``: where another thread may offer to help (see
    :class:`Assist`)."""
    try:
        root, positions = _layout(path, table, columns)
        with open(path, "rb", buffering=0) as fh:
            pages = _Pages(fh)
            job = _Decode(pages, pages.leaves(root), positions, derive, n_out, capacity, progress)
            if assist is not None:
                assist._hold(job)
            try:
                return job.from_front()
            finally:
                if assist is not None:
                    assist._hold(None)
    except _NOT_SURE:
        return None


class _Decode:
    """The chunks of a table's leaf pages, decoded by the reading thread from the front (``from_front``) and
    by at most one helper from the back (``from_back``), each writing its rows where they belong."""

    def __init__(self, pages: _Pages, leaves: np.ndarray, positions: list[int], derive, n_out: int,
                 capacity: int, progress) -> None:
        self.pages, self.positions, self.derive, self.progress = pages, positions, derive, progress
        self.chunks = [leaves[lo : lo + CHUNK_PAGES] for lo in range(0, len(leaves), CHUNK_PAGES)]
        self.out = [np.empty(capacity, dtype=np.int64) for _ in range(n_out)]
        self.front, self.back = 0, len(self.chunks)  # chunks not taken yet: [front, back)
        self.head, self.tail = 0, capacity  # rows written: [0, head) and [tail, capacity)
        self.helping, self.failed = False, False
        self.changed = threading.Condition()

    def _take(self, from_front: bool) -> int | None:
        with self.changed:
            if self.failed or self.front >= self.back:
                return None
            if from_front:
                self.front += 1
                return self.front - 1
            self.back -= 1
            return self.back

    def _place(self, arrays: list[np.ndarray], from_front: bool) -> None:
        m = len(arrays[0])
        with self.changed:
            if self.head + m > self.tail:  # more rows than positive rowids allow
                raise _Unsure
            if from_front:
                at, self.head = self.head, self.head + m
            else:
                self.tail -= m
                at = self.tail
            if self.progress is not None:
                self.progress(m, len(self.out[0]))
        for o, v in zip(self.out, arrays):
            o[at : at + m] = v

    def _chunk(self, i: int) -> list[np.ndarray]:
        return self.derive(*_decode(self.pages, self.chunks[i], self.positions))

    def _work(self, from_front: bool) -> None:
        """Chunks from one end until the ends meet. A chunk not sure to decode stops both ends, and so does
        any other error (raised on, after marking the table undecoded: a chunk taken but never placed must
        not leave a hole in rows returned)."""
        done = False
        try:
            while (i := self._take(from_front)) is not None:
                self._place(self._chunk(i), from_front)
            done = True
        except _NOT_SURE:
            pass
        finally:
            if not done:
                with self.changed:
                    self.failed = True

    def from_back(self) -> None:
        with self.changed:
            if self.helping:
                return  # one helper: its chunks land from the end backwards, in order
            self.helping = True
        try:
            self._work(False)
        finally:
            with self.changed:
                self.helping = False
                self.changed.notify_all()

    def from_front(self) -> tuple[list[np.ndarray], int] | None:
        self._work(True)
        with self.changed:
            self.changed.wait_for(lambda: not self.helping)
            if self.failed:
                return None
        n = self.head + len(self.out[0]) - self.tail
        for o in self.out:  # close the gap between the two ends (rowids not all used: deleted rows)
            o[self.head : n] = o[self.tail :]
        return self.out, n


def _layout(path: Path, table: str, columns: list[str]) -> tuple[int, list[int]]:
    """(root page, each column's position in the record)."""
    conn = connect_readonly(path)
    try:
        row = conn.execute("SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                           (table,)).fetchone()
        info = conn.execute(f'PRAGMA table_xinfo("{table}")').fetchall()  # table: a literal of the reader's
    finally:
        conn.close()
    if row is None or not isinstance(row[0], int) or re.search(r"\bWITHOUT\s+ROWID\b", row[1] or "", re.I):
        raise _Unsure
    if any(hidden for *_, hidden in info):  # generated columns are not stored where they are declared
        raise _Unsure
    keys = [r for r in info if r[5]]
    alias = keys[0][1] if len(keys) == 1 and str(keys[0][2]).upper() == "INTEGER" else None  # the rowid itself
    where = {r[1]: i for i, r in enumerate(info)}
    if alias in columns or any(c not in where for c in columns):
        raise _Unsure
    return row[0], [where[c] for c in columns]


class _Pages:
    """Pages of an open database file."""

    def __init__(self, fh) -> None:
        self.fh = fh
        head = os.pread(fh.fileno(), 100, 0)
        if len(head) < 100 or head[:16] != b"SQLite format 3\x00" or head[18] > 2 or head[19] > 2:
            raise _Unsure
        size = int.from_bytes(head[16:18], "big")
        self.size = 65536 if size == 1 else size
        self.usable = self.size - head[20]
        self.count = os.fstat(fh.fileno()).st_size // self.size
        if self.size < 512 or self.size & (self.size - 1) or self.usable < 480:
            raise _Unsure

    def read(self, numbers: np.ndarray) -> np.ndarray:
        """Pages ``numbers`` one after another (runs of consecutive pages in one read), then ``_PAD`` zero bytes
        (a varint or value read just past the last page stays in the buffer)."""
        if len(numbers) and (numbers.min() < 2 or numbers.max() > self.count):  # page 1: the schema's
            raise _Unsure
        buf = np.empty(len(numbers) * self.size + _PAD, dtype=np.uint8)  # (every page byte is read into it)
        buf[-_PAD:] = 0
        view = memoryview(buf.data)
        breaks = np.flatnonzero(np.diff(numbers) != 1) + 1
        for a, b in zip([0, *breaks.tolist()], [*breaks.tolist(), len(numbers)]):
            want = (b - a) * self.size
            if os.preadv(self.fh.fileno(), [view[a * self.size : b * self.size]],
                         (int(numbers[a]) - 1) * self.size) != want:
                raise _Unsure
        return buf

    def leaves(self, root: int) -> np.ndarray:
        """The table's leaf pages in key order, walking the interior levels from ``root`` (every leaf of a
        SQLite B-tree is at the same depth: a level's first page tells what the level is; the leaves are
        checked as they are decoded)."""
        level = np.array([root], dtype=np.int64)
        seen = 0
        while self.read(level[:1])[0] == _INTERIOR:
            buf = self.read(level)
            if (buf[np.arange(len(level)) * self.size] != _INTERIOR).any():
                raise _Unsure
            level = self._children(buf, len(level))
            seen += len(level)
            if seen > self.count:  # a cycle in a damaged file
                raise _Unsure
        ordered = np.sort(level)  # (not np.unique: it imports numpy.ma, ~12 ms of every kbase top)
        if (ordered[1:] == ordered[:-1]).any():  # a page reached twice: a damaged file
            raise _Unsure
        return level

    def _children(self, buf: np.ndarray, n_pages: int) -> np.ndarray:
        base = np.arange(n_pages, dtype=np.int64) * self.size
        counts, _, pointers = _cell_pointers(buf, base, 12, self.usable)
        # each page's children: its cells' left pointers, then its right pointer
        return np.insert(_be32(buf, pointers), np.cumsum(counts), _be32(buf, base + 8))


def _be32(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    b = buf[at[:, None] + np.arange(4)].astype(np.int64)
    return (b[:, 0] << 24) | (b[:, 1] << 16) | (b[:, 2] << 8) | b[:, 3]


def _cell_pointers(buf: np.ndarray, base: np.ndarray, header: int, usable: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cells per page, each cell's page, each cell's offset) in ``buf`` of the pages starting at ``base``."""
    counts = (buf[base + 3].astype(np.int64) << 8) | buf[base + 4]
    if (header + 2 * counts > usable).any():
        raise _Unsure
    # Cell i of a page: its pointer is the big-endian 16-bit word at base + header + 2i, an even offset (pages
    # and headers are of even size): one gather of 16-bit words, the pointers' index counting on over pages.
    skip = np.repeat((base + header) // 2 - (np.cumsum(counts) - counts), counts)
    pointers = np.ndarray(shape=(len(buf) // 2,), dtype=">u2", buffer=buf)
    offsets = pointers[np.arange(len(skip), dtype=np.int64) + skip].astype(np.int64)
    # a pointer must land past the pointer array and leave a varint's room before the usable end
    low = np.repeat(header + 2 * counts, counts)
    if len(offsets) and ((offsets < low) | (offsets > usable - 4)).any():
        raise _Unsure
    page = np.repeat(base, counts)
    return counts, page, page + offsets


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
        raise _Unsure
    value = ((word >> np.uint64(56)) & np.uint64(0x7F)).astype(np.int64)
    for k in range(1, int(length.max(initial=0))):
        byte = ((word >> np.uint64(56 - 8 * k)) & np.uint64(0x7F)).astype(np.int64)
        value = np.where(length > k, (value << 7) | byte, value)
    return value, length


def _decode(pages: _Pages, numbers: np.ndarray, positions: list[int]) -> tuple[list[np.ndarray], list]:
    """(values, NULL masks) of the columns at ``positions`` in leaf pages ``numbers``."""
    size, usable = pages.size, pages.usable
    last = max(positions)
    buf = pages.read(numbers)
    base = np.arange((len(buf) - _PAD) // size, dtype=np.int64) * size
    if (buf[base] != _LEAF).any():
        raise _Unsure
    _, page_of_cell, cell = _cell_pointers(buf, base, 8, usable)
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
        raise _Unsure
    first = buf[record]
    head: np.ndarray
    n3: np.ndarray | int
    if (first < 0x80).all():  # a record header under 128 bytes (as nsys writes them): its length is one byte
        head, n3 = first.astype(np.int64), 1
    else:
        head, n3 = _varint(_unsigned(words[record]))
    if (head < n3 + last + 1).any():  # fewer columns stored than needed
        raise _Unsure
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
        raise _Unsure
    # A record whose header ends with the columns read must fill its payload exactly (SQLite's own check).
    if ((head == n3 + last + 1) & (at != record + payload)).any():
        raise _Unsure
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

"""The B-tree side of a SQLite file, as the page decoder needs it: a table's root page and column positions
(from the schema), pages read by number, a table's leaf pages in key order and the cell pointers of a batch
of pages (https://www.sqlite.org/fileformat2.html). Anything unexpected raises :class:`Unsure`."""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import numpy as np

from kbase.readers.sqlite_source import connect_readonly

LEAF, INTERIOR = 13, 5  # table B-tree page types
PAD = 64  # zero bytes after the pages read: a varint or value read just past the last page stays in the buffer


class Unsure(Exception):
    """Something this reader does not decode: SQLite reads the table instead."""


# (IndexError: an offset past the pages read, in a damaged file)
NOT_SURE = (Unsure, OSError, sqlite3.Error, IndexError)


def table_layout(path: Path, table: str, columns: list[str]) -> tuple[int, list[int]]:
    """(root page, each column's position in the record)."""
    conn = connect_readonly(path)
    try:
        row = conn.execute("SELECT rootpage, sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                           (table,)).fetchone()
        info = conn.execute(f'PRAGMA table_xinfo("{table}")').fetchall()  # table: a literal of the reader's
    finally:
        conn.close()
    if row is None or not isinstance(row[0], int) or re.search(r"\bWITHOUT\s+ROWID\b", row[1] or "", re.I):
        raise Unsure
    if any(hidden for *_, hidden in info):  # generated columns are not stored where they are declared
        raise Unsure
    keys = [r for r in info if r[5]]
    alias = keys[0][1] if len(keys) == 1 and str(keys[0][2]).upper() == "INTEGER" else None  # the rowid itself
    where = {r[1]: i for i, r in enumerate(info)}
    if alias in columns or any(c not in where for c in columns):
        raise Unsure
    return row[0], [where[c] for c in columns]


class Pages:
    """Pages of an open database file."""

    def __init__(self, fh) -> None:
        self.fh = fh
        head = os.pread(fh.fileno(), 100, 0)
        if len(head) < 100 or head[:16] != b"SQLite format 3\x00" or head[18] > 2 or head[19] > 2:
            raise Unsure
        size = int.from_bytes(head[16:18], "big")
        self.size = 65536 if size == 1 else size
        self.usable = self.size - head[20]
        self.count = os.fstat(fh.fileno()).st_size // self.size
        if self.size < 512 or self.size & (self.size - 1) or self.usable < 480:
            raise Unsure

    def read(self, numbers: np.ndarray) -> np.ndarray:
        """Pages ``numbers`` one after another (runs of consecutive pages in one read), then ``PAD`` zero bytes."""
        if len(numbers) and (numbers.min() < 2 or numbers.max() > self.count):  # page 1: the schema's
            raise Unsure
        buf = np.empty(len(numbers) * self.size + PAD, dtype=np.uint8)  # (every page byte is read into it)
        buf[-PAD:] = 0
        view = memoryview(buf.data)
        breaks = np.flatnonzero(np.diff(numbers) != 1) + 1
        for a, b in zip([0, *breaks.tolist()], [*breaks.tolist(), len(numbers)]):
            want = (b - a) * self.size
            if os.preadv(self.fh.fileno(), [view[a * self.size : b * self.size]],
                         (int(numbers[a]) - 1) * self.size) != want:
                raise Unsure
        return buf

    def leaves(self, root: int) -> np.ndarray:
        """The table's leaf pages in key order, walking the interior levels from ``root`` (every leaf of a
        SQLite B-tree is at the same depth: a level's first page tells what the level is; the leaves are
        checked as they are decoded)."""
        level = np.array([root], dtype=np.int64)
        seen = 0
        while self.read(level[:1])[0] == INTERIOR:
            buf = self.read(level)
            if (buf[np.arange(len(level)) * self.size] != INTERIOR).any():
                raise Unsure
            level = self._children(buf, len(level))
            seen += len(level)
            if seen > self.count:  # a cycle in a damaged file
                raise Unsure
        ordered = np.sort(level)  # (not np.unique: it imports numpy.ma, ~12 ms of every kbase top)
        if (ordered[1:] == ordered[:-1]).any():  # a page reached twice: a damaged file
            raise Unsure
        return level

    def _children(self, buf: np.ndarray, n_pages: int) -> np.ndarray:
        base = np.arange(n_pages, dtype=np.int64) * self.size
        counts, _, pointers = cell_pointers(buf, base, 12, self.usable)
        # each page's children: its cells' left pointers, then its right pointer
        return np.insert(_be32(buf, pointers), np.cumsum(counts), _be32(buf, base + 8))


def _be32(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    b = buf[at[:, None] + np.arange(4)].astype(np.int64)
    return (b[:, 0] << 24) | (b[:, 1] << 16) | (b[:, 2] << 8) | b[:, 3]


def cell_pointers(buf: np.ndarray, base: np.ndarray, header: int, usable: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(cells per page, each cell's page, each cell's offset) in ``buf`` of the pages starting at ``base``."""
    counts = (buf[base + 3].astype(np.int64) << 8) | buf[base + 4]
    if (header + 2 * counts > usable).any():
        raise Unsure
    # Cell i of a page: its pointer is the big-endian 16-bit word at base + header + 2i, an even offset (pages
    # and headers are of even size): one gather of 16-bit words, the pointers' index counting on over pages.
    skip = np.repeat((base + header) // 2 - (np.cumsum(counts) - counts), counts)
    pointers = np.ndarray(shape=(len(buf) // 2,), dtype=">u2", buffer=buf)
    offsets = pointers[np.arange(len(skip), dtype=np.int64) + skip].astype(np.int64)
    # a pointer must land past the pointer array and leave a varint's room before the usable end
    low = np.repeat(header + 2 * counts, counts)
    if len(offsets) and ((offsets < low) | (offsets > usable - 4)).any():
        raise Unsure
    page = np.repeat(base, counts)
    return counts, page, page + offsets

"""A table's integer columns from its decoded leaf pages: :func:`int_columns` splits the leaves into chunks,
decodes them (:mod:`~kbase.readers.sqlite_pages.records`) and writes each chunk's rows where they belong,
from the front on the reading thread and from the back on a thread that lends itself (:class:`Assist`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kbase.readers.sqlite_pages.btree import NOT_SURE, Pages, Unsure, table_layout
from kbase.readers.sqlite_pages.records import decode_leaves

# Leaf pages decoded at once: bounded memory at any table size, few enough numpy calls per row.
CHUNK_PAGES = 1024


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
        root, positions = table_layout(path, table, columns)
        with open(path, "rb", buffering=0) as fh:
            pages = Pages(fh)
            job = _Decode(pages, pages.leaves(root), positions, derive, n_out, capacity, progress)
            if assist is not None:
                assist._hold(job)
            try:
                return job.from_front()
            finally:
                if assist is not None:
                    assist._hold(None)
    except NOT_SURE:
        return None


class _Decode:
    """The chunks of a table's leaf pages, decoded by the reading thread from the front (``from_front``) and
    by at most one helper from the back (``from_back``), each writing its rows where they belong."""

    def __init__(self, pages: Pages, leaves: np.ndarray, positions: list[int], derive, n_out: int,
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
                raise Unsure
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
        return self.derive(*decode_leaves(self.pages, self.chunks[i], self.positions))

    def _work(self, from_front: bool) -> None:
        """Chunks from one end until the ends meet. A chunk not sure to decode stops both ends, and so does
        any other error (raised on, after marking the table undecoded: a chunk taken but never placed must
        not leave a hole in rows returned)."""
        done = False
        try:
            while (i := self._take(from_front)) is not None:
                self._place(self._chunk(i), from_front)
            done = True
        except NOT_SURE:
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

"""Each kernel's launch call in an Nsight Systems export: the runtime row of the same process with the same
correlation id, found through a dense table (:class:`LaunchTable`) or a sorted-key join (:mod:`kbase.readers.nsys`
reads both tables and joins them here)."""

from __future__ import annotations

import numpy as np

from kbase.readers.nsys_sql import U32


class LaunchTable:
    """(process, correlation id) -> runtime row, as a dense int32 table: row ``code(pid) * span + corr - lo``.
    Built in O(n) where sorting the keys took ~1 s at 10M rows, and 4 bytes per slot instead of the sorted
    keys and their order (8 + 8 per row)."""

    def __init__(self, pid_lo: int, pid_code: np.ndarray, lo: int, span: int, rows: np.ndarray) -> None:
        self.pid_lo, self.pid_code, self.lo, self.span, self.rows = pid_lo, pid_code, lo, span, rows

    @classmethod
    def build(cls, r_key: np.ndarray, step: int = 1 << 20) -> LaunchTable | None:
        """The table of ``r_key`` (pid << 32 | corr; negative: no launch), or None when it would hold over
        two slots per row (ids far apart), or the table needs int64 rows."""
        n = len(r_key)
        if n == 0 or n >= 1 << 31:
            return None
        blocks = [slice(i, i + step) for i in range(0, n, step)]

        def valid(b: slice) -> np.ndarray:
            k = r_key[b]
            return k if k.min() >= 0 else k[k >= 0]  # (nearly always every row: no copy)

        pid_lo, pid_hi, lo, hi = 1 << 62, -1, 1 << 62, -1
        for b in blocks:  # block by block: no full-length temporaries at the reader's peak
            v = valid(b)
            if len(v):
                pid_lo, pid_hi = min(pid_lo, int(v.min() >> 32)), max(pid_hi, int(v.max() >> 32))
                corr = v & U32
                lo, hi = min(lo, int(corr.min())), max(hi, int(corr.max()))
        if pid_hi < 0 or pid_hi - pid_lo >= 1 << 22:
            return None
        present = np.zeros(pid_hi - pid_lo + 1, dtype=bool)
        for b in blocks:
            pid = valid(b) >> 32
            pid -= pid_lo
            present[pid] = True
        pids = np.flatnonzero(present)
        span = hi - lo + 1
        if len(pids) * span > 2 * n + (1 << 16):
            return None
        pid_code = np.full(len(present), -1, dtype=np.int32)
        pid_code[pids] = np.arange(len(pids), dtype=np.int32)
        rows = np.full(len(pids) * span, n, dtype=np.int32)  # n: no row yet
        for first in (False, True):
            placed = 0
            for b in blocks:
                k = r_key[b]
                at = None if k.min() >= 0 else np.flatnonzero(k >= 0)
                if at is not None:
                    k = k[at]
                pid = k >> 32
                pid -= pid_lo
                slot = pid_code[pid].astype(np.int64)
                del pid
                slot *= span
                corr = k & U32
                slot += corr
                del corr
                slot -= lo
                row = (np.arange(b.start, b.start + len(k), dtype=np.int32) if at is None
                       else (at + b.start).astype(np.int32))
                if first:
                    np.minimum.at(rows, slot, row)  # a repeated key: its first row, as a sort finds
                else:
                    rows[slot] = row
                placed += len(slot)
            # every key once (as CUPTI numbers them): each row holds its own slot; else again, keeping the first
            if first or np.count_nonzero(rows != n) == placed:
                break
            rows.fill(n)
        rows[rows == n] = -1
        return cls(pid_lo, pid_code, lo, span, rows)

    def lookup(self, k: np.ndarray) -> np.ndarray:
        """The runtime row of each key (-1: none)."""
        pid = (k >> 32) - self.pid_lo  # (a negative key gives a negative pid: pid_lo >= 0)
        corr = k & U32
        corr -= self.lo
        # unsigned: one comparison for each range (a negative value wraps past any bound)
        ok = (pid.view(np.uint64) < len(self.pid_code)) & (corr.view(np.uint64) < self.span)
        if ok.all():  # as nearly always: every kernel's process and id in the table, no boolean indexing
            code = self.pid_code[pid]
            if code.min(initial=0) >= 0:
                corr += code.astype(np.int64) * self.span
                return self.rows[corr]
        code = np.full(len(k), -1, dtype=np.int64)
        code[ok] = self.pid_code[pid[ok]]
        ok &= code >= 0
        out = np.full(len(k), -1, dtype=np.int32)
        out[ok] = self.rows[code[ok] * self.span + corr[ok]]
        return out


def join_launches(k_key: list[np.ndarray], runtime: list | None) -> tuple[np.ndarray, np.ndarray]:
    """The thread and CPU start of each kernel's launch call (-1 when absent): :func:`launch_rows`, then
    :func:`gather_launches`. ``k_key`` holds the keys and is emptied: a pool keeps its task's arguments until
    the task ends, and the keys must go before the launch columns are gathered (8 bytes a kernel off the peak)."""
    rows = launch_rows(k_key.pop(), runtime)
    return gather_launches(rows, runtime)


def launch_rows(k_key: np.ndarray, runtime: list | None) -> np.ndarray:
    """For each kernel, the index of its runtime launch call in ``runtime`` (-1 when absent).
    Releases ``runtime``'s index (the list keeps tid and start for :func:`gather_launches`).

    key = pid << 32 | correlationId on both sides: a lookup in the :class:`LaunchTable`, or a sorted-key
    join in numpy (``runtime`` then comes sorted by key from :func:`_runtime_index`). An index (int32 when
    the table allows) rather than the two int64 results at once: the keys are freed before those are gathered.
    """
    n = len(k_key)
    if runtime is None or not len(runtime[1]):
        return np.full(n, -1, dtype=np.int32)
    index = runtime[0]
    runtime[0] = np.empty(0, dtype=np.int64)  # drop the list's reference: the index is freed on return
    if isinstance(index, LaunchTable):
        rows = np.empty(n, dtype=np.int32)
        for lo in range(0, n, 1 << 20):  # chunked: no full-length temporaries at the reader's peak
            rows[lo : lo + (1 << 20)] = index.lookup(k_key[lo : lo + (1 << 20)])
        return rows
    r_key = index
    last = len(r_key) - 1
    rows = np.empty(n, dtype=np.int32 if last < 1 << 31 else np.int64)
    for lo in range(0, n, 1 << 20):
        k = k_key[lo : lo + (1 << 20)]
        pos = np.minimum(np.searchsorted(r_key, k), last)
        pos[(r_key[pos] != k) | (k < 0)] = -1
        rows[lo : lo + len(k)] = pos
    return rows


def gather_launches(rows: np.ndarray, runtime: list[np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """The thread and CPU start of each kernel's launch call (-1 when absent) at :func:`launch_rows`'s
    ``rows``; each runtime column is released once gathered (``runtime`` is emptied)."""
    if not runtime or not len(runtime[1]):
        return np.full(len(rows), -1, dtype=np.int64), np.full(len(rows), -1, dtype=np.int64)
    out = []
    for i in (1, 2):
        col = runtime[i]
        runtime[i] = np.empty(0, dtype=np.int64)  # (not a view: that would keep the column alive)
        got = np.empty(len(rows), dtype=np.int64)
        for lo in range(0, len(rows), 1 << 20):
            r = rows[lo : lo + (1 << 20)]
            v = col[r]
            v[r < 0] = -1
            got[lo : lo + len(r)] = v
        del col  # the last reference: freed before the next column is gathered
        out.append(got)
    runtime.clear()
    return out[0], out[1]

"""Integer columns of SQLite tables as numpy arrays, and their keys as codes: the bulk half of the nsys
reader (:mod:`kbase.readers.nsys` builds the profile from them).

A large table streams through ADBC/Arrow (column batches, the GIL released, so two tables read at once);
a small one is read by Python's sqlite3, which costs less than loading pyarrow and ADBC.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kbase.readers.sqlite_source import connect_readonly, readonly_uri


class NotIntegers(Exception):
    """A streamed column came back as text or floats: the export holds non-integers where nsys
    writes integers."""


# (the raw integer columns, and what turns them into ``exprs``' values: one batch's columns (int64, NULL
# read as 0) and their NULL masks (None: no NULL) -> the expressions' arrays)
Derive = tuple[list[str], Callable[[list[np.ndarray], list["np.ndarray | None"]], list[np.ndarray]]]


def bulk_int_columns(path: Path, table: str, exprs: list[str], progress=None, raw: Derive | None = None,
                     parts: int = 1, pages: bool = True, assist=None) -> list[np.ndarray]:
    """Integer expressions of a table as int64 arrays (NULL -> 0): a large table streams through ADBC/Arrow,
    a small one (``SMALL_TABLE_ROWS``) is read by sqlite3 (no pyarrow to load).

    ``raw``: a large table's plain columns are streamed instead and each batch is turned into the
    expressions' values in numpy (SQLite's VM evaluating CASE/shift expressions on every row cost
    ~40% more than reading the plain columns: 0.6 against 0.45 s per 1M kernel rows).

    ``pages`` (with ``raw``): the plain columns are first decoded straight from the file's pages
    (:mod:`kbase.readers.sqlite_pages`, ~2x less CPU than SQLite stepping the rows; ``assist``: a
    ``sqlite_pages.Assist`` through which a thread done with its own table helps); SQLite reads the table
    when they are not sure to decode. The nsys reader passes ``pages=False`` under ``KBASE_SQLITE_PAGES=0``.

    ``parts``: a large table is read as that many rowid ranges on as many threads, each on its own
    connection, straight into its slice of the result (SQLite's row decoding is the reader's bottleneck,
    and ADBC releases the GIL while it runs: on 2 cores, 1M kernel rows read beside the runtime table in
    0.31 s instead of 0.39 s, and alone in 0.29 s instead of 0.56 s).

    Measured on 1M kernel rows (docs/performance.md, "Reader"): Python's sqlite3 ``fetchmany`` spent 7 s
    building tuples; ADBC moves column batches into Arrow at ~1.2 s, and releases the GIL so the
    kernel and runtime tables are read on two threads at once. Arrays are preallocated from
    ``max(rowid)`` (an O(log n) lookup) so peak memory is the result plus one batch per thread.
    """
    # Room for every row: max(rowid) + 1 when rowids are dense (nsys numbers them 1..n), else what the file's
    # size allows (a row takes 6 bytes at least: its cell and the cell's pointer), not 8 bytes per rowid.
    ceiling = path.stat().st_size // 6 + 1
    top = _max_rowid(path, table)  # None: a WITHOUT ROWID table (no rowid ranges; SQLite counts its rows)
    cap = min((_count_rows(path, table) if top is None else top) + 1, ceiling)
    if raw is not None and pages:
        from kbase.readers.sqlite_pages import int_columns

        # (the leaf pages decoded in numpy: SQLite reads the table when they are not sure to decode)
        decoded = int_columns(path, table, raw[0], raw[1], len(exprs), cap, progress, assist)
        if decoded is not None:
            return _trimmed(*decoded)
    if cap <= SMALL_TABLE_ROWS:
        return _small_int_columns(path, table, exprs, progress)
    out = [np.empty(cap, dtype=np.int64) for _ in exprs]
    select = f"SELECT {', '.join(raw[0] if raw else exprs)} FROM {table}"
    if progress is not None and parts > 1:
        import threading

        lock, shown = threading.Lock(), progress

        def progress(m: int, total: int) -> None:
            with lock:
                shown(m, total)

    if parts > 1 and top is not None and PARTITION_MIN_ROWS <= cap < ceiling:  # (ranges need the true max(rowid))
        try:
            return _trimmed(out, _scan_parts(path, select, table, out, raw, progress, parts))
        except _RangeFull:  # rowids below 1 (never written by nsys): one scan
            pass
    out, n = _scan(path, select, table, out, 0, None, raw, progress)
    return _trimmed(out, n)


class _RangeFull(Exception):
    """A rowid range held more rows than its slice of the result."""


def _scan_parts(path: Path, select: str, table: str, out: list[np.ndarray], raw: Derive | None, progress,
                parts: int) -> int:
    """``parts`` rowid ranges of ``select`` at once, each written where its rows sit when rowids are dense
    (rowid r at r - 1), then moved together over any gap: the rows read. ``_RangeFull`` when a range holds
    more rows than its slice."""
    from kbase.readers.threads import Pool

    cap = len(out[0])
    cuts = [cap * k // parts for k in range(parts + 1)]
    cuts[-1] = cap - 1  # max(rowid)
    where = [f" WHERE rowid <= {cuts[1]}"] + [f" WHERE rowid > {lo} AND rowid <= {hi}"
                                              for lo, hi in zip(cuts[1:-1], cuts[2:])]
    with Pool(parts - 1) as pool:
        rest = [pool.submit(_scan, path, select + w, table, out, lo, hi - lo, raw, progress)
                for w, lo, hi in zip(where[1:], cuts[1:-1], cuts[2:])]
        # (an error in the first range leaves the block only once the other ranges have finished)
        counts = [_scan(path, select + where[0], table, out, 0, cuts[1], raw, progress)[1]]
        counts += [f.result()[1] for f in rest]
    n = 0
    for lo, c in zip(cuts, counts):  # rows deleted from the table leave gaps between the ranges
        if lo != n:
            for o in out:
                o[n : n + c] = o[lo : lo + c]  # (numpy copies overlapping slices correctly)
        n += c
    return n


def _scan(path: Path, select: str, table: str, out: list[np.ndarray], at: int, room: int | None,
          raw: Derive | None, progress) -> tuple[list[np.ndarray], int]:
    """Stream ``select`` into ``out`` from row ``at``: (``out``, rows written). ``room``: the rows this scan
    may write (None: any, ``out`` grows; more: ``_RangeFull``)."""
    import adbc_driver_manager
    import adbc_driver_sqlite
    import pyarrow as pa

    # ADBC's own API, not its DB-API module (that one imports pyarrow.dataset: ~20 ms of every kbase top)
    db = adbc_driver_sqlite.connect(readonly_uri(path))
    opened: list = []  # the connection, statement and reader: closed in reverse before the database
    try:
        conn = adbc_driver_manager.AdbcConnection(db)
        opened.append(conn)
        stmt = adbc_driver_manager.AdbcStatement(conn)
        opened.append(stmt)
        stmt.set_options(**{"adbc.sqlite.query.batch_rows": str(BATCH_ROWS)})
        stmt.set_sql_query(select)
        stream, _ = stmt.execute_query()
        reader = pa.RecordBatchReader.from_stream(stream)
        opened.append(reader)
        n = at
        for batch in reader:
            m = batch.num_rows
            if room is not None and n + m > at + room:
                raise _RangeFull
            if n + m > len(out[0]):  # rowids were not dense: grow
                out = [np.concatenate([o, np.empty(max(m, len(o) // 2), dtype=np.int64)]) for o in out]
            values, nulls = [], []
            for i in range(batch.num_columns):
                col = batch.column(i)
                if not pa.types.is_integer(col.type):
                    raise NotIntegers(table)
                nulls.append(_null_mask(col) if raw and col.null_count else None)
                if col.null_count:  # expressions: only in rows the validity column already rejects
                    col = col.fill_null(0)
                values.append(_int64_view(col, pa))
            for o, v in zip(out, raw[1](values, nulls) if raw else values):
                o[n : n + m] = v
            n += m
            if progress is not None:
                progress(m, len(out[0]))  # rows read now, of about this many in all
        return out, n - at
    except OSError as exc:
        if "Type mismatch" in str(exc):  # ADBC: a column changed type part-way through the table
            raise NotIntegers(table) from None
        raise
    finally:
        for x in reversed(opened):  # ADBC refuses to close a parent with children open
            x.close()
        db.close()


def _trimmed(out: list[np.ndarray], n: int) -> list[np.ndarray]:
    return [o[:n].copy() if n < len(o) // 2 else o[:n] for o in out]


# Rows per Arrow batch: ADBC's default (1,024) made the per-batch Python work ~0.35 s of every 1M rows.
BATCH_ROWS = 1 << 16
# Tables this large are read in rowid ranges on several threads (``parts``); below it, one scan is as quick.
PARTITION_MIN_ROWS = 1 << 17

# Below this many rows sqlite3 reads a table faster than loading pyarrow and ADBC (~35 ms) would take.
SMALL_TABLE_ROWS = 1 << 14


def _max_rowid(path: Path, table: str) -> int | None:
    """max(rowid): a B-tree descent, not a scan (an upper bound on the rows: exact unless rows were deleted);
    None for a ``WITHOUT ROWID`` table, which has none."""
    conn = connect_readonly(path)
    try:
        if without_rowid(conn, table):
            return None
        return int(conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0)  # table: a literal of ours
    finally:
        conn.close()


def _count_rows(path: Path, table: str) -> int:
    conn = connect_readonly(path)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])  # table: a literal of ours
    finally:
        conn.close()


_WITHOUT_ROWID = re.compile(r"\)\s*(?:STRICT\s*,\s*)?WITHOUT\s+ROWID\b[\s,A-Za-z]*;?\s*$", re.IGNORECASE)


def without_rowid(conn, table: str) -> bool:
    """Whether ``table`` is a ``WITHOUT ROWID`` table (its key is its primary key: no rowid to read or order
    by): SQLite's own ``PRAGMA table_list`` (3.37+), else its CREATE statement's table options."""
    import sqlite3

    try:
        listed = conn.execute("SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?",
                              (table,)).fetchone()
        if listed is not None:
            return bool(listed[0])
    except sqlite3.Error:
        pass  # an older SQLite
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    return bool(row and isinstance(row[0], str) and _WITHOUT_ROWID.search(row[0]))


def _small_int_columns(path: Path, table: str, exprs: list[str], progress=None) -> list[np.ndarray]:
    """:func:`bulk_int_columns` of a small table through sqlite3 (NULL -> 0; anything but an integer:
    ``NotIntegers``)."""
    conn = connect_readonly(path)
    try:
        rows = conn.execute(f"SELECT {', '.join(exprs)} FROM {table}").fetchall()
    finally:
        conn.close()
    out = []
    for i in range(len(exprs)):
        col = [r[i] for r in rows]
        if not all(type(v) is int or v is None for v in col):
            raise NotIntegers(table)
        out.append(np.fromiter((0 if v is None else v for v in col), dtype=np.int64, count=len(col)))
    if progress is not None:
        progress(len(rows), len(rows))
    return out


def _null_mask(col) -> np.ndarray:
    """True where an Arrow array is NULL, from its validity bitmap (LSB first)."""
    bits = np.unpackbits(np.frombuffer(col.buffers()[0], dtype=np.uint8), bitorder="little")
    return bits[col.offset : col.offset + len(col)] == 0


def _int64_view(col, pa) -> np.ndarray:
    """An Arrow integer array without nulls as int64 numpy, read from its data buffer (``to_numpy``
    would import pandas: ~0.2 s of every ``kbase top``)."""
    if col.type != pa.int64():
        col = col.cast(pa.int64())
    return np.frombuffer(col.buffers()[1], dtype=np.int64, count=len(col), offset=col.offset * 8)


def factorize_sorted(keys: np.ndarray, shift: int = 0, dense: int = 1 << 22) -> tuple[np.ndarray, np.ndarray]:
    """(int32 codes, sorted distinct values) of ``keys >> shift`` (int64). A lookup table when the values
    span fewer than ``dense`` (GPU keys; StringIds ids of names): no sort at all; else a hash factorize
    (pandas), renumbered in sorted order — ``np.unique`` sorts all n keys (2.9 s at 10M, pandas 0.09 s).
    Chunked: no full-length int64 temporary at the reader's peak."""
    step = 1 << 20
    parts = range(0, len(keys), step)
    if not len(keys):
        return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)

    def shifted(i: int) -> np.ndarray:  # (no copy without a shift)
        return keys[i : i + step] >> shift if shift else keys[i : i + step]

    lo, hi = 1 << 63, -(1 << 63)
    for i in parts:
        v = shifted(i)
        lo, hi = min(lo, int(v.min())), max(hi, int(v.max()))
    codes = np.empty(len(keys), dtype=np.int32)
    if hi - lo < dense:
        present = np.zeros(hi - lo + 1, dtype=bool)
        for i in parts:
            present[shifted(i) - lo] = True
        uniq = np.flatnonzero(present)
        table = np.zeros(len(present), dtype=np.int32)
        table[uniq] = np.arange(len(uniq), dtype=np.int32)
        for i in parts:
            codes[i : i + step] = table[shifted(i) - lo]
        return codes, uniq.astype(np.int64) + lo
    import pandas as pd

    first, found = pd.factorize(keys >> shift if shift else keys)
    order = np.argsort(found)
    rank = np.empty(len(order), dtype=np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    codes[:] = rank[first]
    return codes, np.asarray(found)[order].astype(np.int64)

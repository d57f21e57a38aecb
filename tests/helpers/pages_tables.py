"""Tables made for the page decoder's tests, and the decoder's answer beside SQLite's."""

import sqlite3

import numpy as np

from kbase.readers.sqlite_pages import int_columns

EDGES = [0, 1, -1, 127, 128, -128, 255, 256, 2**15, -(2**15) - 1, 2**23, -(2**23), 2**31, -(2**31) - 1,
         2**47, -(2**47), 2**47 + 1, 2**55, 2**62, -(2**62), 2**63 - 1, -(2**63)]


def _identity(values, nulls):
    """The plain values, then each column's NULL mask as 0/1."""
    masks = [np.zeros(len(values[0]), dtype=np.int64) if m is None else m.astype(np.int64) for m in nulls]
    return [*values, *masks]


def _decoded(path, table, columns, capacity=None, assist=None):
    if capacity is None:  # as the reader passes: max(rowid) + 1, within what the file's size allows
        con = sqlite3.connect(path)
        try:
            capacity = (con.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0] or 0) + 1
        except sqlite3.DatabaseError:
            capacity = 10
        finally:
            con.close()
        capacity = min(capacity, path.stat().st_size // 6 + 1)
    decoded = int_columns(path, table, columns, _identity, 2 * len(columns), capacity, assist=assist)
    if decoded is None:
        return None
    got = [o[: decoded[1]] for o in decoded[0]]
    return got[: len(columns)], got[len(columns) :]


def _sqlite(path, table, columns, order="rowid"):
    con = sqlite3.connect(path)
    try:
        rows = con.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}").fetchall()
    finally:
        con.close()
    values = [np.array([r[i] or 0 for r in rows], dtype=np.int64) for i in range(len(columns))]
    nulls = [np.array([r[i] is None for r in rows], dtype=np.int64) for i in range(len(columns))]
    return values, nulls


def _assert_equal(got, want):
    assert got is not None, "the pages were not decoded"
    for g, w in zip(got[0] + got[1], want[0] + want[1]):
        assert g.dtype == np.int64 and np.array_equal(g, w)


def _make(path, rows, page_size=4096, columns=12, seed=0, tail_text=0, rowids=None):
    """A table t(c0..c{columns-1}[, tail TEXT]) of integers of every stored width, NULLs and the constants 0
    and 1; ``tail_text``: that many characters of text after them (long ones overflow the page)."""
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA page_size = {page_size}")
    cols = [f"c{i} INTEGER" for i in range(columns)] + (["tail TEXT"] if tail_text else [])
    con.execute(f"CREATE TABLE t ({', '.join(cols)})")
    data = []
    for _ in range(rows):
        row = [EDGES[int(rng.integers(0, len(EDGES)))] if rng.random() < 0.5 else int(rng.integers(-10**12, 10**12))
               for _ in range(columns)]
        for i in range(columns):
            if rng.random() < 0.05:
                row[i] = None
        if tail_text:
            row.append("x" * int(rng.integers(0, tail_text)))
        data.append(row)
    marks = ", ".join("?" * (columns + bool(tail_text)))
    if rowids is None:
        con.executemany(f"INSERT INTO t VALUES ({marks})", data)
    else:
        con.executemany(f"INSERT INTO t (rowid, {', '.join(c.split()[0] for c in cols)}) VALUES (?, {marks})",
                        [[int(i), *row] for i, row in zip(rowids, data)])
    con.commit()
    con.close()
    return [f"c{i}" for i in range(columns)]


def _alter(path, *sql):
    con = sqlite3.connect(path)
    for s in sql:
        con.execute(s)
    con.commit()
    con.close()

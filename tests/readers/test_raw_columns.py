"""The kernel and runtime tables' plain columns turned into the reader's arrays in numpy (``kernel_raw``,
``runtime_raw``) equal SQLite evaluating the fast expressions (``kernel_exprs``, ``runtime_exprs``),
value for value, on hostile integers."""

import sqlite3

import numpy as np
import pytest

from kbase.readers import sqlite_columns
from kbase.readers.nsys_sql import (
    KERNEL_TABLE,
    MAX_KERNEL_NS,
    RUNTIME_TABLE,
    U32,
    kernel_exprs,
    kernel_raw,
    runtime_exprs,
    runtime_raw,
)
from kbase.readers.sqlite_columns import NotIntegers, bulk_int_columns

ODD = [None, 0, 1, -1, 255, 256, U32, U32 + 1, MAX_KERNEL_NS, MAX_KERNEL_NS + 1, 2**62, -(2**62), 2**63 - 1, -(2**63)]


def _table(path, columns: list[str], rows: int, seed: int, table: str = KERNEL_TABLE) -> None:
    rng = np.random.default_rng(seed)
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE {table} ({', '.join(columns)})")
    data = []
    for _ in range(rows):
        start = int(rng.integers(0, 10**9))
        row = {"start": start, "end": start + int(rng.integers(0, 10**6)), "deviceId": int(rng.integers(0, 8)),
               "demangledName": int(rng.integers(0, 50)), "globalPid": (int(rng.integers(1, 4)) << 24) | 7,
               "correlationId": int(rng.integers(0, 10**6)), "shortName": int(rng.integers(0, 50)),
               "globalTid": (int(rng.integers(1, 4)) << 24) | int(rng.integers(0, 9))}
        for c in columns:  # a quarter of the rows get an odd value in some column
            if rng.random() < 0.05:
                row[c] = ODD[int(rng.integers(0, len(ODD)))]
        data.append([row[c] for c in columns])
    data[0] = [None] * len(columns)  # a NULL row first: Arrow's type comes from more than one row
    con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(columns))})", data)
    con.commit()
    con.close()


FULL = ["start", "end", "deviceId", "demangledName", "globalPid", "correlationId", "shortName"]


@pytest.mark.slow
@pytest.mark.parametrize("columns", [FULL, FULL[:4], FULL[:4] + ["correlationId"], FULL[:5]])
@pytest.mark.parametrize("stop_ns", [None, 5 * 10**8])
@pytest.mark.parametrize("pages", [False, True])
def test_numpy_twin_equals_sqlite_expressions(tmp_path, monkeypatch, columns, stop_ns, pages):
    monkeypatch.setattr(sqlite_columns, "SMALL_TABLE_ROWS", 0)  # both through ADBC, in several batches
    path = tmp_path / "k.sqlite"
    _table(path, columns, 20_000, seed=len(columns) + (stop_ns or 0) % 7)
    exprs = kernel_exprs(set(columns), stop_ns)
    want = bulk_int_columns(path, KERNEL_TABLE, exprs)
    got = bulk_int_columns(path, KERNEL_TABLE, exprs, raw=kernel_raw(set(columns), stop_ns), pages=pages)
    assert (want[0] < 0).sum() > 1000  # plenty of rows marked invalid
    for i, (w, g) in enumerate(zip(want, got)):
        assert w.dtype == g.dtype and np.array_equal(w, g), (i, exprs[i])


def test_text_in_a_plain_column_is_not_integers(tmp_path, monkeypatch):
    """A text value where nsys writes an integer: the raw read gives up as the expression read does (the
    reader then reads again with the strict expressions)."""
    monkeypatch.setattr(sqlite_columns, "SMALL_TABLE_ROWS", 0)
    path = tmp_path / "k.sqlite"
    _table(path, FULL, 3_000, seed=1)
    con = sqlite3.connect(path)
    con.execute(f"UPDATE {KERNEL_TABLE} SET shortName = 'x' WHERE rowid = 2500")
    con.commit()
    con.close()
    for pages in (False, True):
        with pytest.raises(NotIntegers):
            bulk_int_columns(path, KERNEL_TABLE, kernel_exprs(set(FULL), None), raw=kernel_raw(set(FULL), None),
                             pages=pages)


@pytest.mark.parametrize("columns", [["correlationId", "start", "globalTid"], ["correlationId", "start"]])
@pytest.mark.parametrize("pages", [False, True])
def test_runtime_numpy_twin_equals_sqlite_expressions(tmp_path, monkeypatch, columns, pages):
    monkeypatch.setattr(sqlite_columns, "SMALL_TABLE_ROWS", 0)
    path = tmp_path / "r.sqlite"
    _table(path, columns, 20_000, seed=len(columns), table=RUNTIME_TABLE)
    exprs = runtime_exprs(set(columns))
    want = bulk_int_columns(path, RUNTIME_TABLE, exprs)
    got = bulk_int_columns(path, RUNTIME_TABLE, exprs, raw=runtime_raw(set(columns)), pages=pages)
    assert (want[0] == -2).sum() > 100
    for i, (w, g) in enumerate(zip(want, got)):
        assert w.dtype == g.dtype and np.array_equal(w, g), (i, exprs[i])

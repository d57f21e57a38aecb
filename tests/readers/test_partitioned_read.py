"""A large table read as several rowid ranges on threads (``bulk_int_columns(parts=...)``) equals one scan of
it, row for row and in rowid order: with gaps left by deleted rows, with rowids below 1 (one scan then), with
text in a later range, and through the whole nsys reader."""

import sqlite3

import numpy as np
import pytest

from kbase.readers import nsys, sqlite_columns
from kbase.readers.nsys_sql import KERNEL_TABLE, kernel_exprs, kernel_raw
from kbase.readers.sqlite_columns import NotIntegers, bulk_int_columns

COLUMNS = ["start", "end", "deviceId", "demangledName", "globalPid", "correlationId", "shortName"]


@pytest.fixture(autouse=True)
def _small_batches(monkeypatch):
    # every table here through ADBC, split into ranges, each range in several batches
    monkeypatch.setattr(sqlite_columns, "SMALL_TABLE_ROWS", 0)
    monkeypatch.setattr(sqlite_columns, "PARTITION_MIN_ROWS", 0)
    monkeypatch.setattr(sqlite_columns, "BATCH_ROWS", 97)


def _table(path, rows: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    start = rng.integers(0, 10**9, rows)
    data = np.stack([start, start + rng.integers(0, 10**6, rows), rng.integers(0, 8, rows),
                     rng.integers(0, 50, rows), (rng.integers(1, 4, rows) << 24) | 7, np.arange(rows),
                     rng.integers(0, 50, rows)], axis=1).tolist()
    for row in data[::37]:
        row[int(rng.integers(0, len(COLUMNS)))] = None  # NULLs, as damaged exports have
    con = sqlite3.connect(path)
    con.execute(f"CREATE TABLE {KERNEL_TABLE} ({', '.join(COLUMNS)})")
    con.executemany(f"INSERT INTO {KERNEL_TABLE} VALUES ({', '.join('?' * len(COLUMNS))})", data)
    con.commit()
    con.close()


def _read(path, parts: int, pages: bool = False) -> list[np.ndarray]:
    """Through ADBC (``pages``: decoded from the file's pages where they can be, on ``parts`` threads)."""
    return bulk_int_columns(path, KERNEL_TABLE, kernel_exprs(set(COLUMNS), None),
                            raw=kernel_raw(set(COLUMNS), None), parts=parts, pages=pages)


def _assert_same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and np.array_equal(g, w)


@pytest.mark.parametrize("parts", [2, 3, 5])
def test_ranges_equal_one_scan(tmp_path, parts):
    path = tmp_path / "k.sqlite"
    _table(path, 2_000, seed=parts)
    want = _read(path, 1)
    assert len(want[0]) == 2_000 and int(np.count_nonzero(want[0] < 0)) > 10  # NULL rows marked invalid
    _assert_same(_read(path, parts), want)
    _assert_same(_read(path, parts, pages=True), want)


def test_gaps_from_deleted_rows_are_closed(tmp_path):
    """Deleted rows leave ranges shorter than their slice: the rows after them move up, in order."""
    path = tmp_path / "k.sqlite"
    _table(path, 3_000, seed=7)
    con = sqlite3.connect(path)
    con.execute(f"DELETE FROM {KERNEL_TABLE} WHERE rowid BETWEEN 900 AND 1600 OR rowid % 11 = 0 "
                "OR rowid BETWEEN 2990 AND 2999")  # the whole middle range, and more
    con.commit()
    con.close()
    want = _read(path, 1)
    assert len(want[0]) < 2_300
    for parts in (2, 3, 4):
        _assert_same(_read(path, parts), want)
        _assert_same(_read(path, parts, pages=True), want)
    assert np.array_equal(want[4] >> 32, _plain(path, "demangledName"))  # rowid order, as SQLite scans


def test_rowids_below_one_fall_back_to_one_scan(tmp_path):
    """A range holding more rows than its slice (rowids 0 and below, which nsys never writes): one scan."""
    path = tmp_path / "k.sqlite"
    _table(path, 1_000, seed=3)
    con = sqlite3.connect(path)
    con.executemany(f"INSERT INTO {KERNEL_TABLE} (rowid, start, end, deviceId, demangledName) VALUES (?, ?, ?, ?, ?)",
                    [(-r, 10 + r, 20 + r, 0, 3) for r in range(0, 40)])
    con.commit()
    con.close()
    want = _read(path, 1)
    assert len(want[0]) == 1_040
    _assert_same(_read(path, 2), want)
    _assert_same(_read(path, 2, pages=True), want)
    assert np.array_equal(want[4] >> 32, _plain(path, "demangledName"))


def test_text_in_a_later_range_is_not_integers(tmp_path):
    path = tmp_path / "k.sqlite"
    _table(path, 2_000, seed=5)
    con = sqlite3.connect(path)
    con.execute(f"UPDATE {KERNEL_TABLE} SET end = 'x' WHERE rowid = 1900")
    con.commit()
    con.close()
    with pytest.raises(NotIntegers):
        _read(path, 2)
    with pytest.raises(NotIntegers):  # the pages give up, and ADBC says why
        _read(path, 2, pages=True)


def test_progress_counts_every_row_once(tmp_path):
    path = tmp_path / "k.sqlite"
    _table(path, 2_000, seed=9)
    seen: list[tuple[int, int]] = []
    bulk_int_columns(path, KERNEL_TABLE, ["start", "end"], progress=lambda m, total: seen.append((m, total)), parts=3)
    assert sum(m for m, _ in seen) == 2_000 and {t for _, t in seen} == {2_001}


def test_reader_with_ranges_equals_one_scan(tmp_path, monkeypatch):
    from helpers.tiny_export import assert_same_profile, make_tiny_export

    export = make_tiny_export(tmp_path / "tiny.sqlite", steps=6)
    plain = sqlite_columns.bulk_int_columns  # through ADBC: the pages would be decoded on one thread
    monkeypatch.setattr(nsys, "bulk_int_columns", lambda *a, **k: plain(*a, **{**k, "pages": False}))
    monkeypatch.setenv("KBASE_READ_THREADS", "2")  # (on one thread, busy cores, the ranges are not read apart)
    monkeypatch.setattr(nsys, "KERNEL_PARTS", 1)
    one = nsys.read_nsys(export)
    monkeypatch.setattr(nsys, "KERNEL_PARTS", 3)
    three = nsys.read_nsys(export)
    assert_same_profile(one, three)


def _plain(path, column: str) -> np.ndarray:
    con = sqlite3.connect(path)
    try:
        return np.array([v or 0 for (v,) in con.execute(f"SELECT {column} FROM {KERNEL_TABLE}")], dtype=np.int64)
    finally:
        con.close()

"""Integer columns decoded from a SQLite file's pages (``sqlite_pages.int_columns``) equal SQLite's own
answer, value for value, NULL for NULL and in rowid order; and where the pages are not sure to decode the
reader answers None (SQLite then reads the table) instead of guessing. (Threads and room for rows:
``test_sqlite_pages_assist.py``.)"""

import shutil
import sqlite3

import numpy as np
import pytest

from kbase.readers import sqlite_pages
from kbase.readers.sqlite_pages import btree, columns

from helpers.pages_tables import _alter, _assert_equal, _decoded, _make, _sqlite


@pytest.mark.parametrize("page_size", [512, 4096, 65536])
def test_every_width_null_and_constant_equals_sqlite(tmp_path, page_size):
    path = tmp_path / "t.sqlite"
    names = _make(path, 6_000, page_size=page_size, seed=page_size)
    want = _sqlite(path, "t", names)
    assert sum(int(n.sum()) for n in want[1]) > 1000  # NULLs are there
    _assert_equal(_decoded(path, "t", names), want)
    picked = [names[9], names[0], names[4]]  # any subset, in any order
    _assert_equal(_decoded(path, "t", picked), _sqlite(path, "t", picked))


@pytest.mark.slow
def test_deep_tree_deleted_rows_and_rowids_in_any_order(tmp_path, monkeypatch):
    """Three interior levels (512-byte pages), rows inserted in shuffled rowid order, large rowids (varints
    past the cell's first 8 bytes), and deleted rows: the B-tree's order is rowid order."""
    path = tmp_path / "t.sqlite"
    rng = np.random.default_rng(5)
    rowids = rng.permutation(40_000)[:30_000] * 7_919 + 2**50  # 8-byte varints after 2-byte lengths
    names = _make(path, 30_000, page_size=512, columns=24, seed=5, rowids=rowids)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM t WHERE rowid % 5 = 0")
    con.commit()
    con.close()
    monkeypatch.setattr(columns, "CHUNK_PAGES", 37)  # many chunks
    _assert_equal(_decoded(path, "t", names), _sqlite(path, "t", names))


def test_overflowing_records_and_long_headers(tmp_path):
    """Long text after the needed columns (the record overflows to other pages; its start stays on the leaf),
    and 150 columns (a header whose length takes a two-byte varint)."""
    path = tmp_path / "t.sqlite"
    names = _make(path, 3_000, page_size=1024, columns=6, seed=2, tail_text=5_000)
    _assert_equal(_decoded(path, "t", names), _sqlite(path, "t", names))
    wide = tmp_path / "w.sqlite"
    names = _make(wide, 500, columns=150, seed=3)
    picked = [names[0], names[130], names[149]]
    _assert_equal(_decoded(wide, "t", picked), _sqlite(wide, "t", picked))


def test_empty_table(tmp_path):
    path = tmp_path / "t.sqlite"
    names = _make(path, 0)
    got = _decoded(path, "t", names)
    assert got is not None and all(len(v) == 0 for v in got[0])


@pytest.mark.parametrize("change", [
    "UPDATE t SET c3 = 'text' WHERE rowid = 777",  # text where an integer is read
    "UPDATE t SET c3 = 2.5 WHERE rowid = 3",  # a float
    "UPDATE t SET c3 = x'00ff' WHERE rowid = 1999",  # a blob
])
def test_a_value_that_is_not_an_integer_is_not_decoded(tmp_path, change):
    path = tmp_path / "t.sqlite"
    names = _make(path, 2_000, seed=1)
    _alter(path, change)
    assert _decoded(path, "t", names) is None
    assert _decoded(path, "t", [names[0], names[2]]) is not None  # the other columns still decode


def test_a_needed_value_on_an_overflow_page_is_not_decoded(tmp_path):
    path = tmp_path / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (a INTEGER, big BLOB, b INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, b"\x01" * (9_000 if i == 40 else 10), -i) for i in range(99)])
    con.commit()
    con.close()
    assert _decoded(path, "t", ["a", "b"]) is None
    _assert_equal(_decoded(path, "t", ["a"]), _sqlite(path, "t", ["a"]))


@pytest.mark.parametrize("schema, insert, column", [
    # the rowid itself: not stored in the record
    ("CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER)", "INSERT INTO t (a) VALUES (?)", "id"),
    ("CREATE TABLE t (a INTEGER PRIMARY KEY, b INTEGER) WITHOUT ROWID", "INSERT INTO t (a, b) VALUES (?, -?)", "b"),
    # not stored where declared: b is the record's second value
    ("CREATE TABLE t (a INTEGER, g INTEGER AS (a * 2) VIRTUAL, b INTEGER, c INTEGER)",
     "INSERT INTO t (a, b, c) VALUES (?, -?, 3 * ?)", "b"),
])
def test_tables_laid_out_otherwise_are_not_decoded(tmp_path, schema, insert, column):
    path = tmp_path / "t.sqlite"
    con = sqlite3.connect(path)
    con.execute(schema)
    con.executemany(insert, [(i,) * insert.count("?") for i in range(1, 500)])
    con.commit()
    con.close()
    assert _decoded(path, "t", [column]) is None


def test_rows_older_than_an_added_column_are_not_decoded(tmp_path):
    """ALTER TABLE ADD COLUMN leaves the old records shorter: their value is the column's default, which
    SQLite supplies."""
    path = tmp_path / "t.sqlite"
    names = _make(path, 300, columns=3)
    _alter(path, "ALTER TABLE t ADD COLUMN late INTEGER DEFAULT 7", "INSERT INTO t (c0, late) VALUES (1, 2)")
    assert _decoded(path, "t", ["late"]) is None
    _assert_equal(_decoded(path, "t", names), _sqlite(path, "t", names))
    # 40000 is stored in 3 bytes, the first of them 0: read as a serial type, a NULL that fits the record
    one = tmp_path / "one.sqlite"
    _alter(one, "CREATE TABLE t (c0 INTEGER)", "INSERT INTO t VALUES (40000)", "INSERT INTO t VALUES (40000)",
           "ALTER TABLE t ADD COLUMN late INTEGER DEFAULT 7")
    assert _decoded(one, "t", ["late"]) is None


def _root_and_leaves(path, size):
    con = sqlite3.connect(path)
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name = 't'").fetchone()[0]
    con.close()
    with open(path, "rb", buffering=0) as fh:
        leaves = btree.Pages(fh).leaves(root).tolist()
    data = bytearray(path.read_bytes())
    assert all(data[(p - 1) * size] == 13 for p in leaves)
    return data, (root - 1) * size, [(p - 1) * size for p in leaves]


@pytest.mark.parametrize("where", ["leaf type", "cell pointer", "child page", "leaf twice", "truncated"])
def test_damaged_pages_are_not_decoded(tmp_path, where):
    """A damaged file: SQLite reads it and says what it says; the pages never yield made-up rows."""
    path = tmp_path / "t.sqlite"
    size = 1024
    names = _make(path, 2_000, page_size=size, columns=4, seed=4)
    data, root, leaves = _root_and_leaves(path, size)
    assert data[root] == 5 and len(leaves) > 3  # an interior root over the leaves
    leaf = leaves[1]  # (the first leaf's type tells the walk that the level is the leaves)
    if where == "leaf type":
        data[leaf] = 2
    elif where == "cell pointer":
        data[leaf + 8 : leaf + 10] = (size - 1).to_bytes(2, "big")
    elif where == "child page":
        data[root + 8 : root + 12] = (10**6).to_bytes(4, "big")
    elif where == "leaf twice":
        data[root + 8 : root + 12] = (leaves[0] // size + 1).to_bytes(4, "big")
    else:
        data = data[: len(data) - 3 * size]
    damaged = tmp_path / "d.sqlite"
    damaged.write_bytes(bytes(data))
    before = damaged.read_bytes()
    assert _decoded(damaged, "t", names) is None
    # room for any number of rows (max(rowid) of a damaged tree can be anything): the pages' own checks refuse
    assert _decoded(damaged, "t", names, capacity=len(before) // 6 + 1) is None
    assert damaged.read_bytes() == before


@pytest.mark.parametrize("pointer", [0, 3, 8, 9, 1020, 1023])
def test_a_cell_pointer_outside_the_cells_is_not_decoded(tmp_path, pointer):
    path = tmp_path / "t.sqlite"
    names = _make(path, 20, page_size=1024, columns=4, seed=6)
    data, root, leaves = _root_and_leaves(path, 1024)
    assert leaves == [root]  # one leaf: the root
    data[root + 8 + 2 * 7 : root + 10 + 2 * 7] = pointer.to_bytes(2, "big")  # the eighth cell's
    path.write_bytes(bytes(data))
    assert _decoded(path, "t", names) is None


def test_the_nsys_reader_decodes_pages_as_sqlite_reads_rows(tmp_path, monkeypatch):
    """The whole reader, with and without the pages, on a tiny export: the same profile."""
    from kbase.readers import nsys, sqlite_columns

    from helpers.tiny_export import assert_same_profile, make_tiny_export

    export = make_tiny_export(tmp_path / "tiny.sqlite", steps=6)
    calls = []
    monkeypatch.setattr(sqlite_pages, "int_columns", _counting(sqlite_pages.int_columns, calls))
    with_pages = nsys.read_nsys(export)
    assert len(calls) == 2 and all(r is not None for r in calls)  # both tables decoded from their pages
    plain = sqlite_columns.bulk_int_columns
    monkeypatch.setattr(nsys, "bulk_int_columns", lambda *a, **k: plain(*a, **{**k, "pages": False}))
    assert_same_profile(with_pages, nsys.read_nsys(export))


def _counting(f, calls):
    def wrapper(*a, **k):
        calls.append(f(*a, **k))
        return calls[-1]
    return wrapper


def test_a_copy_reads_the_same(tmp_path):
    """The decoded file is only read: a byte-for-byte copy before and after."""
    path = tmp_path / "t.sqlite"
    names = _make(path, 1_000, seed=8)
    copy = tmp_path / "copy.sqlite"
    shutil.copyfile(path, copy)
    _assert_equal(_decoded(path, "t", names), _sqlite(path, "t", names))
    assert path.read_bytes() == copy.read_bytes()


@pytest.mark.slow
def test_random_damage_decodes_as_sqlite_reads_or_not_at_all(tmp_path):
    """Bytes of the table's pages overwritten at random, 600 times: the pages decode to exactly what SQLite
    reads, or not at all (None); never an exception, never rows SQLite would refuse as malformed."""
    path = tmp_path / "t.sqlite"
    names = _make(path, 3_000, page_size=1024, columns=5, seed=11)
    original = path.read_bytes()
    rng = np.random.default_rng(0)
    seen = {"none": 0, "equal": 0}
    for _ in range(600):
        data = bytearray(original)
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(1024, len(data)))] = int(rng.integers(0, 256))
        damaged = tmp_path / "d.sqlite"
        damaged.write_bytes(bytes(data))
        got = _decoded(damaged, "t", names)
        if got is None:
            seen["none"] += 1
            continue
        try:
            want = _sqlite(damaged, "t", names)
        except sqlite3.DatabaseError as exc:
            raise AssertionError(f"decoded what SQLite calls {exc}") from None
        _assert_equal(got, want)
        seen["equal"] += 1
    assert seen["none"] > 100 and seen["equal"] > 100  # both kinds of damage were met

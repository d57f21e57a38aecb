"""The page decoder's threads and room (``sqlite_pages``): a helper thread takes chunks from the table's far
end and the rows still land in rowid order; any failure leaves no hole; arrays are sized from the file, not
from max(rowid) alone."""

import sqlite3
import time

import pytest

from kbase.readers import sqlite_pages
from kbase.readers.sqlite_pages import columns

from helpers.pages_tables import _alter, _assert_equal, _decoded, _make, _sqlite


@pytest.mark.slow
@pytest.mark.parametrize("deleted", ["", "rowid % 7 = 0 OR rowid BETWEEN 5000 AND 9000"])
def test_a_helper_decodes_from_the_far_end(tmp_path, monkeypatch, deleted):
    """A second thread offering help (``Assist.offer``) takes chunks from the end while the reading thread
    takes them from the front: the rows land in rowid order, deleted rows' gap closed where the ends meet."""
    import threading

    path = tmp_path / "t.sqlite"
    names = _make(path, 20_000, page_size=1024, columns=5, seed=12)
    if deleted:
        _alter(path, f"DELETE FROM t WHERE {deleted}")
    monkeypatch.setattr(columns, "CHUNK_PAGES", 3)
    decoders = []
    real = columns.decode_leaves

    def slow_decode(*a):  # records which thread decoded each chunk, and leaves the helper time to join
        decoders.append(threading.current_thread().name)
        time.sleep(0.002)
        return real(*a)

    monkeypatch.setattr(columns, "decode_leaves", slow_decode)
    assist = sqlite_pages.Assist()
    done = threading.Event()

    def helper():
        while not done.is_set():
            assist.offer()
            time.sleep(0.001)

    # two threads offer: one helps at a time (a second one's chunks would land out of order)
    helpers = [threading.Thread(target=helper, name="helper") for _ in range(2)]
    for h in helpers:
        h.start()
    try:
        got = _decoded(path, "t", names, assist=assist)
    finally:
        done.set()
        for h in helpers:
            h.join()
    _assert_equal(got, _sqlite(path, "t", names))
    assert decoders.count("helper") > 5 and len(decoders) - decoders.count("helper") > 5


@pytest.mark.parametrize("pages", [True, False])
def test_an_export_with_a_huge_rowid_reads(tmp_path, pages):
    """A kernel row at rowid 2^50 (valid SQLite; nsys numbers rows 1..n): arrays are sized from the file, not
    from max(rowid) (which asked for 8 PiB), through the pages and through SQLite."""
    from kbase.readers import nsys, sqlite_columns

    from helpers.tiny_export import make_tiny_export

    export = make_tiny_export(tmp_path / "tiny.sqlite", steps=6)
    before = nsys.read_nsys(export)
    con = sqlite3.connect(export)
    cols = [r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
    last = con.execute(f"SELECT {', '.join(cols)} FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid DESC LIMIT 1").fetchone()
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = (SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    con.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (rowid, {', '.join(cols)}) VALUES ({2**50}, "
                f"{', '.join('?' * len(cols))})", last)
    con.commit()
    con.close()
    plain = sqlite_columns.bulk_int_columns
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sqlite_columns, "SMALL_TABLE_ROWS", 0)  # through ADBC, not sqlite3, when not pages
        mp.setattr(nsys, "bulk_int_columns", lambda *a, **k: plain(*a, **{**k, "pages": pages}))
        after = nsys.read_nsys(export)
    from helpers.tiny_export import assert_same_profile

    assert_same_profile(before, after)


@pytest.mark.slow
def test_a_helper_that_fails_leaves_no_hole(tmp_path, monkeypatch):
    """Any error in the helper's chunk (not only "not sure"): the table is not decoded (no rows returned
    with that chunk missing), and the helper's thread gets the error."""
    import threading

    path = tmp_path / "t.sqlite"
    names = _make(path, 20_000, page_size=1024, columns=5, seed=14)
    monkeypatch.setattr(columns, "CHUNK_PAGES", 3)
    real = columns.decode_leaves

    def decode(*a):
        if threading.current_thread().name == "helper":
            raise RuntimeError("helper broke")
        time.sleep(0.002)
        return real(*a)

    monkeypatch.setattr(columns, "decode_leaves", decode)
    assist = sqlite_pages.Assist()
    errors = []
    done = threading.Event()

    def helper():
        while not done.is_set():
            try:
                assist.offer()
            except RuntimeError as exc:
                errors.append(exc)
                return
            time.sleep(0.001)

    h = threading.Thread(target=helper, name="helper")
    h.start()
    try:
        got = _decoded(path, "t", names, assist=assist)
    finally:
        done.set()
        h.join()
    assert got is None and [str(e) for e in errors] == ["helper broke"]


def test_more_rows_than_room_is_not_decoded(tmp_path):
    path = tmp_path / "t.sqlite"
    names = _make(path, 1_000, seed=13)
    assert _decoded(path, "t", names, capacity=999) is None
    _assert_equal(_decoded(path, "t", names, capacity=1_001), _sqlite(path, "t", names))

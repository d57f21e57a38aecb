"""``readers.sqlite_columns.factorize_sorted``: the lookup-table and the hash paths give np.unique's answer."""

from __future__ import annotations

import numpy as np

from kbase.readers.sqlite_columns import factorize_sorted


def test_both_paths_equal_numpy_unique():
    rng = np.random.default_rng(5)
    for keys, shift in (
        (rng.integers(0, 50, 5000, dtype=np.int64), 0),  # dense
        (rng.integers(0, 50, 5000, dtype=np.int64) << 32 | rng.integers(0, 9, 5000, dtype=np.int64), 32),
        (rng.integers(-(1 << 40), 1 << 40, 3000, dtype=np.int64), 0),  # too wide for a table: hashed
        (np.repeat(rng.integers(0, 1 << 62, 40, dtype=np.int64), 30), 0),
        (np.zeros(0, dtype=np.int64), 0),
    ):
        want, inverse = np.unique(keys >> shift, return_inverse=True)
        for dense in (1 << 22, 1):  # the default, and a table too small for any key span: the hash path
            codes, uniq = factorize_sorted(keys, shift=shift, dense=dense)
            assert codes.dtype == np.int32 and uniq.dtype == np.int64
            assert np.array_equal(uniq, want) and np.array_equal(codes, inverse.ravel())


def test_small_tables_read_by_sqlite3_equal_the_arrow_read(tmp_path, monkeypatch):
    """A table of at most ``SMALL_TABLE_ROWS`` rows is read through sqlite3; forcing ADBC/Arrow for it
    gives the same profile, column for column."""
    import kbase.readers.nsys as nsys
    import kbase.readers.sqlite_columns as sqlite_columns

    from helpers.tiny_export import assert_same_profile, make_tiny_export

    export = make_tiny_export(tmp_path / "tiny.sqlite", steps=6)
    small = nsys.read_nsys(export)
    monkeypatch.setattr(sqlite_columns, "SMALL_TABLE_ROWS", 0)
    arrow = nsys.read_nsys(export)
    assert_same_profile(small, arrow)

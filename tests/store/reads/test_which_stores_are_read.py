"""Which stores are read, and how: history reads touch the levels blob alone; the read connection opens only
head-schema kbase stores (an older one upgraded by the engine's upgrade, another application's file refused
untouched); other stores answer in one line."""

from __future__ import annotations

import sqlite3

import pytest

from helpers.cli import run_kbase
from helpers.library import old_schema_copy

# ------------------------------------------------------------------ which stores are read, and how


def test_history_reads_read_the_levels_blob_alone(sqlite_store):
    """``kbase history`` and ``steps`` read each baseline's ``levels`` blob (the first of its row) through the
    primary key, never the board, samples or sketches behind it (0009)."""
    from kbase.store.read.connect import bind
    from kbase.store.read.read_sql import SQL

    conn = sqlite3.connect(sqlite_store[0].removeprefix("sqlite:///"))
    args = {"any_workload": False, "workload": "bulk", "any_branch": True, "branch": "", "ids": [1, 2]}
    text = SQL["sqlite"]
    try:
        for name in ("kernel_history", "level_blobs"):
            sql, params = bind(text[name], {k: v for k, v in args.items() if f":{k}" in text[name] or
                                            f"POSTCOMPILE_{k}" in text[name]}, "sqlite")
            plan = " | ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
            assert "baseline_kernels" in plan and "PRIMARY KEY" in plan, (name, plan)
            for dialect in ("sqlite", "postgresql"):
                selected = SQL[dialect][name].split("FROM")[0]
                assert "levels" in selected and not any(c in selected for c in ("board", "samples", "sketches")), \
                    (dialect, name)
        cols = [r[1] for r in conn.execute("PRAGMA table_info(baseline_kernels)")]
        assert cols.index("levels") < min(cols.index(c) for c in ("board", "samples", "sketches"))
    finally:
        conn.close()


def test_the_read_connection_opens_only_head_schema_kbase_stores(sqlite_store, tmp_path):
    """``connect.open_read``: a store at the head schema as it is; an older one upgraded first by the upgrade the
    engine passes in (without one: ``NotAtHead``, the file unchanged); another application's file or a text file refused
    untouched; a missing store ``NoStoreError``, nothing created."""
    from kbase.errors import StoreError
    from kbase.store.engine import upgrade_to_read
    from kbase.store.read.connect import NotAtHead, open_read, sqlite_stamp
    from kbase.store.schema.errors import NoStoreError
    from kbase.store.schema.schema_names import head_revision

    url, _, _ = sqlite_store
    open_read(url, 5.0, 5.0).close()
    old = old_schema_copy(url, tmp_path / "old.db")
    before = (tmp_path / "old.db").read_bytes()
    with pytest.raises(NotAtHead) as not_head:
        open_read(old, 5.0, 5.0)
    assert not not_head.value.empty and (tmp_path / "old.db").read_bytes() == before
    (tmp_path / "empty.db").write_bytes(b"")  # a store still to be created: nothing stored, and nothing made
    with pytest.raises(NotAtHead) as not_head:
        open_read(f"sqlite:///{tmp_path / 'empty.db'}", 5.0, 5.0)
    assert not_head.value.empty and (tmp_path / "empty.db").read_bytes() == b""
    conn = open_read(old, 5.0, 5.0, lambda stamped: upgrade_to_read(old, 5.0, stamped))
    assert sqlite_stamp(conn) == [head_revision()]
    conn.close()
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE notes (x)")
    (tmp_path / "text.db").write_text("not a database")
    for other, what in ((foreign, "not a kbase store"), (tmp_path / "text.db", "not a SQLite database")):
        kept = other.read_bytes()
        with pytest.raises(StoreError, match=what):
            open_read(f"sqlite:///{other}", 5.0, 5.0)
        assert other.read_bytes() == kept
    with pytest.raises(NoStoreError):
        open_read(f"sqlite:///{tmp_path / 'no.db'}", 5.0, 5.0)
    assert not (tmp_path / "no.db").exists()


@pytest.mark.parametrize("args", [["list"], ["show", "@2", "-f", "json"], ["history", "{0}", "-f", "csv", "--name", "bulk"]])
def test_other_stores_answer_in_one_line(sqlite_store, tmp_path, args):
    """An old schema is upgraded on use and read; a foreign database is refused in one line (exit 2), and so is
    a missing store (``list``: none listed), nothing created or changed."""
    url, names, _ = sqlite_store
    argv = [a.format(*names) for a in args]
    old = old_schema_copy(url, tmp_path / "old.db")
    assert run_kbase(*argv, "--db", old).rc == 0
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (x)")
    kept = foreign.read_bytes()
    missing = f"sqlite:///{tmp_path / 'missing.db'}"
    for db, what in ((f"sqlite:///{foreign}", "not a kbase store"), (missing, "no store at")):
        r = run_kbase(*argv, "--db", db)
        if db == missing and args[0] == "list":
            assert r.rc == 0 and "0 baseline(s)" in r.stdout, r
            continue
        assert r.rc == 2 and r.stderr.count("\n") == 1 and what in r.stderr and "Traceback" not in r.stderr, r
    assert foreign.read_bytes() == kept and not (tmp_path / "missing.db").exists()

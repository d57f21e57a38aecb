"""Issue 20: the read-only path on PostgreSQL (``kbase.store.pg_read``: the statements' PostgreSQL text
through libpq, each row one JSON array). What is PostgreSQL's alone: which URLs it takes, how values and
parameters travel, that it only reads, that libpq says nothing on the terminal, and that every store it
does not read (old schema, foreign or empty database, no server) is answered by the SQLAlchemy path with
the same output and messages. That both paths give equal values is held in ``test_sqlite_read`` (its
PostgreSQL cases) and ``tests/comparison/test_fast_compare``.
"""

from __future__ import annotations

import math

import pytest

from kbase.store import pg_read
from kbase.store.records import Unreadable

from helpers.cli import run_kbase
from helpers.library import downgraded


@pytest.mark.parametrize(("url", "uri"), [
    ("postgresql+psycopg://u@127.0.0.1:5432/db", "postgresql://u@127.0.0.1:5432/db"),
    ("postgresql+psycopg://u:p%40ss@h/db?sslmode=disable", "postgresql://u:p%40ss@h/db?sslmode=disable"),
    ("postgresql+psycopg:///db?host=/run/postgresql", "postgresql:///db?host=/run/postgresql"),
    ("postgresql+psycopg://u:p@ss@h/db", None),  # two '@': SQLAlchemy and libpq split it differently
    ("postgresql+psycopg://u:pa/ss@h/db", None),  # '/' in the password: libpq would read host 'u'
    ("postgresql+psycopg://u:pa?ss@h/db", None),
    ("postgresql+psycopg2://u@h/db", None),  # another driver: its own path
    ("sqlite:////tmp/x.db", None),
])
def test_only_urls_libpq_reads_as_sqlalchemy_does(url, uri):
    assert pg_read.libpq_uri(url) == uri


def test_json_rows_decode_to_the_models_types():
    raw = [b'[1, 2.5, "\\\\x00ff", true, "2026-01-05T09:00:00+00:00"]', b'[2, 1, null, false, null]',
           b'[3, "NaN", "\\\\x", null, null]', b'[4, "-Infinity", null, null, null]']
    rows = pg_read.decode(raw, "-fx--")
    assert rows[0] == (1, 2.5, b"\x00\xff", True, "2026-01-05T09:00:00+00:00")
    assert rows[1] == (2, 1.0, None, False, None) and type(rows[1][1]) is float
    assert math.isnan(rows[2][1]) and rows[2][2] == b"" and rows[3][1] == -math.inf
    for bad in ([b"[1, \"x\", null, 1, 1]"], [b"[1, 1, \"00ff\", 1, 1]"], [b"not json"], [b"[1]"]):
        with pytest.raises(Unreadable):
            pg_read.decode(bad, "-fx--")


def test_parameters_bind_as_numbered_text_values():
    from datetime import date

    sql, values, oids = pg_read.bind(
        "a = %(a)s AND b IN (__[POSTCOMPILE_b]) AND c IN (__[POSTCOMPILE_c]) AND d LIKE 'x%%' AND %(e)s OR %(f)s",
        {"a": 7, "b": ["p", "q"], "c": [], "e": True, "f": date(2026, 1, 5)})
    assert sql == "a = $1 AND b IN ($2, $3) AND c IN (NULL) AND d LIKE 'x%' AND $4 OR $5"
    assert values == [b"7", b"p", b"q", b"true", b"2026-01-05"] and oids == [20, 0, 0, 16, 1082]
    with pytest.raises(Unreadable):  # libpq's strings end at NUL: the SQLAlchemy path says what is wrong
        pg_read.bind("a = %(a)s", {"a": "x\x00y"})


@pytest.fixture(scope="module")
def pg_store(tmp_path_factory, pg_copy_of) -> str:
    from kbase.store import open_store
    from kbase.synth.history import write_bulk_history

    url = f"sqlite:///{tmp_path_factory.mktemp('pgread') / 'kb.db'}"
    with open_store(url) as st:
        write_bulk_history(st.engine, 4, workload="bulk", n_kernels=6, iterations=4)
    return pg_copy_of(url)


def test_the_connection_only_reads_and_says_nothing(pg_store, capfd):
    """Read-only transactions (a write fails: the caller falls back), and a server's notices never reach
    the terminal (libpq would print them on stderr)."""
    from sqlalchemy import text

    from kbase.store import open_store

    with open_store(pg_store) as st, st.engine.begin() as conn:
        conn.execute(text("CREATE OR REPLACE FUNCTION kbase_test_notice() RETURNS int LANGUAGE plpgsql AS "
                          "$$ BEGIN RAISE NOTICE 'a notice'; RAISE WARNING 'a warning'; RETURN 1; END $$"))
    reader = pg_read.open_reader(pg_store)
    assert reader is not None
    try:
        assert reader.conn.first_column("SELECT kbase_test_notice()") == [b"1"]
        with pytest.raises(pg_read.PgError):
            reader.conn.first_column("INSERT INTO acceptance (workload, pattern, \"commit\", reason, author, "
                                     "created_at) VALUES ('w', 'p', 'c', 'r', 'a', now()) RETURNING id")
        assert [b.id for b in reader.list_baselines()] == [4, 3, 2, 1]
    finally:
        reader.close()
    out, err = capfd.readouterr()
    assert "notice" not in out + err and "warning" not in out + err
    with open_store(pg_store) as st, st.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM acceptance")).scalar() == 0


def _foreign(url: str) -> str:
    from sqlalchemy import create_engine, text

    eng = create_engine(url)
    with eng.begin() as conn:
        conn.execute(text("CREATE TABLE notes (x int)"))
    eng.dispose()
    return url


@pytest.mark.parametrize("args", [["list"], ["show", "@2", "-f", "json"], ["history", "{name}", "-f", "csv"],
                                  ["steps", "--name", "bulk"], ["diff", "@1", "@2", "--name", "bulk"]])
def test_stores_it_does_not_read_answer_as_before(pg_url, pg_store, pg_copy_of, monkeypatch, tmp_path, args):
    """An old schema (migrated on use), a foreign database, an empty one (made a store) and a server that is
    not there: the SQLAlchemy path's answers and messages, the same whether the fast path is on or off."""
    from kbase.store import open_store
    from kbase.store.reader import EngineReader

    from helpers.pg import create_database, free_port

    with open_store(pg_store) as st:
        name = EngineReader(st.engine).kernel_names()[0][0]
    nobody = pg_url.replace(pg_url.split("@", 1)[1].split("/", 1)[0], f"127.0.0.1:{free_port()}")
    results = []
    for flag in ("", "1"):
        monkeypatch.setenv("KBASE_NO_FAST_READ", flag)
        stores = [downgraded(pg_copy_of(pg_store)), _foreign(create_database(pg_url)), create_database(pg_url),
                  nobody]
        assert pg_read.open_reader(stores[0]) is None and pg_read.open_reader(stores[1]) is None
        got = []
        for db in stores:
            r = run_kbase(*[a.format(name=name) for a in args], "--db", db)
            got.append((r.rc, r.stdout, r.stderr.replace(db.rsplit("/", 1)[1], "DB")))
        results.append(got)
    assert results[0] == results[1]
    assert results[0][1][0] == 2 and "not a kbase store" in results[0][1][2]
    assert results[0][3][0] == 2 and "cannot connect" in results[0][3][2]

"""The snapshot's write path on the driver (``store.writer``, ``store.create``): its SQL is the write statements
compiled (``write_statements`` -> ``write_sql.py``), a store it creates is the one ``alembic upgrade head``
makes, the rows it writes are the rows the SQLAlchemy path writes, and a snapshot into a new store or one at the
head schema imports neither SQLAlchemy, SQLModel nor Alembic.

``KBASE_UPDATE_SQL=1 pytest tests/store/test_write_sql.py`` (or ``python -m kbase.store.write.write_statements``)
writes ``write_sql.py`` again after a model or statement changed.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from kbase.settings import Settings
from kbase.store.engine import open_store
from kbase.store.write import write_sql, write_statements
from kbase.store.write.create import open_direct
from kbase.synth.generate import ExportSpec, generate_export

from helpers.imports import loaded
from helpers.library import snap

WRITE_SQL = Path(write_sql.__file__)
REV = "abcdef0123456789abcdef0123456789abcdef01"


def test_the_write_path_sql_is_the_statements_compiled():
    want = write_statements.write_sql_module()
    if os.environ.get("KBASE_UPDATE_SQL") == "1":
        WRITE_SQL.write_text(want, encoding="utf-8")
    assert WRITE_SQL.read_text(encoding="utf-8") == want, (
        "kbase/store/write/write_sql.py is not the write statements compiled: run python -m kbase.store.write.write_statements")
    for dialect in write_statements.DIALECTS:
        assert set(write_sql.SQL[dialect]) == set(write_statements.WRITES)
        for name in write_statements.WRITES:
            assert write_sql.SQL[dialect][name] == write_statements.write_text(name, dialect), (dialect, name)
        assert write_sql.DDL[dialect] == write_statements.schema_ddl(dialect)
    # every parameter is one the writer names (a literal compiled as an anonymous parameter, ``capture_copy_1``,
    # would be missing at run time)
    import re

    for name, text in write_sql.SQL["sqlite"].items():
        anonymous = re.findall(r":(\w+_\d+)\b", text)
        assert not anonymous, (name, anonymous)


def test_the_records_and_the_writer_agree_on_the_baseline_columns():
    from kbase.store.schema.records import BASELINE_FIELDS
    from kbase.store.write import writer

    assert write_sql.BASELINE_COLUMNS == BASELINE_FIELDS
    assert writer.CAPTURE_KEY == write_statements.CAPTURE_KEY


# --------------------------------------------------------------------------- the schema


def _schema(url: str) -> dict:
    """Everything the inspector says of every table: columns (type, nullability, default), primary key,
    indexes, unique constraints and foreign keys; on SQLite also the table options the inspector does not show
    (AUTOINCREMENT: ids never reused; WITHOUT ROWID)."""
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(url)
    try:
        insp = inspect(engine)
        out: dict = {}
        for table in sorted(insp.get_table_names()):
            cols = {c["name"]: (str(c["type"]), c["nullable"], c["default"]) for c in insp.get_columns(table)}
            pk = insp.get_pk_constraint(table)
            indexes = sorted((i["name"], tuple(i["column_names"]), bool(i["unique"]))
                             for i in insp.get_indexes(table))
            uniques = sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(table))
            fks = sorted((tuple(f["constrained_columns"]), f["referred_table"], tuple(f["referred_columns"]),
                          (f.get("options") or {}).get("ondelete")) for f in insp.get_foreign_keys(table))
            out[table] = {"columns": cols, "pk": tuple(pk["constrained_columns"]), "indexes": indexes,
                          "uniques": uniques, "fks": fks}
        if engine.dialect.name == "sqlite":
            with engine.connect() as conn:
                for name, sql in conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'table'")):
                    if name in out:
                        flat = " ".join(sql.upper().split())
                        out[name]["options"] = ("AUTOINCREMENT" in flat, flat.endswith("WITHOUT ROWID"))
        return out
    finally:
        engine.dispose()


def _created(url: str) -> str:
    direct = open_direct(Settings.load(db=url))
    assert direct is not None, "a new store is created on the driver"
    direct.close()
    return url


def _migrated(url: str) -> str:
    open_store(url).close()  # engine.open_store: every migration, as before
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def two_new_urls(request, tmp_path) -> tuple[str, str]:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'created.db'}", f"sqlite:///{tmp_path / 'migrated.db'}"
    return request.getfixturevalue("pg_db_url"), request.getfixturevalue("pg_url_second")


@pytest.fixture
def pg_url_second(pg_url):
    from helpers import pg

    url = pg.create_database(pg_url)
    try:
        yield url
    finally:
        pg.drop_database(pg_url, url)


def test_a_store_created_on_the_driver_is_the_one_alembic_makes(two_new_urls):
    created, migrated = _created(two_new_urls[0]), _migrated(two_new_urls[1])
    a, b = _schema(created), _schema(migrated)
    assert set(a) == set(b)
    for table in a:
        assert a[table] == b[table], table
    from kbase.store.read.connect import open_read
    from kbase.store.schema.schema_names import head_revision

    if created.startswith("sqlite"):
        con = sqlite3.connect(created[len("sqlite:///"):])
        assert con.execute("SELECT version_num FROM alembic_version").fetchall() == [(head_revision(),)]
        con.close()
    conn = open_read(created, 5.0, 5.0)  # (no upgrade given) the read connection takes it as a store at the head schema
    assert conn is not None
    conn.close()


def test_alembic_check_is_clean_on_a_store_created_on_the_driver(two_new_urls):
    from alembic import command

    from kbase.store.engine import alembic_config

    command.check(alembic_config(_created(two_new_urls[0])))  # raises when the models differ from the store


# --------------------------------------------------------------------------- the rows


def _rows(url: str) -> dict[str, list[tuple]]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            out = {}
            for table, order in (("baseline", "id"), ("kernel_name", "id"), ("op_name", "id"),
                                 ("baseline_kernels", "baseline_id"), ("workload_kernel", "workload, name_id")):
                rows = conn.execute(text(f"SELECT * FROM {table} ORDER BY {order}")).mappings().all()
                out[table] = [tuple(sorted((k, v) for k, v in r.items() if k != "created_at")) for r in rows]
            return out
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def small_exports(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("exports")
    return [generate_export(d / f"e{i}.sqlite", ExportSpec(n_gpus=2, iterations=5, seed=i)).path for i in range(2)]


def test_the_driver_writes_the_rows_sqlalchemy_writes(two_new_urls, small_exports, monkeypatch):
    """The same snapshots (a new store, a second capture, a --force copy, an identical one answered from the
    store) on the driver and through SQLAlchemy (``KBASE_NO_DIRECT_WRITE=1``): every stored value equal, but
    the creation time."""
    direct_url, engine_url = two_new_urls
    results = {}
    for url, switch in ((direct_url, None), (engine_url, "1")):
        if switch:
            monkeypatch.setenv("KBASE_NO_DIRECT_WRITE", switch)
        else:
            monkeypatch.delenv("KBASE_NO_DIRECT_WRITE", raising=False)
        copy = small_exports[0].with_name(f"copy-{len(results)}.sqlite")  # same bytes, another file: read again
        shutil.copyfile(small_exports[0], copy)
        got = [snap(small_exports[0], name="w", db=url, rev=REV, no_git=True, tags=["b", "a"], note="n"),
               snap(small_exports[1], name="w", db=url, rev=REV, no_git=True),
               snap(small_exports[0], name="w", db=url, rev=REV, no_git=True, force=True),
               snap(small_exports[0], name="w", db=url, rev=REV, no_git=True),
               snap(copy, name="w", db=url, rev=REV, no_git=True)]
        assert [r.created for r in got] == [True, True, True, False, False]
        assert got[3].baseline.id == got[4].baseline.id == got[0].baseline.id
        results[url] = got
    monkeypatch.delenv("KBASE_NO_DIRECT_WRITE", raising=False)
    assert _rows(direct_url) == _rows(engine_url)
    assert _rows(direct_url)["op_name"], "the exports carry ops: their ids and blob are compared too"
    # what the snapshot answers equals what the store reads back: records, on either write path
    from kbase.store.schema.records import BaselineRecord

    assert all(type(r.baseline) is BaselineRecord for url in results for r in results[url])
    with open_store(direct_url, readonly=True) as st:
        for r in results[direct_url]:
            assert st.reader.baseline(r.baseline.id) == r.baseline
    for a, b in zip(results[direct_url], results[engine_url]):  # the stored leaderboard where none was stored
        assert [x["name"] for x in a.leaderboard.rows] == [x["name"] for x in b.leaderboard.rows]
        assert [x["total_ns"] for x in a.leaderboard.rows] == [x["total_ns"] for x in b.leaderboard.rows]


# --------------------------------------------------------------------------- what a snapshot imports


STORE_STACK = {"sqlalchemy", "sqlmodel", "alembic"}


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_snapshot_imports_no_store_stack(backend, tmp_path, small_exports, request):
    """Into a new store and into one at the head schema: neither SQLAlchemy, SQLModel nor Alembic; a store at
    an older revision is upgraded by Alembic as before, and the next snapshot is on the driver again."""
    from helpers.library import old_schema_copy

    url = f"sqlite:///{tmp_path / 'new' / 'kb.db'}" if backend == "sqlite" else request.getfixturevalue("pg_db_url")
    args = ("--no-git", "--rev", REV, "--name", "w", "--format", "json", "-n", "1")
    for export in small_exports:
        rc, heavy = loaded("snapshot", str(export), "--db", url, *args, cwd=tmp_path, watch=("sqlalchemy",
                                                                                            "sqlmodel", "alembic"))
        assert rc == 0 and not heavy & STORE_STACK, sorted(heavy)
    if backend == "sqlite":
        old = old_schema_copy(url, tmp_path / "old.db")
        rc, heavy = loaded("snapshot", str(small_exports[0]), "--db", old, *args, "--force", cwd=tmp_path)
        assert rc == 0 and {"sqlalchemy", "alembic"} <= heavy
        rc, heavy = loaded("snapshot", str(small_exports[0]), "--db", old, *args, "--force", cwd=tmp_path)
        assert rc == 0 and not heavy & STORE_STACK, sorted(heavy)


def test_a_taken_capture_key_answers_with_the_stored_row(store_url, small_exports):
    """The unique capture key decides (no check first): a second save of the same capture finds the stored row
    (``same_capture``), ``force`` takes the next copy number."""
    import kbase
    from kbase.readers.source import describe_source
    from kbase.store.write import queries

    settings = Settings.load(db=store_url)
    lb = kbase.top(small_exports[0], settings, sketches=True)
    source = describe_source(small_exports[0], "nsys-sqlite")
    from kbase.gitrepo import commit_info

    commit = commit_info(None, REV, True)
    st = open_store(store_url)
    try:
        def save(force: bool = False):
            return queries.save_leaderboard(st.engine, lb, workload="w", commit=commit, source=source,
                                            window_spec="win", url=store_url, force=force)

        first, again, forced = save(), save(), save(force=True)
        assert (first.created, again.created, forced.created) == (True, False, True)
        assert again.baseline.id == first.baseline.id and forced.baseline.capture_copy == 1
        stored = st.reader.baseline(first.baseline.id)
        assert again.baseline == stored
    finally:
        st.close()

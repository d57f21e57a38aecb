"""Issue 12, "never write where kbase must not": a database that is not a kbase store is refused
untouched (byte-identical, no WAL switch, no lock or journal file beside it); read-only commands never
create a store, its folder or a lock file; ``:memory:`` never becomes a file; the migration lock file is
removed on every exit path."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from kbase.errors import StoreError
from kbase.store.engine import open_store
from kbase.store.schema.errors import NoStoreError
from kbase.store.schema.guard import _file_lock
from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import kb

REV = "1111111111111111111111111111111111111111"
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def digest(folder: Path) -> dict[str, str]:
    """Every file in ``folder`` (names and bytes): proves nothing was written, created or left behind."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def profile(tmp_path_factory) -> Path:
    return generate_export(tmp_path_factory.mktemp("guard") / "p.sqlite", ExportSpec(n_gpus=1, iterations=5,
                                                                                       seed=1)).path


def foreign_db(path: Path, wal: bool = False) -> Path:
    conn = sqlite3.connect(path)
    if wal:
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    conn.execute("INSERT INTO invoices (total) VALUES (12.5)")
    conn.commit()
    if wal:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


COMMANDS = [
    ("snapshot", "{profile}", "--no-git", "--rev", REV),
    ("list",), ("show", "@1"), ("gate", "@1", "@2"), ("diff", "@1", "@2"), ("history", "k"),
    ("db", "upgrade"), ("db", "current"),
]


def _args(cmd: tuple[str, ...], profile: Path) -> list[str]:
    return [a.format(profile=profile) for a in cmd]


@pytest.mark.parametrize("how", ["flag", "env"])
@pytest.mark.parametrize("kind", ["rollback-journal", "wal", "not-sqlite", "the-profile-itself"])
def test_foreign_database_is_refused_untouched(tmp_path, profile, monkeypatch, kind, how):
    work = tmp_path / "w"
    work.mkdir()
    if kind == "the-profile-itself":
        db = work / "p.sqlite"
        db.write_bytes(profile.read_bytes())
        prof = db
    else:
        prof = profile
        db = work / "other.db"
        if kind == "not-sqlite":
            db.write_text('{"traceEvents": []}\n')
        else:
            foreign_db(db, wal=kind == "wal")
    before = digest(work)
    for cmd in COMMANDS:
        args = _args(cmd, prof)
        if how == "flag":
            r = kb(*args, "--db", str(db))
        else:
            monkeypatch.setenv("KBASE_DB", str(db))
            r = kb(*args)
            monkeypatch.delenv("KBASE_DB")
        if cmd == ("db", "current") and r.rc == 0:
            continue  # reads nothing it could change (checked below: byte-identical)
        assert r.rc == 2, r
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and ("not a kbase store" in lines[0] or "not a SQLite database" in lines[0]), r
        assert "Traceback" not in r.stderr
        assert digest(work) == before, (args, "the database or its folder changed")


def test_foreign_postgresql_database_is_refused_untouched(pg_db_url, profile):
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(pg_db_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE invoices (id SERIAL PRIMARY KEY, total REAL)"))
        conn.execute(text("INSERT INTO invoices (total) VALUES (12.5)"))
    try:
        for cmd in (("snapshot", str(profile), "--no-git", "--rev", REV), ("list",), ("db", "upgrade")):
            r = kb(*cmd, "--db", pg_db_url)
            assert r.rc == 2 and "not a kbase store" in r.stderr, r
            assert len(r.stderr.strip().splitlines()) == 1
        assert inspect(engine).get_table_names() == ["invoices"]
    finally:
        engine.dispose()


def test_an_empty_sqlite_file_may_become_a_store(tmp_path, profile):
    db = tmp_path / "empty.db"
    db.touch()
    r = kb("snapshot", str(profile), "--no-git", "--rev", REV, "--db", str(db), "--format", "json")
    assert r.rc == 0, r
    with open_store(str(db)) as st:
        assert st.engine.dialect.name == "sqlite"


@pytest.mark.parametrize("cmd", [("list",), ("show", "@1"), ("gate", "@1", "@2"), ("diff", "@1", "@2"),
                                 ("history", "k"), ("db", "current"), ("list", "--format", "json")])
def test_read_only_commands_create_no_store(tmp_path, cmd):
    """No store, no folder, no lock file: an empty answer (list, db current) or 'no store at …' (exit 2)."""
    db = tmp_path / "nowhere" / "sub" / "kbase.db"
    r = kb(*cmd, "--db", str(db))
    assert not (tmp_path / "nowhere").exists(), r
    assert list(tmp_path.iterdir()) == []
    if cmd[0] in ("list", "db"):
        assert r.rc == 0, r
    else:
        assert r.rc == 2 and r.stderr.strip() == f"kbase: error: no store at {db} (nothing stored yet; a snapshot " \
                                                  "creates it)", r


def test_read_only_library_open_creates_nothing(tmp_path):
    with pytest.raises(NoStoreError):
        open_store(f"sqlite:///{tmp_path / 'x' / 'k.db'}", readonly=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("value", [":memory:", "sqlite://", "sqlite:///:memory:"])
def test_memory_store_never_becomes_a_file(tmp_path, profile, monkeypatch, value):
    monkeypatch.chdir(tmp_path)
    r = kb("snapshot", str(profile), "--no-git", "--rev", REV, "--db", value, "--format", "json")
    assert r.rc == 0, r
    r = kb("list", "--db", value, "--format", "json")
    assert r.rc == 0, r
    assert list(tmp_path.iterdir()) == []


def test_no_lock_file_after_a_command(tmp_path, profile):
    db = tmp_path / "s" / "kbase.db"
    for args in (("snapshot", str(profile), "--no-git", "--rev", REV), ("list",), ("db", "upgrade"),
                 ("show", "@99")):
        kb(*args, "--db", str(db))
        assert not list(db.parent.glob("*lock*")), args


@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_lock_file_removed_on_error_and_interrupt(tmp_path, exc):
    lock = tmp_path / "k.db.migrate-lock"
    with pytest.raises(type(exc)), _file_lock(lock):
        assert lock.exists()
        raise exc
    assert not lock.exists()


def test_store_parent_is_a_file(tmp_path, profile):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    r = kb("snapshot", str(profile), "--no-git", "--rev", REV, "--db", str(blocker / "kbase.db"))
    assert r.rc == 2 and "is a file, not a directory" in r.stderr, r
    assert blocker.read_text() == "x"


def test_store_path_is_a_folder(tmp_path):
    r = kb("list", "--db", str(tmp_path))
    assert r.rc == 2 and "is a directory" in r.stderr, r


def test_libpq_connection_string_is_not_taken_for_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = kb("list", "--db", "host=db.example password=hunter2 dbname=k")
    assert r.rc == 2 and "libpq" in r.stderr and "hunter2" not in r.stderr, r
    assert list(tmp_path.iterdir()) == []


def test_library_refuses_foreign_database(tmp_path):
    db = foreign_db(tmp_path / "o.db")
    before = db.read_bytes()
    with pytest.raises(StoreError, match="not a kbase store"):
        open_store(str(db))
    assert db.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["o.db"]


def test_a_store_being_created_is_not_taken_for_a_foreign_database(tmp_path):
    """Another process creating the store right now leaves only some of kbase's tables (Alembic's version
    table first): that is a kbase store, not somebody else's database; one more table of another name is."""
    half = tmp_path / "half.db"
    with sqlite3.connect(half) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
    open_store(f"sqlite:///{half}").close()  # migrated to the head, no refusal
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
        conn.execute("CREATE TABLE users (id INTEGER)")
    before = hashlib.sha256(other.read_bytes()).hexdigest()
    with pytest.raises(StoreError, match="not a kbase store"):
        open_store(f"sqlite:///{other}")
    assert hashlib.sha256(other.read_bytes()).hexdigest() == before

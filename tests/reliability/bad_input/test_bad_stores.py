"""Issue #6, bad-input matrix: the store itself (a read-only, locked, newer, corrupt store, a directory): one line,
exit 2, the store unchanged (see test_bad_references.py's docstring)."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from helpers.bad_input import (
    assert_bad_input,
    baseline_count,
    kb,
    kb_proc,
    seed_store,
    store_state,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


# --------------------------------------------------------------------------- the store itself (SQLite)


@contextlib.contextmanager
def read_only(path: Path):
    """Make the database file and its folder unwritable for the duration. As root, file modes do
    not stop writes: use ``chattr +i`` (immutable) instead, or skip."""
    folder = path.parent
    if os.geteuid() == 0:
        chattr = shutil.which("chattr")
        if chattr is None:
            pytest.skip("running as root: file permissions do not apply (and no chattr for +i)")
        done = []
        try:
            for p in (path, folder):
                out = subprocess.run([chattr, "+i", str(p)], capture_output=True, text=True)
                if out.returncode != 0:
                    pytest.skip(f"running as root: file permissions do not apply and chattr +i failed "
                                f"({out.stderr.strip()})")
                done.append(p)
            try:
                (folder / "probe").write_text("x")
            except OSError:
                pass
            else:
                (folder / "probe").unlink()
                pytest.skip("running as root: file permissions do not apply (chattr +i had no effect)")
            yield
        finally:
            for p in reversed(done):
                subprocess.run([chattr, "-i", str(p)], capture_output=True)
        return
    mode_f, mode_d = path.stat().st_mode, folder.stat().st_mode
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        yield
    finally:
        folder.chmod(mode_d & 0o7777)
        path.chmod(mode_f & 0o7777)


@pytest.fixture
def private_store(world, tmp_path) -> str:
    """A SQLite store of this test only (its file is made read-only, corrupted, locked...)."""
    return seed_store(world, f"sqlite:///{tmp_path / 'st' / 'kbase.db'}")


@pytest.mark.slow
def test_read_only_database(private_store, world):
    path = Path(private_store[len("sqlite:///"):])
    before = store_state(private_store)
    listing = sorted(p.name for p in path.parent.iterdir())
    with read_only(path):
        res = kb("snapshot", world.tiny, "--db", private_store, "--repo", world.repo, "--force")
        assert_bad_input(res, str(path), "read-only")
        res = kb("rm", "@1", "--yes", "--db", private_store)
        assert_bad_input(res, "read-only")
        # reading a read-only store: works, or says read-only in one line
        res = kb("list", "--db", private_store, "--format", "json")
        if res.rc != 0:
            assert_bad_input(res, "read-only")
        assert store_state(private_store) == before
        assert sorted(p.name for p in path.parent.iterdir()) == listing
    assert store_state(private_store) == before


@pytest.mark.slow
def test_database_locked_past_the_timeout(private_store, world, monkeypatch):
    import kbase.store.engine

    path = Path(private_store[len("sqlite:///"):])
    before = store_state(private_store)
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        t0 = time.monotonic()
        res = kb_proc("snapshot", world.tiny, "--db", private_store, "--repo", world.repo, "--force",
                      env={"KBASE_BUSY_TIMEOUT": "1"})
        assert_bad_input(res, str(path), "locked")
        assert time.monotonic() - t0 < 120
        # the same in this process (the timeout is read at import: patch it)
        monkeypatch.setattr(kbase.store.engine, "BUSY_TIMEOUT_S", 1.0)
        res = kb("rm", "@1", "--yes", "--db", private_store)
        assert_bad_input(res, "locked")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store_state(private_store) == before
    assert baseline_count(private_store) == 2


@pytest.fixture
def private_any_store(request, world, tmp_path) -> str:
    """A seeded store of this test only, on SQLite or PostgreSQL."""
    if request.param == "sqlite":
        return seed_store(world, f"sqlite:///{tmp_path / 'st' / 'kbase.db'}")
    return seed_store(world, request.getfixturevalue("pg_db_url"))


@pytest.mark.slow
@pytest.mark.parametrize("private_any_store", ["sqlite", "postgresql"], indirect=True)
def test_store_from_a_newer_kbase(private_any_store, world):
    """Stamped with Alembic revision 9999: every command refuses it in one line and changes nothing
    (``tests/store/baselines`` covers snapshot/list/show/db upgrade; here also diff, gate, rm, history
    and the byte/row-level check of the whole store)."""
    from sqlalchemy import create_engine, text

    url = private_any_store
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    before = store_state(url)
    db = ("--db", url, "--repo", world.repo, "--name", "w")
    for args in (("snapshot", world.tiny, "--force"), ("list",), ("show", "@1"), ("diff", "@1", "@2"),
                 ("gate", "HEAD~1", "HEAD"), ("rm", "@1", "--yes"), ("history", "x"), ("db", "upgrade")):
        res = kb(*args, *db) if args[0] not in ("list", "rm", "history", "db") else kb(*args, "--db", url)
        assert_bad_input(res, "schema revision 9999", "newer kbase")
    assert store_state(url) == before


@pytest.mark.parametrize("garbage", ["random", "sqlite-header"])
def test_corrupt_database_file(tmp_path, world, garbage):
    path = tmp_path / "st" / "kbase.db"
    path.parent.mkdir()
    data = random.Random(7).randbytes(20_000)
    if garbage == "sqlite-header":
        data = b"SQLite format 3\x00" + data
    path.write_bytes(data)
    url = f"sqlite:///{path}"
    for args in (("snapshot", world.tiny, "--repo", world.repo), ("list",), ("show", "@1"),
                 ("diff", "@1", "@2"), ("db", "upgrade")):
        res = kb(*args, "--db", url)
        assert_bad_input(res, str(path), "corrupt")
    assert path.read_bytes() == data
    assert sorted(p.name for p in path.parent.iterdir()) == ["kbase.db"]


def test_store_path_is_a_directory(tmp_path, world):
    d = tmp_path / "iam.db"
    d.mkdir()
    res = kb("snapshot", world.tiny, "--db", d, "--repo", world.repo)
    assert_bad_input(res, str(d), "directory")
    assert list(d.iterdir()) == []


@pytest.mark.slow
def test_postgresql_url_that_cannot_connect(world, monkeypatch):
    url = "postgresql+psycopg2://kb:s3cret@127.0.0.1:1/x"
    res = kb_proc("snapshot", world.tiny, "--repo", world.repo, "--db", url, timeout=120)
    assert_bad_input(res, "postgresql+psycopg2://kb:***@127.0.0.1:1/x", "cannot connect")
    assert "s3cret" not in res.stderr and "s3cret" not in res.stdout
    # in this process: other commands, the plain postgresql:// spelling, and KBASE_DB
    for args in (("list", "--db", url), ("show", "@1", "--db", url), ("gate", "@1", "@2", "--db", url),
                 ("db", "upgrade", "--db", url), ("list", "--db", "postgresql://kb:s3cret@127.0.0.1:1/x")):
        res = kb(*args)
        assert_bad_input(res, "kb:***@127.0.0.1:1/x", "cannot connect")
        assert "s3cret" not in res.stderr and "s3cret" not in res.stdout
    monkeypatch.setenv("KBASE_DB", url)
    res = kb("list")
    assert_bad_input(res, "kb:***@127.0.0.1:1/x")
    assert "s3cret" not in res.stderr


def test_mask_url_never_shows_a_password():
    from kbase.store.engine import mask_url

    assert mask_url("postgresql+psycopg2://kb:s3cret@h:5432/db") == "postgresql+psycopg2://kb:***@h:5432/db"
    assert "s3cret" not in mask_url("postgresql+psycopg2://kb:s3cret@[::1]:5432/db")
    assert mask_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"

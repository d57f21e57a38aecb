"""The identity of a profile file (``readers.source``: its content when small, else inode, size, times and
first/last 64 KiB, with its SQLite side files; issue 29 tests every way to change it) and what
uses it: ``kbase top FILE`` answers from the store when this very file was snapshotted at the current
commit with the same window, and ``snapshot`` finds such a capture before reading anything; the full
sha256 runs in a thread while the reader parses and stays the idempotence key."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kbase.readers.source import PROBE_BLOCK, BackgroundSource, describe_source, file_sha256, source_identity

from helpers.cli import kb
from helpers.library import snap
from helpers.tiny_export import make_tiny_export

FROM_STORE = "from the store: baseline @"


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"git {' '.join(args)}: {out.stderr}"
    return out.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q")
    git(r, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "one")
    return r


# --------------------------------------------------------------------------- the identity itself


def test_identity_sees_size_mtime_head_and_tail(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(bytes(range(256)) * 2048)  # 512 KiB: head and tail blocks do not overlap
    a = source_identity(p)
    assert a == source_identity(p) and a.size == p.stat().st_size and a.mtime_ns == p.stat().st_mtime_ns
    for offset in (0, p.stat().st_size - 1):  # a changed byte in either probed block changes the probe
        data = bytearray(p.read_bytes())
        data[offset] ^= 0xFF
        q = tmp_path / "g.bin"
        q.write_bytes(bytes(data))
        os.utime(q, ns=(a.mtime_ns, a.mtime_ns))
        assert source_identity(q).probe != a.probe
    os.utime(p, ns=(a.mtime_ns + 1_000_000_000, a.mtime_ns + 1_000_000_000))
    b = source_identity(p)
    assert b.probe == a.probe and b.mtime_ns != a.mtime_ns  # the mtime is the part that sees the middle
    small = tmp_path / "s.bin"
    small.write_bytes(b"x" * (PROBE_BLOCK // 2))  # shorter than a block: hashed once, whole
    assert source_identity(small).size == PROBE_BLOCK // 2


def test_identity_of_a_trace_directory_covers_every_file(tmp_path):
    d = tmp_path / "ranks"
    d.mkdir()
    (d / "r0.json").write_text("{}")
    (d / "r1.json").write_text("[]")
    a = source_identity(d)
    (d / "r1.json").write_text("[1]")
    b = source_identity(d)
    assert a.size + 1 == b.size and a.probe != b.probe


def test_background_hash_is_the_full_sha256_and_reraises(tmp_path):
    p = tmp_path / "f.bin"
    p.write_bytes(os.urandom(3 << 20))
    info = BackgroundSource(p, "nsys-sqlite").result()
    assert info == describe_source(p, "nsys-sqlite") and info.sha256 == file_sha256(p)
    with pytest.raises(FileNotFoundError):
        BackgroundSource(tmp_path / "missing", "nsys-sqlite").result()


# --------------------------------------------------------------------------- kbase top from the store


def _top(repo: Path, export: Path, db: str, *extra: str) -> dict:
    r = kb("top", str(export), "--db", db, "--repo", str(repo), "-f", "json", *extra)
    assert r.rc == 0, r
    return json.loads(r.stdout)


def _without_notes(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k != "notes"}


def test_top_of_a_stored_file_answers_from_the_store(tmp_path, repo):
    export = make_tiny_export(tmp_path / "tiny.sqlite")
    db = f"sqlite:///{tmp_path / 'kb.db'}"
    fresh = _top(repo, export, db)
    assert not (tmp_path / "kb.db").exists()  # top never creates a store
    assert not any(FROM_STORE in n for n in fresh["notes"])
    snap(export, db=db, repo=repo)
    stored = _top(repo, export, db)
    assert any(FROM_STORE in n for n in stored["notes"]), stored["notes"]
    assert _without_notes(stored) == _without_notes(fresh)  # the same leaderboard, only the note differs
    assert not any(FROM_STORE in n for n in _top(repo, export, db, "--no-store")["notes"])


@pytest.mark.parametrize("change", ["new commit", "touched", "other window", "per gpu"])
def test_top_reads_the_file_when_the_identity_does_not_match(tmp_path, repo, change):
    export = make_tiny_export(tmp_path / "tiny.sqlite")
    db = f"sqlite:///{tmp_path / 'kb.db'}"
    snap(export, db=db, repo=repo)
    extra: tuple[str, ...] = ()
    if change == "new commit":
        git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "two")
    elif change == "touched":
        st = export.stat()
        os.utime(export, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    elif change == "other window":
        extra = ("--warmup", "0")
    else:
        extra = ("--per-gpu",)
    doc = _top(repo, export, db, *extra)
    assert not any(FROM_STORE in n for n in doc["notes"]), (change, doc["notes"])


def test_top_outside_a_repository_or_with_an_old_store_reads_the_file(tmp_path):
    export = make_tiny_export(tmp_path / "tiny.sqlite")
    norepo = tmp_path / "plain"
    norepo.mkdir()
    r = kb("top", str(export), "--db", f"sqlite:///{tmp_path / 'none.db'}", "--repo", str(norepo), "-f", "json")
    assert r.rc == 0 and FROM_STORE not in r.stdout
    assert not (tmp_path / "none.db").exists()


# --------------------------------------------------------------------------- snapshot


def test_snapshot_finds_the_stored_capture_by_identity_then_by_sha256(tmp_path, repo):
    export = make_tiny_export(tmp_path / "tiny.sqlite")
    db = f"sqlite:///{tmp_path / 'kb.db'}"
    first = snap(export, db=db, repo=repo)
    assert first.created and first.baseline.source_probe and first.baseline.source_mtime_ns
    again = snap(export, db=db, repo=repo)  # identity hit, confirmed by the full sha256
    assert not again.created and again.baseline.id == first.baseline.id
    copy = tmp_path / "copy" / "tiny.sqlite"
    copy.parent.mkdir()
    shutil.copyfile(export, copy)
    os.utime(copy, ns=(1, 1))  # another mtime: no identity hit; the overlapped sha256 still finds it
    third = snap(copy, db=db, repo=repo)
    assert not third.created and third.baseline.id == first.baseline.id
    forced = snap(export, db=db, repo=repo, force=True)
    assert forced.created and forced.baseline.id != first.baseline.id


def test_snapshot_into_a_new_store_reads_first_and_creates_it_only_for_a_good_profile(tmp_path, repo):
    """No store yet: nothing can be stored, so the profile is read first; a profile that does not read
    leaves no store behind (exit 2, one line)."""
    import sqlite3

    bad = tmp_path / "empty.sqlite"
    shutil.copyfile(make_tiny_export(tmp_path / "tiny.sqlite"), bad)
    con = sqlite3.connect(bad)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con.commit()
    con.close()
    store = tmp_path / "new.db"
    r = kb("snapshot", str(bad), "--db", f"sqlite:///{store}", "--repo", str(repo))
    assert r.rc == 2 and "kernel table is empty" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r
    assert not store.exists() and not list(tmp_path.glob("new.db*"))
    first = snap(tmp_path / "tiny.sqlite", db=f"sqlite:///{store}", repo=repo)
    assert first.created and store.exists()


def test_look_up_decides_only_what_it_can(tmp_path, repo):
    """"Is this file stored?" (``identity.look_up``): decided when the store surely holds it or not (no store
    file: nothing stored; a head-schema store: its answer), undecided where it could only answer by being
    changed (another application's database, an older schema) or not at all (no server): then the caller opens
    the store as usual, or reads the file. Nothing is created, migrated or written."""
    import sqlite3

    from kbase.settings import Settings
    from kbase.store.identity import identity_key, look_up

    from helpers.library import old_schema_copy
    from helpers.pg import free_port

    export = make_tiny_export(tmp_path / "tiny.sqlite")
    ident = source_identity(export)

    def check(db: str, commit: str = "a" * 40, window: str | None = None) -> tuple[bool, int | None]:
        settings = Settings.load(repo=repo, db=db)
        with look_up(settings, identity_key(commit, ident, window or settings.window.key())) as got:
            return got.decided, got.found

    db = f"sqlite:///{tmp_path / 'kb.db'}"
    assert check(db) == (True, None) and not (tmp_path / "kb.db").exists()  # no store file
    (tmp_path / "empty.db").write_bytes(b"")  # a store still to be created: nothing stored (the file is read first)
    assert check(f"sqlite:///{tmp_path / 'empty.db'}") == (True, None) and (tmp_path / "empty.db").read_bytes() == b""
    b = snap(export, db=db, repo=repo).baseline
    assert check(db, commit=b.commit) == (True, b.id)
    assert check(db) == (True, None)  # another commit
    assert check(db, commit=b.commit, window="other") == (True, None)
    foreign = tmp_path / "other.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE t (x)")
    con.close()
    old_schema_copy(db, tmp_path / "old.db")
    for path in (foreign, tmp_path / "old.db"):
        before = path.read_bytes()
        assert check(f"sqlite:///{path}", commit=b.commit) == (False, None)
        assert path.read_bytes() == before
    with look_up(Settings.load(repo=repo, db=f"postgresql://u@127.0.0.1:{free_port()}/none"), None) as got:
        assert not got.decided and got.unreachable is not None and "cannot connect" in got.unreachable.message


@pytest.mark.slow
def test_a_miss_costs_no_store_stack(tmp_path, repo):
    """A file not in the store is looked up with one sqlite3 query: SQLAlchemy is never imported."""
    from helpers.imports import loaded

    stored, other = make_tiny_export(tmp_path / "a.sqlite"), make_tiny_export(tmp_path / "b.sqlite", steps=5)
    db = f"sqlite:///{tmp_path / 'kb.db'}"
    snap(stored, db=db, repo=repo)
    rc, heavy = loaded("top", str(other), "--db", db, "--repo", str(repo), cwd=tmp_path)
    assert rc == 0 and "sqlalchemy" not in heavy and "numpy" in heavy  # a miss reads the file: numpy, not pandas
    rc, heavy = loaded("top", str(stored), "--db", db, "--repo", str(repo), cwd=tmp_path)
    # the hit reads the stored rows through Python's sqlite3 (the store's one reader): no store stack, no pandas
    assert rc == 0 and not heavy & {"sqlalchemy", "sqlmodel", "pandas", "pyarrow"}, heavy


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["table", "json", "csv", "md", "bmf", "github-benchmark"])
def test_top_from_the_store_is_the_same_on_both_backends(tmp_path, repo, fmt, pg_db_url):
    export = make_tiny_export(tmp_path / "tiny.sqlite")
    db = f"sqlite:///{tmp_path / 'kb.db'}"
    out = []
    for url in (db, pg_db_url):
        snap(export, db=url, repo=repo)
        r = kb("top", str(export), "--db", url, "--repo", str(repo), "-f", fmt, "--wide")
        assert r.rc == 0, r
        out.append(r.stdout)
    assert out[0] == out[1]
    assert "from the store" in out[0] or fmt in ("csv", "bmf", "github-benchmark")


def test_top_of_a_file_in_a_postgresql_store_answers_without_the_store_stack(tmp_path, repo, pg_db_url):
    """The same identity check on PostgreSQL (psycopg2: the store's one reader): a hit answers from the store and
    a miss reads the file, neither loading SQLAlchemy, SQLModel or pandas."""
    from test_imports import loaded

    stored, other = make_tiny_export(tmp_path / "a.sqlite"), make_tiny_export(tmp_path / "b.sqlite", steps=5)
    snap(stored, db=pg_db_url, repo=repo)
    watch = ("sqlalchemy", "sqlmodel", "psycopg", "psycopg2", "pandas", "pyarrow")
    for export in (stored, other):
        rc, heavy = loaded("top", str(export), "--db", pg_db_url, "--repo", str(repo), cwd=tmp_path, watch=watch)
        assert rc == 0 and heavy == {"psycopg2"}, heavy
    r = kb("top", str(stored), "--db", pg_db_url, "--repo", str(repo), "-f", "json")
    assert r.rc == 0 and "from the store" in r.stdout

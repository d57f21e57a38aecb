"""Issue 12: an export whose committed state is not all in its main file is read as committed.

- WAL mode with committed rows still in ``-wal`` (the writer did not checkpoint): those rows are
  read. A ``-wal`` beside a rollback-mode database is applied too: SQLite opens a WAL whenever the file
  is there, whatever the header's journal mode says (issue 29; it was wrongly ignored before).
- A hot ``-journal`` (a transaction that never committed, part-written to the main file): the
  export is read as it was before that transaction.
- Either way, through a private temporary copy: the user's files are byte-identical afterwards, no
  ``-shm`` or other file appears beside them, and the temporary copy is gone.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kbase.readers import read_profile
from kbase.synth.generate import ExportSpec, generate_export

from helpers.kineto_traces import folder_state
from helpers.sqlite_files import HOT_JOURNAL_WRITER

K = "CUPTI_ACTIVITY_KIND_KERNEL"


@pytest.fixture(scope="module")
def base_export(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("base") / "base.sqlite"
    generate_export(path, ExportSpec(n_gpus=1, iterations=4, seed=5))
    return path


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    """Where kbase's temporary copies go during the test (to check they are removed)."""
    d = tmp_path / "tmpdir"
    d.mkdir()
    monkeypatch.setenv("TMPDIR", str(d))
    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    return d


def _count(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT count(*) FROM {K}").fetchone()[0]
    finally:
        conn.close()


def wal_export(base: Path, folder: Path, extra_rows: int = 40) -> tuple[Path, int]:
    """A WAL-mode export whose last ``extra_rows`` kernel rows are committed in its -wal only."""
    folder.mkdir()
    work = folder.parent / "writer.sqlite"
    shutil.copyfile(base, work)
    conn = sqlite3.connect(work)
    conn.execute("PRAGMA journal_mode=WAL").fetchall()
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute(f"INSERT INTO {K} SELECT * FROM {K} ORDER BY rowid DESC LIMIT {extra_rows}")
    conn.commit()
    # snapshot the database and its -wal while the writer holds them (closing would checkpoint)
    shutil.copyfile(work, folder / "export.sqlite")
    shutil.copyfile(str(work) + "-wal", folder / "export.sqlite-wal")
    expected = conn.execute(f"SELECT count(*) FROM {K}").fetchone()[0]
    conn.close()
    return folder / "export.sqlite", expected


def test_committed_rows_in_the_wal_are_read(base_export, tmp_path, private_tmp):
    path, expected = wal_export(base_export, tmp_path / "user")
    ro = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    stale = ro.execute(f"SELECT count(*) FROM {K}").fetchone()[0]
    ro.close()
    assert stale < expected  # the bug: immutable mode reads without the -wal
    before = folder_state(path.parent)
    prof = read_profile(path)
    assert len(prof.kernels) == expected
    assert prof.source == path
    assert folder_state(path.parent) == before  # no -shm, nothing rewritten
    assert list(private_tmp.iterdir()) == []  # the private copy is gone


def _sqlite_reads(db: Path) -> int:
    """The kernel rows SQLite itself reads from ``db`` with its side files, opened normally (on a copy)."""
    work = db.parent.parent / "sqlite-itself"
    work.mkdir()
    for f in db.parent.iterdir():
        shutil.copyfile(f, work / f.name)
    n = _count(work / db.name)
    shutil.rmtree(work)
    return n


def test_a_wal_beside_a_rollback_database_is_applied_as_sqlite_does(base_export, tmp_path, private_tmp):
    path, expected = wal_export(base_export, tmp_path / "user")
    other = tmp_path / "plain"
    other.mkdir()
    shutil.copyfile(base_export, other / "export.sqlite")  # rollback mode (header bytes 18/19 are 1)
    assert (other / "export.sqlite").read_bytes()[18:20] == b"\x01\x01"
    shutil.copyfile(str(path) + "-wal", other / "export.sqlite-wal")
    before = folder_state(other)
    sqlite_itself = _sqlite_reads(other / "export.sqlite")
    assert sqlite_itself == expected > _count(base_export)  # SQLite applies it
    prof = read_profile(other / "export.sqlite")
    assert len(prof.kernels) == sqlite_itself
    assert folder_state(other) == before and list(private_tmp.iterdir()) == []




def test_a_hot_journal_is_rolled_back_in_a_private_copy(base_export, tmp_path, private_tmp):
    user = tmp_path / "user"
    user.mkdir()
    path = user / "export.sqlite"
    shutil.copyfile(base_export, path)
    subprocess.run([sys.executable, "-c", HOT_JOURNAL_WRITER, str(path)], check=True)
    journal = Path(str(path) + "-journal")
    if not journal.is_file() or journal.stat().st_size == 0:
        pytest.skip("this SQLite build left no hot journal")
    before = folder_state(user)
    prof = read_profile(path)
    assert len(prof.kernels) == _count(base_export)
    assert folder_state(user) == before and list(private_tmp.iterdir()) == []


def test_an_unreadable_wal_is_one_clear_line(base_export, tmp_path, private_tmp):
    if os.geteuid() == 0:
        pytest.skip("running as root: file modes do not stop reads")
    path, _ = wal_export(base_export, tmp_path / "user")
    wal = Path(str(path) + "-wal")
    wal.chmod(0)
    try:
        from kbase.errors import InputError

        with pytest.raises(InputError, match="-wal"):
            read_profile(path)
    finally:
        wal.chmod(0o644)

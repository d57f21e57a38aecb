"""Issue 29, class 1: never answer for content that was not read; SQLite side files. After an export is snapshotted, a
``-wal`` that gains committed frames, appears (beside a WAL-mode *or* a rollback-mode export: SQLite applies both),
vanishes (checkpointed), or is replaced at the same size, and a hot ``-journal`` that appears, must make ``kbase top
FILE`` read the file again (never "from the store") and ``kbase snapshot`` store the new content (never "already
stored").

Each runs twice (``mode``: files hashed whole, and the metadata identity of large files). The answer after the
change is checked against a fresh read (``--no-store``)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.sqlite_files import HOT_JOURNAL_WRITER
from helpers.stale_identity import K, assert_never_stale, keep_times

# ------------------------------------------------------------------------------------------ SQLite side files


class Writer:
    """A process-local SQLite writer on a copy of an export, in WAL mode, never checkpointing: its main file
    stays as it is while its -wal gains committed frames, which ``publish`` copies beside the user's file."""

    def __init__(self, base: Path, work: Path, wal: bool = True) -> None:
        shutil.copyfile(base, work)
        self.work = work
        self.conn = sqlite3.connect(work, isolation_level=None)
        if wal:
            self.conn.execute("PRAGMA journal_mode=WAL").fetchall()
            self.conn.execute("PRAGMA wal_autocheckpoint=0")

    def grow(self, rows: int = 200, factor: int = 10) -> None:
        """Commit ``rows`` more kernels (copies of the last ones, ``factor`` x longer: the totals change)."""
        self.conn.execute(f"INSERT INTO {K} SELECT start, start + {factor} * (end - start), deviceId, contextId, "
                          f"greenContextId, streamId, correlationId, globalPid, demangledName, shortName, "
                          f"mangledName, launchType, cacheConfig, registersPerThread, gridX, gridY, gridZ, blockX, "
                          f"blockY, blockZ, staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, "
                          f"localMemoryTotal, gridId, sharedMemoryExecuted, graphNodeId, sharedMemoryLimitConfig, "
                          f"qmdBulkReleaseDone, qmdPreexitDone, qmdLastCtaDone, graphId, clusterX, clusterY, clusterZ, "
                          f"clusterSchedulingPolicy, maxPotentialClusterSize, maxActiveClusters, "
                          f"sharedMemoryRequestedPercentage, tensorSizeMinusOneElements FROM {K} "
                          f"ORDER BY rowid DESC LIMIT {rows}")

    def publish(self, dest: Path, main: bool = True) -> None:
        if main:
            shutil.copyfile(self.work, dest)
        wal = Path(str(self.work) + "-wal")
        if wal.exists():
            shutil.copyfile(wal, str(dest) + "-wal")

    def close(self) -> None:
        self.conn.close()


def test_wal_gains_committed_frames(exports, world, mode):
    """The issue's case: the main file's bytes, size and mtime stay; only the -wal grows."""
    path = world["user"] / "export.sqlite"
    w = Writer(exports["a"], world["tmp"] / "writer.sqlite")
    w.grow()
    w.publish(path)
    main_bytes = path.read_bytes()

    def change():
        restore = keep_times(path)
        w.grow(2000)
        w.publish(path, main=False)
        restore()
        assert path.read_bytes() == main_bytes

    assert_never_stale(world, path, change)
    w.close()


@pytest.mark.parametrize("journal_mode", ["wal", "rollback"])
def test_a_wal_appears(exports, world, mode, journal_mode):
    """Committed frames appear beside an export that had none; SQLite applies them whatever the header says."""
    path = world["user"] / "export.sqlite"
    shutil.copyfile(exports["a"], path)
    w = Writer(exports["a"], world["tmp"] / "writer.sqlite")
    if journal_mode == "wal":
        w.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        w.publish(path)  # the main file in WAL mode, with an empty -wal
        Path(str(path) + "-wal").unlink()

    def change():
        restore = keep_times(path)
        w.grow(2000)
        w.publish(path, main=False)
        restore()

    assert_never_stale(world, path, change)
    w.close()


def test_the_wal_vanishes(exports, world, mode):
    """Snapshotted with committed frames in its -wal; then the -wal is gone (deleted, or checkpointed by a
    tool that then rewrote the main file with the mtime put back)."""
    path = world["user"] / "export.sqlite"
    w = Writer(exports["a"], world["tmp"] / "writer.sqlite")
    w.grow(2000)
    w.publish(path)
    assert_never_stale(world, path, lambda: Path(str(path) + "-wal").unlink())
    w.close()


def test_the_wal_is_replaced_at_the_same_size(exports, world, mode):
    """Another -wal of the same length, frames of other rows, its mtime put back."""
    path = world["user"] / "export.sqlite"
    w1 = Writer(exports["a"], world["tmp"] / "w1.sqlite")
    w1.grow(2000)
    w1.publish(path)
    w2 = Writer(exports["a"], world["tmp"] / "w2.sqlite")
    w2.grow(2000, factor=11)  # the same pages, other values
    other = Path(str(w2.work) + "-wal")
    wal = Path(str(path) + "-wal")

    def change():
        if other.stat().st_size != wal.stat().st_size:
            pytest.skip("the two writers' -wal files differ in size on this SQLite build")
        restore = keep_times(wal)
        shutil.copyfile(other, wal)
        restore()

    assert_never_stale(world, path, change)
    w1.close()
    w2.close()


def test_a_hot_journal_appears(exports, world, mode):
    """A writer died mid-transaction on the snapshotted file: its pages are half written, a -journal says how
    to roll them back (SQLite does; so does kbase, and the identity sees the journal)."""
    path = world["user"] / "export.sqlite"
    shutil.copyfile(exports["a"], path)

    def change():
        restore = keep_times(path)
        subprocess.run([sys.executable, "-c", HOT_JOURNAL_WRITER, str(path)], check=True)
        restore()
        if not Path(str(path) + "-journal").is_file():
            pytest.skip("this SQLite build left no hot journal")

    assert_never_stale(world, path, change)

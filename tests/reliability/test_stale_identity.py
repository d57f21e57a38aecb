"""Issue 29, class 1: never answer for content that was not read. After a profile is snapshotted, every way its
content can change while the cheap metadata stays (size, mtime, first and last bytes) must make ``kbase top
FILE`` read the file again (never "from the store") and ``kbase snapshot`` store the new content (never
"already stored"):

- SQLite side files: a ``-wal`` that gains committed frames, appears (beside a WAL-mode *or* a rollback-mode
  export: SQLite applies both), vanishes (checkpointed), or is replaced at the same size; a hot ``-journal``
  that appears;
- the main file: pages rewritten in place at the same size with the mtime put back, pages of another capture
  spliced in, the file replaced by ``mv``, written through a hard link;
- a symlink pointed at an edited copy;
- Kineto traces (``.json``, ``.json.gz``) edited in place, and folders of per-rank traces (a rank edited,
  added, renamed).

Each runs twice: with files hashed whole (what the identity does up to ``FULL_HASH_BYTES``) and with the
metadata identity of large files (device, inode, size, mtime, ctime, first/last 64 KiB), by setting
``FULL_HASH_BYTES`` to 0. The answer after the change is checked against a fresh read (``--no-store``)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import kb
from helpers.kineto_traces import make_run, trace_doc, write_trace
from helpers.sqlite_files import HOT_JOURNAL_WRITER

FROM_STORE = "from the store"
K = "CUPTI_ACTIVITY_KIND_KERNEL"


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture(params=["whole-file hash", "metadata identity"])
def mode(request, monkeypatch) -> str:
    import kbase.readers.source as source

    if request.param == "metadata identity":
        monkeypatch.setattr(source, "FULL_HASH_BYTES", 0)
        monkeypatch.setattr(source, "RACY_NS", 0)  # the files are made moments before; the racy rule has its test
    return request.param


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("exports")
    return {"a": generate_export(d / "a.sqlite", ExportSpec(n_gpus=1, iterations=4, seed=11)).path,
            "b": generate_export(d / "b.sqlite", ExportSpec(n_gpus=1, iterations=4, seed=12)).path}


@pytest.fixture
def world(tmp_path) -> dict[str, Path]:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    user = tmp_path / "user"
    user.mkdir()
    return {"repo": repo, "db": tmp_path / "kb.db", "user": user, "tmp": tmp_path}


def top(world: dict[str, Path], path: Path, *extra: str) -> dict:
    r = kb("top", path, "--repo", world["repo"], "--db", world["db"], "-f", "json", "--limit", "0", *extra)
    assert r.rc == 0, r
    return json.loads(r.stdout)


def snapshot(world: dict[str, Path], path: Path):
    return kb("snapshot", path, "--repo", world["repo"], "--db", world["db"], "-f", "json")


def board(doc: dict) -> tuple:
    return doc["summary"]["total_kernel_ns"], sorted((k["name"], k["count"], k["total_ns"]) for k in doc["kernels"])


def keep_times(path: Path) -> Callable[[], None]:
    """A function that puts ``path``'s atime and mtime back as they are now (what an adversary does)."""
    st = os.stat(path)
    return lambda: os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def assert_never_stale(world: dict[str, Path], path: Path, change: Callable[[], None]) -> None:
    r = snapshot(world, path)
    assert r.rc == 0, r
    stored = top(world, path)
    assert any(FROM_STORE in n for n in stored["notes"]), "the unchanged file should answer from the store"
    size = path.stat().st_size if path.is_file() else None
    change()
    if size is not None and path.is_file():
        assert path.stat().st_size == size, "the change was meant to keep the size"
    fresh = top(world, path, "--no-store")
    after = top(world, path)
    assert not any(FROM_STORE in n for n in after["notes"]), "answered from the store for changed content"
    assert board(after) == board(fresh)
    again = snapshot(world, path)
    assert again.rc == 0 and "already stored" not in again.stdout + again.stderr, again
    assert top(world, path)["summary"]["total_kernel_ns"] == fresh["summary"]["total_kernel_ns"]


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


# ------------------------------------------------------------------------------------------ the main file


def _rewrite_in_place(path: Path) -> None:
    """Change durations through SQLite in place (rollback mode: pages rewritten where they are), then put
    the mtime back; the size stays."""
    restore = keep_times(path)
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=DELETE").fetchall()
        conn.execute(f"UPDATE {K} SET end = end + 1 WHERE rowid % 3 = 0")
    conn.close()
    restore()


def _splice(path: Path, other: Path) -> None:
    """Pages of another capture written over the middle of the file, the mtime put back."""
    restore = keep_times(path)
    page = 4096
    size = path.stat().st_size
    with open(other, "rb") as src, open(path, "r+b") as dst:
        lo, hi = (size // 3) // page * page, (2 * size // 3) // page * page
        src.seek(lo)
        dst.seek(lo)
        dst.write(src.read(hi - lo))
    restore()


@pytest.mark.parametrize("how", ["rewritten in place", "spliced", "replaced by mv", "written through a hard link"])
def test_main_file_changed_with_size_and_mtime_kept(exports, world, mode, how):
    path = world["user"] / "export.sqlite"
    shutil.copyfile(exports["a"], path)
    if how == "spliced" and exports["b"].stat().st_size < path.stat().st_size:
        pytest.skip("the other capture is smaller")

    def change():
        if how == "rewritten in place":
            _rewrite_in_place(path)
        elif how == "spliced":
            _splice(path, exports["b"])
        elif how == "replaced by mv":
            edited = world["tmp"] / "edited.sqlite"
            shutil.copyfile(path, edited)
            _rewrite_in_place(edited)
            st = path.stat()
            os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns))
            os.replace(edited, path)
        else:
            link = world["tmp"] / "hardlink.sqlite"
            os.link(path, link)
            restore = keep_times(path)
            _rewrite_in_place(link)
            restore()

    if how == "spliced":  # spliced pages may make a damaged file: then exit 2, never a stored answer
        r = snapshot(world, path)
        assert r.rc == 0, r
        change()
        after = kb("top", path, "--repo", world["repo"], "--db", world["db"], "-f", "json")
        assert after.rc in (0, 2) and FROM_STORE not in after.stdout, after
        if after.rc == 0:
            fresh = top(world, path, "--no-store")
            assert board(json.loads(after.stdout)) == board(fresh)
        return
    assert_never_stale(world, path, change)


def test_a_symlink_pointed_at_an_edited_copy(exports, world, mode):
    target = world["user"] / "a.sqlite"
    shutil.copyfile(exports["a"], target)
    edited = world["user"] / "a-edited.sqlite"
    shutil.copyfile(target, edited)
    _rewrite_in_place(edited)
    st = target.stat()
    os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size, same mtime, other content
    link = world["user"] / "current.sqlite"
    link.symlink_to(target)

    def change():
        link.unlink()
        link.symlink_to(edited)

    assert_never_stale(world, link, change)


# ------------------------------------------------------------------------------------------ Kineto


def _edit_json_in_place(path: Path) -> None:
    """One kernel's duration changed digit for digit, the file's size kept (gzip: the first edit whose
    compressed size is the old one), the mtime put back."""
    restore = keep_times(path)
    raw = path.read_bytes()
    gz = raw[:2] == b"\x1f\x8b"
    text = gzip.decompress(raw).decode() if gz else raw.decode()
    for old_dur in sorted({m for m in __import__("re").findall(r'"dur": (\d+\.\d+)', text)}):
        for digit in "123456789":
            new_dur = old_dur[:-1] + digit
            if new_dur == old_dur:
                continue
            edited = text.replace(f'"dur": {old_dur}', f'"dur": {new_dur}', 1).encode()
            out = gzip.compress(edited, mtime=0) if gz else edited
            if len(out) == len(raw):
                path.write_bytes(out)
                restore()
                return
    pytest.skip("no same-size edit found")


@pytest.mark.parametrize("name", ["t.json", "t.json.gz"])
def test_a_kineto_trace_edited_in_place(world, mode, name):
    path = write_trace(world["user"] / name, trace_doc(rank=0, world=None, steps=5))
    assert_never_stale(world, path, lambda: _edit_json_in_place(path))


@pytest.mark.parametrize("how", ["a rank edited", "a rank added", "a rank renamed"])
def test_a_folder_of_rank_traces_changed(world, mode, how):
    folder = world["user"] / "ranks"
    folder.mkdir()
    files = make_run(folder, world=2, steps=5)

    def change():
        if how == "a rank edited":
            _edit_json_in_place(files[1])
        elif how == "a rank added":
            doc = trace_doc(rank=1, world=2, steps=5)
            for e in doc["traceEvents"]:
                if e.get("cat") == "kernel":
                    e["dur"] = float(e["dur"]) * 3
            write_trace(folder / "zz_extra.json", doc)
            files[1].unlink()
        else:
            files[1].rename(folder / ("renamed-" + files[1].name))

    if how == "a rank renamed":  # the same content under another name reads the same: any answer is current
        r = snapshot(world, folder)
        assert r.rc == 0, r
        change()
        after = top(world, folder)
        assert board(after) == board(top(world, folder, "--no-store"))
        return
    assert_never_stale(world, folder, change)


# ------------------------------------------------------------------------------------------ the identity itself


def test_an_unchanged_file_and_a_copy(exports, world, mode):
    """Controls: the same file answers from the store; a copy elsewhere (other inode) does when its content
    identity is exact (whole-file hash, mtime kept), and is read again otherwise (correct, only slower)."""
    path = world["user"] / "export.sqlite"
    shutil.copyfile(exports["a"], path)
    assert snapshot(world, path).rc == 0
    assert any(FROM_STORE in n for n in top(world, path)["notes"])
    copy = world["tmp"] / "elsewhere" / "export.sqlite"
    copy.parent.mkdir()
    shutil.copy2(path, copy)
    notes = top(world, copy)["notes"]
    assert any(FROM_STORE in n for n in notes) == (mode == "whole-file hash")


def test_a_file_changed_moments_ago_is_never_stored_by_identity(exports, world, monkeypatch):
    """The racy rule: a large file whose ctime is within ``RACY_NS`` of the identity may still change inside the
    file system's timestamp granularity; its identity is unsure, so ``top`` reads it even after a snapshot."""
    import kbase.readers.source as source

    monkeypatch.setattr(source, "FULL_HASH_BYTES", 0)
    path = world["user"] / "export.sqlite"
    shutil.copyfile(exports["a"], path)  # ctime: now
    assert source.source_identity(path).probe is None
    r = snapshot(world, path)
    assert r.rc == 0, r
    assert not any(FROM_STORE in n for n in top(world, path)["notes"])
    monkeypatch.setattr(source, "RACY_NS", 0)  # the same file taken as old enough, in a new store: found
    world["db"] = world["tmp"] / "other.db"
    assert snapshot(world, path).rc == 0
    assert any(FROM_STORE in n for n in top(world, path)["notes"])


def test_a_file_changed_while_it_is_read_is_refused(exports, world, monkeypatch):
    """What was read, hashed and identified must be one state of the file: a change during the read is exit 2
    and nothing is stored."""
    import kbase.api.capture as capture

    path = world["user"] / "export.sqlite"
    shutil.copyfile(exports["a"], path)
    real = capture._board

    def board_then_edit(*args, **kwargs):
        lb = real(*args, **kwargs)
        _rewrite_in_place(path)
        return lb

    monkeypatch.setattr(capture, "_board", board_then_edit)
    r = snapshot(world, path)
    assert r.rc == 2 and "changed while kbase read it" in r.stderr, r
    monkeypatch.setattr(capture, "_board", real)
    assert kb("list", "--db", world["db"], "-f", "json").stdout.count('"id"') == 0

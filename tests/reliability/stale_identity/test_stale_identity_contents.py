"""Issue 29, class 1: never answer for content that was not read; the profile's own content. After a profile is
snapshotted, every way its content can change while the cheap metadata stays (size, mtime, first and last bytes)
must make ``kbase top FILE`` read the file again and ``kbase snapshot`` store the new content:

- the main file: pages rewritten in place at the same size with the mtime put back, pages of another capture spliced
in, the file replaced by ``mv``, written through a hard link; - a symlink pointed at an edited copy; - Kineto traces
(``.json``, ``.json.gz``) edited in place, and folders of per-rank traces (a rank edited, added, renamed); - the
identity itself: an unchanged file and a copy answer from the store; a file changed moments ago is never stored by
identity; a file changed while it is read is refused.

Each runs twice (``mode``: files hashed whole up to ``FULL_HASH_BYTES``, and the metadata identity of large files:
device, inode, size, mtime, ctime, first/last 64 KiB). The answer after the change is checked against a fresh read
(``--no-store``)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from helpers.cli import kb
from helpers.kineto_traces import make_run, trace_doc, write_trace
from helpers.stale_identity import FROM_STORE, K, assert_never_stale, board, keep_times, snapshot, top

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

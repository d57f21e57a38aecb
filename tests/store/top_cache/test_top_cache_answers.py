"""The top cache (``store.top_cache``), its answers: ``kbase top FILE`` of a file it computed before answers from
``cache/`` beside the store, byte for byte as reading the file, without numpy (and, from the ``kbase`` script,
without Typer); a changed file, another window or view, ``--no-cache`` / ``--no-store`` and ``cache_max_mb = 0``
read the file."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli import kb
from helpers.shared import REPO
from helpers.top_cache import _board_calls, entries

FORMATS = ["table", "json", "csv", "md", "bmf", "github-benchmark"]


K = "CUPTI_ACTIVITY_KIND_KERNEL"


def script(*args: object, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The ``kbase`` script itself (``kbase.cli.__main__``: the fast path first), in a child process."""
    full = {**{k: v for k, v in os.environ.items() if not k.startswith("KBASE_")}, "COLUMNS": "200",
            "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "kbase.cli", *map(str, args)], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=120)


_PROBE = """
import atexit, json, sys
sys.argv = ["kbase", *json.loads(sys.argv[1])]
atexit.register(lambda: sys.stderr.write("\\nMODULES " + json.dumps(sorted(
    m for m in ("numpy", "pandas", "typer", "sqlalchemy", "rich") if m in sys.modules))))
from kbase.cli.__main__ import run
run()
"""


def script_modules(*args: object, cwd: Path) -> tuple[int, str, set[str]]:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KBASE_")}, "KBASE_NO_FAST_EXIT": "1",
           "COLUMNS": "200", "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(list(map(str, args)))], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=120)
    head, _, tail = p.stderr.rpartition("\nMODULES ")
    assert tail, p.stderr[-2000:]
    return p.returncode, p.stdout, set(json.loads(tail))


# ------------------------------------------------------------------------------------------ the same answer


@pytest.mark.parametrize("extra", [(), ("--per-gpu",), ("--wide",), ("--full-names",), ("-q",), ("-n", "3")])
def test_every_format_answers_the_same_from_the_cache(world, extra):
    """In process (the Typer path): the first run computes and keeps; the second answers from the entry (the
    reader is not called); both print exactly what ``--no-cache`` prints."""
    import kbase.api.capture as capture

    for fmt in FORMATS:
        if fmt in ("bmf", "github-benchmark") and "--per-gpu" in extra:
            continue
        args = ("top", world["profile"], "--db", world["db"], "-f", fmt, *extra)
        fresh = kb(*args, "--no-cache")
        first = kb(*args)
        assert fresh.rc == first.rc == 0, first
        real = capture._board
        try:
            capture._board = None  # type: ignore[assignment] - a read would fail
            cached = kb(*args)
        finally:
            capture._board = real
        assert cached.rc == 0, cached
        assert cached.stdout == first.stdout == fresh.stdout, fmt
    assert len(entries(world)) == 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_script_answers_from_the_cache_without_numpy_or_typer(world, fmt):
    """``kbase top FILE`` from the script: a cached answer loads neither numpy nor Typer (JSON: nor rich), and
    prints what the command line prints (``KBASE_NO_FAST_TOP=1``) and what reading the file prints."""
    args = ("top", world["profile"], "--db", world["db"], "-f", fmt)
    first = script(*args, cwd=world["cwd"])
    assert first.returncode == 0, first.stderr
    rc, out, heavy = script_modules(*args, cwd=world["cwd"])
    assert rc == 0 and out == first.stdout
    assert not heavy & {"numpy", "pandas", "typer", "sqlalchemy"}, heavy
    if fmt != "table":
        assert "rich" not in heavy
    typer_path = script(*args, cwd=world["cwd"], env={"KBASE_NO_FAST_TOP": "1"})
    fresh = script(*args, "--no-cache", cwd=world["cwd"])
    assert typer_path.stdout == fresh.stdout == out


def test_real_exports_answer_the_same_from_the_cache(shared_data, tmp_path):
    db = tmp_path / "kb.db"
    for path in sorted((shared_data / "nsys").glob("*.sqlite")):
        for fmt in ("table", "json", "bmf"):
            args = ("top", path, "--db", db, "-f", fmt)
            fresh = script(*args, "--no-cache", cwd=tmp_path)
            script(*args, cwd=tmp_path)
            rc, out, heavy = script_modules(*args, cwd=tmp_path)
            assert rc == 0 and "numpy" not in heavy, path
            assert out == fresh.stdout, (path.name, fmt)


def test_a_file_rewritten_in_place_with_its_mtime_put_back_is_read_again(world, monkeypatch):
    calls = _board_calls(monkeypatch)
    args = ("top", world["profile"], "--db", world["db"], "-f", "json", "-n", "0")
    before = kb(*args)
    st = world["profile"].stat()
    with sqlite3.connect(world["profile"]) as conn:
        conn.execute("PRAGMA journal_mode=DELETE").fetchall()
        conn.execute(f"UPDATE {K} SET end = end + 1000 WHERE rowid % 3 = 0")
    conn.close()
    os.utime(world["profile"], ns=(st.st_atime_ns, st.st_mtime_ns))
    assert world["profile"].stat().st_size == st.st_size
    after = kb(*args)
    assert len(calls) == 2, "the rewritten file was answered from the cache"
    assert json.loads(after.stdout)["summary"]["total_kernel_ns"] != json.loads(before.stdout)["summary"][
        "total_kernel_ns"]
    assert after.stdout == kb(*args, "--no-cache").stdout
    assert len(calls) == 3 and kb(*args).stdout == after.stdout and len(calls) == 3


def test_large_files_use_the_metadata_identity(world, monkeypatch):
    """Above ``FULL_HASH_BYTES`` the identity is device, inode, size, times and the ends of the file: a
    rewrite in place changes the ctime, so it is read again; a file written moments ago is unsure and is
    neither looked up nor kept."""
    import kbase.readers.source as source

    monkeypatch.setattr(source, "FULL_HASH_BYTES", 0)
    calls = _board_calls(monkeypatch)
    args = ("top", world["profile"], "--db", world["db"], "-f", "json")
    assert kb(*args).rc == 0 and entries(world) == []  # made moments ago: unsure
    monkeypatch.setattr(source, "RACY_NS", 0)
    kb(*args)
    kb(*args)
    assert len(calls) == 2 and len(entries(world)) == 1
    with open(world["profile"], "r+b") as fh:  # a byte in the middle, the mtime put back
        st = os.fstat(fh.fileno())
        fh.seek(st.st_size // 2)
        b = fh.read(1)
        fh.seek(st.st_size // 2)
        fh.write(b)
    os.utime(world["profile"], ns=(st.st_atime_ns, st.st_mtime_ns))
    kb(*args)
    assert len(calls) == 3


@pytest.mark.parametrize("flag", ["--no-cache", "--no-store"])
def test_no_cache_and_no_store_read_the_file_and_keep_nothing(world, monkeypatch, flag):
    calls = _board_calls(monkeypatch)
    args = ("top", world["profile"], "--db", world["db"])
    assert kb(*args, flag).rc == 0 and entries(world) == []
    kb(*args)
    kb(*args, flag)
    assert len(calls) == 3 and len(entries(world)) == 1


def test_another_window_view_or_path_is_another_entry(world, monkeypatch):
    calls = _board_calls(monkeypatch)
    base = ("top", world["profile"], "--db", world["db"], "-f", "json")
    for extra in [(), ("--warmup", "0"), ("--per-gpu",), ()]:
        kb(*base, *extra)
    assert len(calls) == 3 and len(entries(world)) == 3
    link = world["user"] / "same.sqlite"
    os.link(world["profile"], link)
    doc = json.loads(kb("top", link, "--db", world["db"], "-f", "json").stdout)
    assert len(calls) == 4 and doc["summary"]["source"] == str(link)  # the summary names the path as given


def test_cache_max_mb_zero_turns_it_off_and_a_bad_value_is_one_line(world, monkeypatch):
    args = ("top", world["profile"], "--db", world["db"])
    monkeypatch.setenv("KBASE_CACHE_MAX_MB", "0")
    assert kb(*args).rc == 0 and entries(world) == []
    monkeypatch.setenv("KBASE_CACHE_MAX_MB", "lots")
    r = kb(*args)
    assert r.rc == 2 and r.stderr.count("\n") == 1 and "KBASE_CACHE_MAX_MB=lots" in r.stderr
    assert "Traceback" not in r.stderr

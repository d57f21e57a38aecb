"""The top cache (``store.top_cache``): ``kbase top FILE`` of a file it computed before answers from ``cache/``
beside the store, byte for byte as reading the file, without numpy (and, from the ``kbase`` script, without
Typer); a changed file, another window or view, ``--no-cache`` / ``--no-store`` and ``cache_max_mb = 0`` read
the file; damaged, foreign or oversized entries are misses, never errors; writers rename a finished file; the
folder stays under its cap, least recently used out; nothing is written beside or inside the profile."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import kbase
from kbase.settings import Settings
from kbase.store.read import top_cache
from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import kb
from helpers.shared import REPO

FORMATS = ["table", "json", "csv", "md", "bmf", "github-benchmark"]
K = "CUPTI_ACTIVITY_KIND_KERNEL"


@pytest.fixture(autouse=True)
def _cache_on(monkeypatch) -> None:
    monkeypatch.delenv("KBASE_CACHE_MAX_MB", raising=False)  # (the suite's conftest turns it off elsewhere)


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("exports")
    return {"a": generate_export(d / "a.sqlite", ExportSpec(n_gpus=2, iterations=5, seed=21)).path,
            "b": generate_export(d / "b.sqlite", ExportSpec(n_gpus=2, iterations=5, seed=22)).path}


@pytest.fixture
def world(tmp_path, exports) -> dict[str, Path]:
    """A user's folder holding a copy of export ``a``, and a store folder elsewhere."""
    user = tmp_path / "user"
    user.mkdir()
    shutil.copyfile(exports["a"], user / "a.sqlite")
    return {"profile": user / "a.sqlite", "user": user, "db": tmp_path / "kb" / "kb.db", "cwd": tmp_path}


def entries(world: dict[str, Path]) -> list[Path]:
    folder = world["db"].parent / "cache"
    return sorted(folder.glob("top-*.kbtc")) if folder.is_dir() else []


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


# ------------------------------------------------------------------------------------------ what reads the file


def _board_calls(monkeypatch) -> list[int]:
    import kbase.api.capture as capture

    calls: list[int] = []
    real = capture._board

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(capture, "_board", counted)
    return calls


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


# ------------------------------------------------------------------------------------------ damaged entries


def _entry(world) -> Path:
    kb("top", world["profile"], "--db", world["db"])
    (found,) = entries(world)
    return found


@pytest.mark.parametrize("damage", ["garbage", "truncated", "one bit", "empty", "other key", "folder", "huge"])
def test_a_damaged_or_foreign_entry_is_a_miss_never_an_error(world, exports, monkeypatch, damage):
    entry = _entry(world)
    data = entry.read_bytes()
    if damage == "garbage":
        entry.write_bytes(b"\x00\xff not a cache entry" * 50)
    elif damage == "truncated":
        entry.write_bytes(data[: len(data) // 2])
    elif damage == "one bit":
        entry.write_bytes(data[:-40] + bytes([data[-40] ^ 1]) + data[-39:])
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "other key":  # another file's entry under this one's name
        other = world["user"] / "b.sqlite"
        shutil.copyfile(exports["b"], other)
        kb("top", other, "--db", world["db"])
        (b_entry,) = [p for p in entries(world) if p != entry]
        shutil.copyfile(b_entry, entry)
    elif damage == "folder":
        entry.unlink()
        entry.mkdir()
    elif damage == "huge":
        monkeypatch.setenv("KBASE_CACHE_MAX_MB", "1")
        with open(entry, "ab") as fh:
            fh.truncate(2 << 20)
    calls = _board_calls(monkeypatch)
    fresh = kb("top", world["profile"], "--db", world["db"], "--no-cache", "-f", "json")
    r = kb("top", world["profile"], "--db", world["db"], "-f", "json")
    assert r.rc == 0 and r.stderr == "" and r.stdout == fresh.stdout, r
    assert len(calls) == 2, "the damaged entry was used"
    if damage not in ("folder", "huge"):
        assert kb("top", world["profile"], "--db", world["db"], "-f", "json").stdout == fresh.stdout
        assert len(calls) == 2, "the entry was not written again"


def test_an_unwritable_cache_folder_is_never_an_error(world):
    world["db"].parent.mkdir(parents=True)
    (world["db"].parent / "cache").write_text("a file where the folder would be")
    for _ in range(2):
        r = kb("top", world["profile"], "--db", world["db"], "-f", "json")
        assert r.rc == 0 and r.stderr == "", r


def test_decode_refuses_what_it_did_not_write(world):
    lb = kbase.top(world["profile"], Settings.load(db=str(world["db"])))
    key = "k" * 64
    data = top_cache._encode(lb, key)
    assert data is not None and top_cache._decode(data, key) is not None
    assert top_cache._decode(data, "x" * 64) is None
    for cut in (0, 10, len(top_cache.MAGIC) + 30, len(data) - 1):
        assert top_cache._decode(data[:cut], key) is None


# ------------------------------------------------------------------------------------------ writers and the cap


def test_concurrent_writers_leave_one_complete_entry(world):
    settings = Settings.load(db=str(world["db"]))
    lb = kbase.top(world["profile"], settings)
    from kbase.readers.source import source_identity

    entry = top_cache.for_profile(world["profile"], settings, source_identity(world["profile"]), False)
    assert entry is not None
    errors: list[BaseException] = []
    loaded: list[object] = []

    def work() -> None:
        try:
            for _ in range(15):
                assert entry.save(lb)
                got = entry.load()
                if got is not None:  # a reader sees a whole entry or none, never a part
                    loaded.append(got)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and loaded
    assert [p.name for p in entry.folder.iterdir()] == [entry.file.name]  # no temporary file left
    assert entry.load() is not None


def test_the_folder_stays_under_its_cap_least_recently_used_out(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "notes.txt").write_bytes(b"x" * 5000)  # not ours: never counted or removed
    for i in range(6):
        p = folder / f"{top_cache.PREFIX}{i:064x}{top_cache.SUFFIX}"
        p.write_bytes(b"e" * 1000)
        os.utime(p, ns=(i * 10**9, i * 10**9))
    stale = folder / f".{top_cache.PREFIX}abc.tmp"
    stale.write_bytes(b"t")
    os.utime(stale, ns=(0, 0))
    os.utime(folder / f"{top_cache.PREFIX}{0:064x}{top_cache.SUFFIX}")  # entry 0 just used: newest
    top_cache.evict(folder, 3500)
    left = sorted(p.name for p in folder.iterdir())
    assert left == ["notes.txt"] + [f"{top_cache.PREFIX}{i:064x}{top_cache.SUFFIX}" for i in (0, 4, 5)]


def test_a_hit_marks_its_entry_recently_used(world):
    entry = _entry(world)
    os.utime(entry, ns=(0, 0))
    kb("top", world["profile"], "--db", world["db"])
    assert entry.stat().st_mtime_ns > 0


# ------------------------------------------------------------------------------------------ where it lives


def test_the_cache_lives_beside_the_store_never_beside_the_profile(world):
    before = sorted(p.name for p in world["user"].iterdir())
    kb("top", world["profile"], "--db", world["db"])
    assert sorted(p.name for p in world["user"].iterdir()) == before
    assert entries(world) and entries(world)[0].parent == world["db"].parent / "cache"


def test_never_inside_a_profile_folder(tmp_path, monkeypatch):
    """A folder of per-rank traces read from inside it: the default store's ``.kbase/`` would be in the
    profile, so nothing is kept."""
    from helpers.kineto_traces import make_run

    run = tmp_path / "run"
    make_run(run)
    monkeypatch.chdir(run)
    before = sorted(str(p.relative_to(run)) for p in run.rglob("*"))
    r = kb("top", ".")
    assert r.rc == 0, r
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*")) == before


# ------------------------------------------------------------------------------------------ the per-iteration bounds


def test_grouped_bounds_equal_the_loop(exports):
    import numpy as np

    from kbase.analysis import board

    lb = kbase.top(exports["a"], Settings.load(db="sqlite://"))
    names = lb.sample_column("name")
    its, totals = lb.sample_column("iteration"), lb.sample_column("total_ns")

    def loop(n, i, t) -> dict:
        per: dict = {}
        for a, b, c in zip(n.tolist(), i.tolist(), t.tolist()):
            row = per.setdefault(a, {})
            row[b] = row.get(b, 0.0) + float(c)
        return board.bounds_from_samples(per, lb.summary)

    got = board._grouped_bounds(names, its, totals, lb.summary)
    assert got == loop(names, its, totals) and list(got) == list(loop(names, its, totals)) and got
    dup = np.concatenate([np.arange(len(names)), [0, 0]])  # a (name, iteration) twice, in its run
    dup.sort()
    assert board._grouped_bounds(names[dup], its[dup], totals[dup], lb.summary) == loop(names[dup], its[dup],
                                                                                        totals[dup])
    shuffled = np.random.default_rng(1).permutation(len(names))
    assert board._grouped_bounds(names[shuffled], its[shuffled], totals[shuffled], lb.summary) is None

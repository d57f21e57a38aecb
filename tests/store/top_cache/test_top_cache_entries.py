"""The top cache (``store.top_cache``), its entries and folder: damaged, foreign or oversized entries are misses, never
errors; writers rename a finished file; the folder stays under its cap, least recently used out; nothing is written
beside or inside the profile; the per-iteration bounds the entries keep."""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

import pytest

import kbase
from kbase.settings import Settings
from kbase.store.read import top_cache

from helpers.cli import kb
from helpers.top_cache import _board_calls, entries

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

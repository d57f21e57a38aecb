"""The stale-identity tests' helpers: ``kbase top`` and ``kbase snapshot`` of a file in a world, its leaderboard, the
file's times kept to be put back, and ``assert_never_stale``: snapshot, change, and check that the answer is a fresh
read's, never the store's."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from helpers.cli import kb

FROM_STORE = "from the store"


K = "CUPTI_ACTIVITY_KIND_KERNEL"


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


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

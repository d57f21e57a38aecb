"""What the bad-input tests share (tests/reliability): one-line error checks, running kbase in this process or as
a child, git in a test repository, and the store's state (SQLite bytes, PostgreSQL rows) to hold unchanged."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import pg
from helpers.cli import run_kbase
from helpers.library import snap
from helpers.shared import REPO
from helpers.tiny_export import make_tiny_export

_RESOURCE_WARNING = re.compile(r"^\S.*: ResourceWarning: .*\n(?:[ \t]+.*\n)?", re.M)


def error_lines(stderr: str) -> list[str]:
    """stderr's lines, less ResourceWarnings of connections an earlier in-process command left to
    the garbage collector (a real process exits instead)."""
    return _RESOURCE_WARNING.sub("", stderr).splitlines()


def kb(*args, subprocess: bool = False, cwd: Path | None = None):
    """``kbase ARGS`` (in this process unless ``subprocess``), optionally from ``cwd``."""
    if any(str(a).startswith("postgresql") for a in args):
        # close PostgreSQL connections earlier in-process commands left to the garbage collector,
        # so that their ResourceWarnings are not printed into this command's stderr
        gc.collect()
    with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
        return run_kbase(*args, subprocess=subprocess)


def kb_proc(*args, cwd: Path = REPO, env: dict | None = None, timeout: float = 180):
    """``python -m kbase.cli ARGS`` as a child process with extra environment."""
    full = {k: v for k, v in os.environ.items() if k not in ("KBASE_DB", "KBASE_DEBUG")}
    full["PYTHONPATH"] = str(REPO) + (os.pathsep + full["PYTHONPATH"] if full.get("PYTHONPATH") else "")
    full.setdefault("COLUMNS", "200")
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "kbase.cli", *map(str, args)], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def assert_bad_input(res, *mentions: str) -> str:
    """Exit 2, one ``kbase: error:`` line naming every one of ``mentions``, no traceback."""
    rc = getattr(res, "rc", None)
    rc = res.returncode if rc is None else rc
    text = f"rc={rc}\nstdout: {res.stdout[:2000]}\nstderr: {res.stderr}"
    assert rc == 2, text
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, text
    lines = error_lines(res.stderr)
    assert len(lines) == 1, text
    line = lines[0]
    assert line.startswith("kbase: error: ") and len(line) > len("kbase: error: ") + 5, text
    for m in mentions:
        assert m in line, f"{m!r} not in {line!r}"
    return line


def git(repo: Path, *args: str, check: bool = True) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="kbase test", GIT_AUTHOR_EMAIL="t@kbase.invalid",
               GIT_COMMITTER_NAME="kbase test", GIT_COMMITTER_EMAIL="t@kbase.invalid")
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert out.returncode == 0, f"git {' '.join(args)}: {out.stderr}"
    return out.stdout.strip()


def make_repo(path: Path, commits: int = 3) -> Path:
    """A repository on ``main`` with ``commits`` commits."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "commit.gpgsign", "false")
    for i in range(commits):
        (path / "train.py").write_text(f"step = {i}\n")
        git(path, "add", "train.py")
        git(path, "commit", "-q", "-m", f"commit {i}")
    return path


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pg_rows(url: str) -> dict[str, list]:
    """Every row of every table of the PostgreSQL database (public schema), in a stable order."""
    out: dict[str, list] = {}
    with pg.connected(url, timeout=10) as conn:
        tables = [r[0] for r in pg.execute(
            conn, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
            "AND table_type = 'BASE TABLE' ORDER BY table_name")]
        for t in tables:
            ncol = pg.execute(conn, "SELECT count(*) FROM information_schema.columns "
                              "WHERE table_schema = 'public' AND table_name = %s", (t,))[0][0]
            order = ", ".join(str(i) for i in range(1, ncol + 1))
            out[t] = [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                      for row in pg.execute(conn, f'SELECT * FROM "{t}" ORDER BY {order}')]
    return out


def store_state(url: str):
    """What must not change: SQLite — sha256 of the database file and of a non-empty ``-wal``;
    PostgreSQL — every row of every table."""
    if url.startswith("sqlite:///"):
        # connections earlier in-process commands left open: closed now, so a checkpoint cannot
        # happen between the two measurements
        gc.collect()
        path = Path(url[len("sqlite:///"):])
        wal = path.with_name(path.name + "-wal")
        state = {"db": sha256_bytes(path.read_bytes()) if path.exists() else None}
        if wal.exists() and wal.stat().st_size:
            state["wal"] = sha256_bytes(wal.read_bytes())
        return state
    return pg_rows(url)


def baseline_count(url: str) -> int:
    from sqlalchemy import create_engine, text

    from kbase.store.engine import normalize_url

    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM baseline")).scalar()
    finally:
        engine.dispose()


class World:
    def __init__(self, root: Path):
        self.root = root
        self.repo = make_repo(root / "repo", commits=3)
        self.tiny = make_tiny_export(root / "tiny.sqlite", steps=4)
        self.nongit = root / "nowhere"
        self.nongit.mkdir()
        self.stores: dict[str, str] = {}

    def head(self, rev: str = "HEAD") -> str:
        return git(self.repo, "rev-parse", rev)


def seed_store(world: World, url: str) -> str:
    """One baseline (workload ``w``) of the tiny export at HEAD~1 and one at HEAD."""

    for rev in ("HEAD~1", "HEAD"):
        res = snap(world.tiny, name="w", db=url, repo=world.repo, rev=rev)
        assert res.created
    assert baseline_count(url) == 2
    return url

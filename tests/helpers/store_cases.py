"""What the baseline store's command tests share (tests/store/baselines): the stores' constants, git in a test
repository with fixed dates, running kbase, reading a store back plainly."""

from __future__ import annotations

import contextlib
import math
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from kbase.analysis.leaderboard import COLUMNS
from kbase.store import open_store as store_open

from helpers.cli import run_kbase
from helpers.shared import REPO

BACKENDS = ["sqlite", "postgresql"]
SPEC = dict(n_gpus=2, iterations=6)
C1_DATE = "2024-01-02T03:04:05+00:00"
C2_DATE = "2024-02-03T04:05:06+02:00"  # stored as UTC: 02:05:06
C2_UTC = datetime(2024, 2, 3, 2, 5, 6, tzinfo=UTC)
FULL_HASH = "0123456789abcdef0123456789abcdef01234567"
REL = 1e-9


def git(repo: Path, *args: str, date: str | None = None) -> str:
    env = dict(os.environ)
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"git {' '.join(args)}: {out.stderr}"
    return out.stdout.strip()


def head(repo: Path, rev: str = "HEAD") -> str:
    return git(repo, "rev-parse", rev)


def kb(*args, cwd: Path | None = None):
    """``kbase ARGS`` in this process, from ``cwd``."""
    with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
        return run_kbase(*args)


_RESOURCE_WARNING = re.compile(r"^\S.*: ResourceWarning: .*\n(?:[ \t]+.*\n)?", re.M)


def error_lines(stderr: str) -> list[str]:
    """stderr's lines, less the ResourceWarnings of connections that earlier in-process commands
    left to the garbage collector (a command run as its own process exits instead)."""
    return _RESOURCE_WARNING.sub("", stderr).splitlines()


def assert_one_line_error(r, text: str) -> None:
    assert r.rc == 2, r
    lines = error_lines(r.stderr)
    assert len(lines) == 1 and lines[0].startswith("kbase: error:") and text in lines[0], r


def kb_proc(*args, cwd: Path, env: dict | None = None, timeout: float = 120):
    """``kbase ARGS`` in a child process (as a user runs it), from ``cwd``."""
    full = {k: v for k, v in os.environ.items() if k not in ("KBASE_DB", "KBASE_DEBUG")}
    full["PYTHONPATH"] = str(REPO)
    full.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "kbase.cli", *map(str, args)], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return proc


def engine_for(url: str):
    _st = store_open(url)
    engine, _ = _st.engine, _st.url
    return engine


def scalar(url: str, sql: str, **params):
    from sqlalchemy import text

    engine = engine_for(url)
    try:
        with engine.connect() as conn:
            return conn.execute(text(sql), params).scalar()
    finally:
        engine.dispose()


def counts(url: str) -> dict[str, int]:
    """Rows per table, and ``kernel_rows``: the kernels of every stored kernel table."""
    out = {t: scalar(url, f"SELECT count(*) FROM {t}")
           for t in ("baseline", "baseline_kernels", "kernel_name", "workload_kernel")}
    return out | {"kernel_rows": scalar(url, "SELECT coalesce(sum(kernels), 0) FROM baseline_kernels")}


def head_revision(url: str) -> str:
    from alembic.script import ScriptDirectory

    from kbase.store.engine import alembic_config

    return ScriptDirectory.from_config(alembic_config(url)).get_current_head()


def same_value(a, b) -> bool:
    if (a is None or b is None or (isinstance(a, float) and math.isnan(a))
            or (isinstance(b, float) and math.isnan(b))):
        return ((a is None or (isinstance(a, float) and math.isnan(a)))
                and (b is None or (isinstance(b, float) and math.isnan(b))))
    if isinstance(a, (bool, str)) or isinstance(b, (bool, str)):
        return a == b
    if isinstance(a, float) or isinstance(b, float):
        if math.isinf(a) or math.isinf(b):
            return a == b
        return math.isclose(a, b, rel_tol=REL, abs_tol=0.0)
    return a == b


def assert_same_kernels(rows: list[dict], expected: list[dict]) -> None:
    """Same kernels, same order, every leaderboard column equal (floats within 1e-9 relative)."""
    assert [r["name"] for r in rows] == [e["name"] for e in expected]
    for i, (r, e) in enumerate(zip(rows, expected)):
        for col in COLUMNS:
            assert same_value(_py(r[col]), _py(e[col])), (
                f"row {i} ({e['name'][:60]}) column {col}: {r[col]!r} != {e[col]!r}")


def _py(v):
    return v.item() if hasattr(v, "item") else v


def table_records(lb) -> list[dict]:
    return [{c: _py(v) for c, v in row.items()} for row in lb.table.to_dict("records")]


def baseline_rows(url: str, **filters) -> list:
    with store_open(url, readonly=True) as st:
        return st.reader.list_baselines(**filters)

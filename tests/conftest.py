"""Shared helpers for the kbase tests.

- ``SHARED``: the real profiler data in ``../shared/data`` (read-only; absent in a fresh clone, in
  which case the tests that need it skip with ``SHARED_SKIP_REASON``).
- ``run_kbase``: run the ``kbase`` command line and collect exit code, stdout and stderr. By default
  the CLI entry point (``kbase.cli.main``) runs in this process — a fresh interpreter per call costs
  over a second of pandas import, too slow for the many cases below — with ``sys.argv``, stdout,
  stderr and warnings redirected as a subprocess would see them. ``subprocess=True`` (or the
  environment variable ``KBASE_TEST_SUBPROCESS=1`` for every call) runs
  ``python -m kbase.cli`` in a real child process instead.
- ``ro_connect``: open an SQLite file read-only and immutable (never a journal or lock beside it).
- ``make_tiny_export``: a small Nsight-Systems-like export with the real column names (``tiny_export``).
"""

from __future__ import annotations

import contextlib
import io
import os
import sqlite3
import subprocess as _subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
NSYS_DIR = SHARED / "nsys"
KINETO_DIR = SHARED / "kineto"
SHARED_SKIP_REASON = "../shared/data not present (fresh clone): real-export tests skipped"

# The export that carries every table the tiny export needs (its DDL is copied when present).
SCHEMA_SOURCE = NSYS_DIR / "h100_2gpu_fsdp_t5.sqlite"


# --------------------------------------------------------------------------- shared real data


def shared_present() -> bool:
    return NSYS_DIR.is_dir() and any(NSYS_DIR.glob("*.sqlite"))


def shared_exports() -> list[Path]:
    """Every Nsight Systems export in shared/data/nsys (empty list when absent)."""
    return sorted(NSYS_DIR.glob("*.sqlite")) if NSYS_DIR.is_dir() else []


def require_shared(name: str | None = None) -> Path:
    """The shared data folder, or one export in it; skip the test when it is not there."""
    if not shared_present():
        pytest.skip(SHARED_SKIP_REASON)
    if name is None:
        return SHARED
    path = NSYS_DIR / name
    if not path.is_file():
        pytest.skip(f"{path} not present: real-export test skipped")
    return path


def export_params() -> list:
    """``pytest.mark.parametrize`` values: one per shared export, or a single skipped case."""
    paths = shared_exports()
    if not paths:
        return [pytest.param(None, id="no-shared-data", marks=pytest.mark.skip(reason=SHARED_SKIP_REASON))]
    return [pytest.param(p, id=p.stem) for p in paths]


@pytest.fixture
def shared_data() -> Path:
    return require_shared()


def ro_connect(path: Path) -> sqlite3.Connection:
    """Read-only, immutable connection: the test never writes next to (or into) a shared file."""
    return sqlite3.connect(f"file:{quote(str(Path(path).resolve()))}?mode=ro&immutable=1", uri=True)


# --------------------------------------------------------------------------- running the CLI


@dataclass
class CliResult:
    rc: int
    stdout: str
    stderr: str
    args: list[str]

    def __str__(self) -> str:  # shown by pytest on a failed assertion
        return (f"kbase {' '.join(self.args)} -> rc={self.rc}\nstdout: {self.stdout[:2000]}\n"
                f"stderr: {self.stderr}")


def _want_subprocess(flag: bool | None) -> bool:
    if os.environ.get("KBASE_TEST_SUBPROCESS", "") not in ("", "0"):
        return True
    return bool(flag)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KBASE_DEBUG", None)  # the one-line error contract is what is under test
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("COLUMNS", "200")
    return env


def _run_subprocess(args: list[str], timeout: float) -> CliResult:
    proc = _subprocess.run(
        [sys.executable, "-m", "kbase.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=_child_env(),
        timeout=timeout,
        stdin=_subprocess.DEVNULL,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr, args)


def _run_inprocess(args: list[str]) -> CliResult:
    from kbase import cli

    out, err = io.StringIO(), io.StringIO()

    def to_stderr(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    saved_argv = sys.argv
    saved_debug = os.environ.pop("KBASE_DEBUG", None)
    rc: int | None = None
    sys.argv = ["kbase", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            # As in a fresh interpreter: warnings are printed on stderr (pytest would record them).
            warnings.resetwarnings()
            warnings.simplefilter("default")
            warnings.showwarning = to_stderr
            try:
                cli.main()
            except SystemExit as exc:
                code = exc.code
                if code is None:
                    rc = 0
                elif isinstance(code, int):
                    rc = code
                else:  # sys.exit("message"): printed on stderr, status 1
                    err.write(f"{code}\n")
                    rc = 1
    finally:
        sys.argv = saved_argv
        if saved_debug is not None:
            os.environ["KBASE_DEBUG"] = saved_debug
    if rc is None:  # main() must always leave through sys.exit
        rc = -1
    return CliResult(rc, out.getvalue(), err.getvalue(), args)


def run_kbase(*args, subprocess: bool | None = None, timeout: float = 120) -> CliResult:
    """Run ``kbase ARGS…`` and return (rc, stdout, stderr)."""
    argv = [str(a) for a in args]
    if _want_subprocess(subprocess):
        return _run_subprocess(argv, timeout)
    return _run_inprocess(argv)


# --------------------------------------------------------------------------- a tiny nsys export

from tiny_export import (  # noqa: E402, F401 (re-exported: tests import them from conftest)
    FALLBACK_DDL,
    GLOBAL_PID,
    GLOBAL_TID,
    PID,
    STEP_NS,
    T0,
    TID,
    TINY_KERNELS,
    assert_same_profile,
    export_ddl,
    insert_rows,
    make_tiny_export,
)


@pytest.fixture
def tiny_export(tmp_path: Path) -> Path:
    return make_tiny_export(tmp_path / "tiny.sqlite")


# --------------------------------------------------------------------------- a throwaway PostgreSQL


def _pg_module():
    """``tests/pg.py``, imported by path (the tests folder is not a package)."""
    import importlib.util

    name = "kbase_tests_pg"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("pg.py"))
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


@pytest.fixture(scope="session")
def pg_url():
    """URL (``postgresql+psycopg://``) of a PostgreSQL database for the session.

    ``KBASE_TEST_PG_URL`` when set; else a throwaway PostgreSQL 15 server started here (as the
    ``postgres`` user when running as root), stopped and removed at the end of the session. Skips
    where no server binaries exist. With pytest-xdist each worker starts its own server."""
    pg = _pg_module()
    env = os.environ.get("KBASE_TEST_PG_URL")
    if env:
        url = env if "+psycopg" in env else "postgresql+psycopg://" + env.split("://", 1)[1]
        try:
            pg.wait_ready(url)
        except pg.PgUnavailable as exc:
            pytest.fail(f"KBASE_TEST_PG_URL is set but unusable: {exc}")
        yield url
        return
    if pg.find_bindir() is None:
        pytest.skip(pg.SKIP_REASON)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg not installed (pip install 'kbase[postgres]')")
    server = pg.PgServer()
    try:
        url = server.start()
    except pg.PgUnavailable as exc:
        pytest.skip(f"cannot start a throwaway PostgreSQL server: {exc}")
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture
def pg_db_url(pg_url):
    """A fresh, empty PostgreSQL database for one test (dropped afterwards)."""
    pg = _pg_module()
    url = pg.create_database(pg_url)
    try:
        yield url
    finally:
        pg.drop_database(pg_url, url)


@pytest.fixture(scope="module")
def pg_copy_of(pg_url):
    """``copy(url)``: a new PostgreSQL database holding a copy of the store at ``url`` (``pg.copy_store``),
    dropped after the module: the same store on the other backend."""
    pg = _pg_module()
    made: list[str] = []

    def copy(src_url: str) -> str:
        made.append(pg.create_database(pg_url))
        pg.copy_store(src_url, made[-1])
        return made[-1]

    yield copy
    for url in made:
        pg.drop_database(pg_url, url)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: takes tens of seconds (builds and installs the wheel); still part of the suite")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """A fresh, empty store on each backend (files may override this with their own)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("pg_db_url")


_PG_CALLS = [0]


def kb(*args):
    """run_kbase, collecting garbage every few PostgreSQL calls: pooled connections of earlier
    in-process commands are released before their warnings can land in a later command's stderr."""
    if any(str(a).startswith("postgresql") for a in args):
        _PG_CALLS[0] += 1
        if _PG_CALLS[0] % 5 == 0:
            import gc

            gc.collect()
    return run_kbase(*args)


# --------------------------------------------------------------------------- the library, as a test calls it


def snap(path, *, name=None, db=None, repo=None, store=None, **kwargs):
    """``kbase.snapshot`` with its settings built from the usual keywords (``name``, ``db``, ``repo``)."""
    import kbase

    settings = kbase.Settings.load(repo=repo, db=db, name=name)
    return kbase.snapshot(path, settings, store=store, **kwargs)


def engine_of(url: str):
    """An engine on the store at ``url`` (migrated to head); dispose it when done."""
    from kbase.store import open_store

    return open_store(url).engine

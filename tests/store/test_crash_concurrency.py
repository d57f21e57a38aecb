"""Issue #6, crash safety and concurrency of the store, on SQLite and PostgreSQL, with real
``kbase`` processes (``python -m kbase.cli``).

Crash safety: ``kbase snapshot`` of a large generated export (300k kernels, ~15k distinct names, so
the write lasts a moment) is killed with SIGKILL at several points — during start-up (0.5 s), while
reading (1.5 s) and inside the write transaction (detected from outside: SQLite's write lock is
taken, or PostgreSQL shows the process's row locks on our tables). After each kill the store is
intact (SQLite ``PRAGMA integrity_check``; ``kbase list`` works), holds no partial baseline (every
baseline has exactly as many kernel rows as its leaderboard, no orphan rows, no kernel names of the
killed write) and a later snapshot of the same export succeeds.

Concurrency: 8 ``kbase snapshot`` processes at once (8 different small exports) into one existing
store, and 8 at once into a store that does not exist yet (the first-use migration must be
serialised): every process exits 0, nothing says "locked", and ``kbase list --format json`` shows
the 8 baselines, each complete.

The large export is generated once per test session (shared by xdist workers through a file lock).
"""

from __future__ import annotations

import fcntl
import gc
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbase.store import engine as engine_mod
from kbase.store import open_store as store_open
from kbase.store.write import queries
from kbase.synth.generate import ExportSpec, generate_export, scaled_kernel_mix

from helpers import pg
from helpers.cli import run_kbase
from helpers.library import snap
from helpers.shared import REPO

pytestmark = [pytest.mark.filterwarnings("ignore::ResourceWarning"), pytest.mark.slow]

REV = "abcdef0123456789abcdef0123456789abcdef01"
BIG_SPEC = dict(n_gpus=2, iterations=15, seed=11)  # + scaled_kernel_mix(20_000, 10_000): ~300k kernels
N_PROCS = 8


# --------------------------------------------------------------------------- fixtures


def _session_dir(tmp_path_factory) -> Path:
    """A folder shared by every xdist worker of this session (the basetemp itself without xdist)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def big_export(tmp_path_factory) -> Path:
    folder = _session_dir(tmp_path_factory) / "kbase-big-export"
    folder.mkdir(exist_ok=True)
    path = folder / "big.sqlite"
    with open(folder / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        if not path.exists():
            truth = generate_export(path, ExportSpec(**BIG_SPEC, kernels=scaled_kernel_mix(20_000, 10_000)))
            assert truth.n_kernels >= 300_000
    return path


@pytest.fixture(scope="module")
def small_exports(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("small")
    return [generate_export(d / f"s{i}.sqlite", ExportSpec(n_gpus=1, iterations=4, seed=i)).path
            for i in range(N_PROCS)]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request) -> str:
    return request.param


@pytest.fixture
def new_store(backend, request, tmp_path) -> str:
    """A store that does not exist yet: an SQLite path in a missing folder, or an empty PG database."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'new' / 'kbase.db'}"
    return request.getfixturevalue("pg_db_url")


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KBASE_DB", "KBASE_DEBUG", "KBASE_BUSY_TIMEOUT")}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def start(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "kbase.cli", *map(str, args)], cwd=REPO, env=child_env(),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


# --------------------------------------------------------------------------- looking into a store


def query(url: str, sql: str) -> list[tuple]:
    from sqlalchemy import create_engine, text

    from kbase.store.engine import normalize_url

    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def check_intact(url: str) -> dict:
    """The store's invariants; returns counts. Every baseline complete, nothing orphaned."""
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url[len("sqlite:///"):])
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        finally:
            conn.close()
    gc.collect()
    r = run_kbase("list", "--db", url, "--format", "json", "--limit", "0")
    assert r.rc == 0, r
    listed = json.loads(r.stdout)["baselines"]
    rows = dict(query(url, "SELECT baseline_id, kernels FROM baseline_kernels"))
    for bid, summary in query(url, "SELECT id, summary_json FROM baseline"):
        expected = json.loads(summary)["kernels"]
        assert expected > 0 and rows.get(bid, 0) == expected, (
            f"baseline @{bid}: {rows.get(bid, 0)} of {expected} rows")
    orphans = query(url, "SELECT count(*) FROM baseline_kernels "
                         "WHERE baseline_id NOT IN (SELECT id FROM baseline)")
    assert orphans == [(0,)]
    names = query(url, "SELECT count(*) FROM kernel_name")[0][0]
    assert {b["id"] for b in listed} == set(rows)
    return {"baselines": len(listed), "rows": sum(rows.values()), "names": names}


# --------------------------------------------------------------------------- "inside the write" probes


def sqlite_writer_active(url: str) -> bool:
    """True while another connection holds the write lock (BEGIN IMMEDIATE fails at once)."""
    conn = sqlite3.connect(url[len("sqlite:///"):], timeout=0, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            return True
        raise
    finally:
        conn.close()


class PgProbe:
    """True while another session holds row-write locks on the store's tables."""

    def __init__(self, url: str):
        import psycopg2

        self.conn = psycopg2.connect(pg.libpq_dsn(url), connect_timeout=10)
        self.conn.autocommit = True

    def __call__(self, _url: str) -> bool:
        n = pg.execute(
            self.conn,
            "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
            "WHERE l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND c.relname IN ('baseline', 'kernel_name', 'baseline_kernels', 'workload_kernel') "
            "AND l.mode = 'RowExclusiveLock' AND l.pid <> pg_backend_pid()")[0][0]
        return n > 0

    def close(self) -> None:
        self.conn.close()


def kill_at(proc: subprocess.Popen, when, probe=None, url: str = "", deadline_s: float = 240) -> str:
    """SIGKILL ``proc`` after ``when`` seconds, or (``when == "write"``) once ``probe(url)`` says its
    write transaction is open. Returns how it went."""
    t0 = time.monotonic()
    if when == "write":
        while time.monotonic() - t0 < deadline_s:
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"snapshot finished (rc={proc.returncode}) before its write was seen: {err}")
            if probe(url):
                time.sleep(0.05)  # well inside the transaction: names and rows being inserted
                break
            time.sleep(0.01)
        else:
            pytest.fail("no write transaction seen")
    else:
        time.sleep(when)
    assert proc.poll() is None, f"snapshot already finished after {time.monotonic() - t0:.1f} s"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    return f"killed at {time.monotonic() - t0:.2f} s"


# --------------------------------------------------------------------------- crash safety


def test_sigkill_during_snapshot_leaves_no_partial_baseline(backend, new_store, big_export, small_exports):
    url = new_store

    # a store with one baseline in it
    assert snap(small_exports[0], name="small", db=url, rev=REV, no_git=True).created
    before = check_intact(url)
    assert before["baselines"] == 1

    probe = PgProbe(url) if backend == "postgresql" else sqlite_writer_active
    try:
        for when in (0.5, 1.5, "write"):
            proc = start("snapshot", big_export, "--db", url, "--no-git", "--rev", REV, "--name", "big",
                         "--force", "--format", "json", "--limit", "1")
            how = kill_at(proc, when, probe, url)
            after = check_intact(url)
            assert after == before, f"{how} ({when}): the store changed: {before} -> {after}"
            if backend == "postgresql":
                # the server rolls the dead session back: its locks go away
                t0 = time.monotonic()
                while probe(url) and time.monotonic() - t0 < 30:
                    time.sleep(0.05)
                assert not probe(url)
    finally:
        if backend == "postgresql":
            probe.close()

    # a later snapshot of the same export goes through, complete
    res = snap(big_export, name="big", db=url, rev=REV, no_git=True, force=True)
    assert res.created
    final = check_intact(url)
    assert final["baselines"] == 2
    assert final["rows"] == before["rows"] + len(res.leaderboard.table)
    assert len(res.leaderboard.table) > 10_000


# --------------------------------------------------------------------------- concurrency


def _run_all(url: str, exports: list[Path]) -> list[subprocess.CompletedProcess]:
    procs = [start("snapshot", p, "--db", url, "--no-git", "--rev", REV, "--name", "conc", "--format", "json",
                   "--limit", "1") for p in exports]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return out


def _check_all_stored(url: str, results, exports: list[Path]) -> None:
    for r in results:
        assert r.returncode == 0, f"rc={r.returncode}\n{r.stderr}"
        assert "locked" not in r.stderr.lower() and "Traceback" not in r.stderr, r.stderr
        assert "stored baseline" in r.stderr
    ids = [json.loads(r.stdout)["baseline_id"] for r in results]
    assert len(set(ids)) == len(exports)
    counts = check_intact(url)
    gc.collect()
    r = run_kbase("list", "--db", url, "--name", "conc", "--format", "json", "--limit", "0")
    assert r.rc == 0, r
    listed = json.loads(r.stdout)["baselines"]
    assert sorted(b["id"] for b in listed) == sorted(ids)
    assert sorted(b["source"] for b in listed) == sorted(p.name for p in exports)
    assert len({b["sha256"] for b in listed}) == len(exports)
    assert all(b["commit"] == REV and b["gpus"] == 1 and b["workload"] == "conc" for b in listed)
    # kernel names are shared, each stored once, whatever order the writers inserted them in
    dup = query(url, "SELECT name_hash, count(*) FROM kernel_name GROUP BY name_hash HAVING count(*) > 1")
    assert dup == []
    assert counts["baselines"] >= len(exports)


def test_eight_snapshots_at_once_into_an_existing_store(new_store, small_exports):

    url = new_store
    assert snap(small_exports[0], name="seed", db=url, rev=REV, no_git=True).created
    results = _run_all(url, small_exports)
    _check_all_stored(url, results, small_exports)


def test_eight_snapshots_at_once_into_a_new_store(new_store, small_exports, backend):
    url = new_store
    if backend == "sqlite":
        assert not Path(url[len("sqlite:///"):]).parent.exists()
    else:
        assert query(url, "SELECT count(*) FROM information_schema.tables "
                          "WHERE table_schema = 'public'") == [(0,)]
    results = _run_all(url, small_exports)
    _check_all_stored(url, results, small_exports)
    from kbase.store.engine import head_revision

    assert query(url, "SELECT version_num FROM alembic_version") == [(head_revision(),)]


def test_identical_snapshots_at_once_store_one_baseline(new_store, small_exports):
    """Idempotence under concurrency holds by the unique capture key, not a check-then-insert: eight
    identical snapshots at once store one baseline, and every process answers with its id."""
    url = new_store
    results = _run_all(url, [small_exports[0]] * 8)
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    ids = {json.loads(r.stdout)["baseline_id"] for r in results}
    assert len(ids) == 1
    assert sum("stored baseline" in r.stderr for r in results) == 1
    assert sum("already stored" in r.stderr for r in results) == 7
    assert query(url, "SELECT count(*) FROM baseline") == [(1,)]
    # --force stores numbered copies, and never twice the same number
    forced = [start("snapshot", small_exports[0], "--db", url, "--no-git", "--rev", REV, "--name", "conc", "--force",
                    "--format", "json", "--limit", "1") for _ in range(4)]
    for proc in forced:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert sorted(r[0] for r in query(url, "SELECT capture_copy FROM baseline")) == [0, 1, 2, 3, 4]
    check_intact(url)


def test_concurrent_writers_of_the_same_new_names_in_other_orders(new_store):
    """Two snapshots adding the same new kernel names, ranked differently (each inserts in its
    leaderboard's order), at the same moment. On PostgreSQL each waited on the other's uncommitted
    row: "deadlock detected", and one snapshot failed. Names are now inserted in one global order."""
    import threading

    _st = store_open(new_store)

    engine, url = _st.engine, _st.url
    names = [f"void kernel_{i:04d}<float>(float*)" for i in range(3000)]

    def table(order):
        return [(n, n, n, "compute", "-") for n in order]

    barrier = threading.Barrier(2)
    errors, results = [], []

    sqlite = new_store.startswith("sqlite")

    def work(t):
        try:
            if sqlite:  # one writer at a time (BEGIN IMMEDIATE): meet before, not inside
                barrier.wait(timeout=60)
            with engine_mod.write_transaction(engine, url) as conn:
                if not sqlite:  # both transactions open, then both insert
                    barrier.wait(timeout=60)
                results.append(queries.name_ids(conn, t))
        except Exception as exc:  # noqa: BLE001 - collected and reported below
            errors.append(f"{type(exc).__name__}: {exc}")

    try:
        threads = [threading.Thread(target=work, args=(table(o),)) for o in (names, names[::-1])]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert errors == []
        assert len(results) == 2 and results[0] == results[1] and len(results[0]) == len(names)
        assert query(new_store, "SELECT count(*) FROM kernel_name") == [(len(names),)]
    finally:
        engine.dispose()

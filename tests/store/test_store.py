"""The baseline store (kbase.store, kbase.store.engine, kbase.gitrepo, the store commands), on SQLite and on
PostgreSQL (a throwaway server from ``tests/pg.py``; those cases skip where none can run).

Every test gets a fresh store (``store_url``), a fresh git repository with two commits
(``git_repo``) and shares two small generated exports (``exports``) and the ``kbase top`` JSON of the
first (``top_a``), made once per session (per xdist worker).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

import kbase
from kbase import store
from kbase.analysis.leaderboard import COLUMNS
from kbase.errors import InputError, StoreError
from kbase.readers import source
from kbase.store import open_store as store_open
from kbase.store.write import writer
from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import run_kbase
from helpers.library import snap
from helpers.shared import REPO

BACKENDS = ["sqlite", "postgresql"]
SPEC = dict(n_gpus=2, iterations=6)
C1_DATE = "2024-01-02T03:04:05+00:00"
C2_DATE = "2024-02-03T04:05:06+02:00"  # stored as UTC: 02:05:06
C2_UTC = datetime(2024, 2, 3, 2, 5, 6, tzinfo=UTC)
FULL_HASH = "0123456789abcdef0123456789abcdef01234567"
REL = 1e-9


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def exports(tmp_path_factory) -> dict[str, Path]:
    """a: seed 0; b: seed 1 (same kernels, other timings); c: seed 2 with two renamed kernels
    (names the store has not seen)."""
    d = tmp_path_factory.mktemp("exports")
    a = generate_export(d / "a.sqlite", ExportSpec(**SPEC, seed=0))
    generate_export(d / "b.sqlite", ExportSpec(**SPEC, seed=1))
    first_two = list(dict.fromkeys(k.name for k in ExportSpec().kernels))[:2]
    generate_export(d / "c.sqlite",
                    ExportSpec(**SPEC, seed=2,
                               rename={n: f"renamed_{i}_kernel(float*)" for i, n in enumerate(first_two)}))
    assert len(a.names) > 5
    return {k: d / f"{k}.sqlite" for k in "abc"}


@pytest.fixture(scope="session")
def top_a(exports) -> dict:
    """``kbase top a.sqlite --format json --limit 0`` (the default window)."""
    res = run_kbase("top", exports["a"], "--format", "json", "--limit", "0")
    assert res.rc == 0, res
    return json.loads(res.stdout)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("KBASE_DB", "KBASE_DEBUG"):
        monkeypatch.delenv(var, raising=False)


_PARSED: dict[tuple, object] = {}


@pytest.fixture
def real_reads():
    """Ask for this to parse every export afresh (see ``_parse_once``)."""


@pytest.fixture(autouse=True)
def _parse_once(request, monkeypatch):
    """Parse each export once per worker: snapshots in this process reuse the parsed profile (the
    readers have their own tests; the round-trip tests and every child process read for real)."""
    if "real_reads" in request.fixturenames:
        return
    import dataclasses

    import kbase.readers

    real = kbase.readers.read_profile

    def read_profile(path, progress=None, fmt=None, **options):
        p = Path(path)
        st = p.stat()
        key = (str(p.resolve()), st.st_mtime_ns, st.st_size, tuple(sorted(options.items())))
        if p.is_dir() or progress is not None:
            return real(path, progress, fmt, **options)
        if key not in _PARSED:
            _PARSED[key] = real(p, None, fmt, **options)
        return dataclasses.replace(_PARSED[key], source=p)

    monkeypatch.setattr(kbase.readers, "read_profile", read_profile)


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def store_url(backend, request, tmp_path) -> str:
    """A fresh, empty store: an SQLite file in tmp_path or a new PostgreSQL database."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'kbase.db'}"
    return request.getfixturevalue("pg_db_url")


def git(repo: Path, *args: str, date: str | None = None) -> str:
    env = dict(os.environ)
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"git {' '.join(args)}: {out.stderr}"
    return out.stdout.strip()


@pytest.fixture
def git_repo(tmp_path) -> Path:
    """A repository on branch ``main`` with two commits (dates C1_DATE, C2_DATE)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Kbase Test")
    git(repo, "config", "user.email", "test@example.com")
    git(repo, "config", "commit.gpgsign", "false")
    (repo / "src").mkdir()
    (repo / "src" / "model.py").write_text("LAYERS = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first", date=C1_DATE)
    (repo / "src" / "model.py").write_text("LAYERS = 2\n")
    git(repo, "commit", "-q", "-am", "second", date=C2_DATE)
    return repo


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


# --------------------------------------------------------------------------- snapshot round trip


@pytest.mark.slow
def test_api_snapshot_roundtrip_matches_top(store_url, exports, git_repo, top_a, real_reads):
    res = snap(exports["a"], name="w", db=store_url, repo=git_repo)
    assert res.created
    assert res.baseline.id is not None
    with store_open(store_url, readonly=True) as st:
        b = st.reader.baseline(res.baseline.id)
        lb = st.reader.leaderboard(b)
        t = st.reader.kernel_table(b.id)
        names = st.reader.names(t.name_id.tolist())
    assert b == res.baseline  # the record a write returns is the one a read gives
    assert list(lb.table.columns) == COLUMNS
    assert_same_kernels(table_records(lb), top_a["kernels"])
    # the summary and the baseline row agree with top's summary
    for key in ("gpus", "window", "iterations", "iteration_keys", "window_ns", "window_gpu_ns",
                "total_kernel_ns", "compute_ns", "communication_ns", "memory_ns", "aligned",
                "warmup_skipped"):
        assert getattr(lb.summary, key) == top_a["summary"][key], key
    assert b.workload == "w" and b.gpu_count == top_a["summary"]["gpus"] == 2
    assert b.total_kernel_ns == top_a["summary"]["total_kernel_ns"]
    assert b.window_desc == top_a["summary"]["window"]
    assert json.loads(b.iteration_keys) == top_a["summary"]["iteration_keys"]
    assert b.source_name == "a.sqlite" and b.source_format == "nsys-sqlite"
    assert (b.source_sha256 == source.file_sha256(exports["a"])
            and b.source_size == exports["a"].stat().st_size)
    # per-iteration samples survive the packing: counts exactly, times within the stored mantissa's error
    from kbase.store.codec.mantissa import SAMPLE_BITS

    keys = json.loads(b.iteration_keys)
    got = sorted((names[n][0], keys[j], int(t.iter_count[i, j]), float(t.iter_ns[i, j]))
                 for i, n in enumerate(t.name_id.tolist()) for j in range(len(keys)) if t.iter_count[i, j] > 0)
    computed = kbase.top(exports["a"], kbase.Settings.load(repo=git_repo, name="w"), sketches=True).samples
    want = sorted(zip(computed["name"], computed["iteration"].astype(int), computed["count"].astype(int),
                      computed["total_ns"]))
    assert len(got) == len(want) > 0
    assert [g[:3] for g in got] == [w[:3] for w in want]
    for g, w in zip(got, want):
        assert abs(g[3] - w[3]) <= w[3] * 2.0 ** -(SAMPLE_BITS + 1), (g, w)


@pytest.mark.slow
def test_cli_snapshot_matches_top(store_url, exports, git_repo, top_a, backend, real_reads):
    args = ("snapshot", exports["a"], "--db", store_url, "--repo", git_repo, "--name", "w", "--format",
            "json", "--limit", "0")
    if backend == "sqlite":  # once as a user runs it, in its own process (a fresh interpreter costs seconds)
        proc = kb_proc(*args, cwd=git_repo.parent)
        rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    else:
        r = kb(*args, cwd=git_repo.parent)
        rc, stdout, stderr = r.rc, r.stdout, r.stderr
    assert rc == 0, stderr
    assert "stored baseline @" in stderr and "workload w" in stderr
    out = json.loads(stdout)
    assert out["created"] is True and out["commit"] == head(git_repo)
    assert_same_kernels(out["kernels"], top_a["kernels"])
    with store_open(store_url, readonly=True) as st:
        lb = st.reader.leaderboard(st.reader.baseline(out["baseline_id"]))
    assert_same_kernels(table_records(lb), top_a["kernels"])
    # kbase show renders the stored leaderboard as kbase top does
    shown = kb("show", f"@{out['baseline_id']}", "--db", store_url, "--repo", git_repo, "--format", "json",
               "--limit", "0")
    assert shown.rc == 0, shown
    assert_same_kernels(json.loads(shown.stdout)["kernels"], top_a["kernels"])


# --------------------------------------------------------------------------- git facts


@pytest.mark.slow
def test_git_facts(store_url, exports, git_repo):
    c1, c2 = head(git_repo, "HEAD~1"), head(git_repo)
    r = kb("snapshot", exports["a"], "--db", store_url, "--name", "w", "--format", "json",
           cwd=git_repo / "src")
    assert r.rc == 0, r
    b = baseline_rows(store_url)[0]
    assert len(b.commit) == 40 and b.commit == c2
    assert b.commit_date == C2_UTC and b.commit_date.utcoffset() is not None
    assert b.branch == "main" and b.detached is False and b.dirty is False
    assert "(main)" in r.stderr and "DIRTY" not in r.stderr

    # a modified tracked file: dirty, said on stderr
    (git_repo / "src" / "model.py").write_text("LAYERS = 3\n")
    r = kb("snapshot", exports["b"], "--db", store_url, "--name", "w", cwd=git_repo)
    assert r.rc == 0, r
    assert "DIRTY" in r.stderr
    b = baseline_rows(store_url)[0]
    assert b.dirty is True and b.commit == c2 and b.source_name == "b.sqlite"

    # --require-clean refuses it, stores nothing
    r = kb("snapshot", exports["c"], "--db", store_url, "--name", "w", "--require-clean", cwd=git_repo)
    assert_one_line_error(r, "uncommitted changes")
    assert len(baseline_rows(store_url)) == 2

    # --rev HEAD~1: attributed to the parent, not dirty, no branch claimed
    r = kb("snapshot", exports["c"], "--db", store_url, "--name", "w", "--rev", "HEAD~1", cwd=git_repo)
    assert r.rc == 0, r
    b = baseline_rows(store_url)[0]
    assert b.commit == c1 and b.dirty is False and b.branch == ""
    assert b.commit_date == datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)

    # detached HEAD
    git(git_repo, "checkout", "-q", "--", "src/model.py")
    git(git_repo, "checkout", "-q", c2)
    r = kb("snapshot", exports["a"], "--db", store_url, "--name", "w", "--force", cwd=git_repo)
    assert r.rc == 0, r
    assert "(detached)" in r.stderr
    b = baseline_rows(store_url)[0]
    assert b.commit == c2 and b.branch == "" and b.detached is True and b.dirty is False
    assert len(baseline_rows(store_url)) == 4


@pytest.mark.slow
def test_outside_git_repository_and_no_git(exports, tmp_path):
    outside = tmp_path / "nowhere"
    outside.mkdir()
    db = f"sqlite:///{tmp_path / 's.db'}"
    r = kb("snapshot", exports["a"], "--db", db, cwd=outside)
    assert_one_line_error(r, "not a git repository")
    with pytest.raises(InputError, match="not a git repository"):
        snap(exports["a"], db=db, repo=outside)

    # --no-git needs a full hash
    r = kb("snapshot", exports["a"], "--db", db, "--no-git", "--rev", "abc123", cwd=outside)
    assert r.rc == 2 and "full commit hash" in r.stderr, r
    r = kb("snapshot", exports["a"], "--db", db, "--no-git", cwd=outside)
    assert r.rc == 2 and "--rev" in r.stderr, r
    # ... and works with one
    r = kb("snapshot", exports["a"], "--db", db, "--no-git", "--rev", FULL_HASH.upper(), "--name", "w",
           cwd=outside)
    assert r.rc == 0, r
    [b] = baseline_rows(db)
    assert b.commit == FULL_HASH and b.branch == "" and b.detached is True and b.dirty is False
    assert b.commit_date is None


# --------------------------------------------------------------------------- idempotence


@pytest.mark.slow
def test_idempotent_snapshot_force_and_other_export(store_url, exports, git_repo):
    args = ("--db", store_url, "--name", "w", "--format", "json")
    r1 = kb("snapshot", exports["a"], *args, cwd=git_repo)
    assert r1.rc == 0 and "stored baseline" in r1.stderr, r1
    r2 = kb("snapshot", exports["a"], *args, cwd=git_repo)
    assert r2.rc == 0, r2
    assert "already stored" in r2.stderr
    first, second = json.loads(r1.stdout), json.loads(r2.stdout)
    assert second["created"] is False and second["baseline_id"] == first["baseline_id"]
    assert_same_kernels(second["kernels"], first["kernels"])
    assert counts(store_url)["baseline"] == 1
    n_rows = counts(store_url)["kernel_rows"]

    # the API says the same
    res = snap(exports["a"], name="w", db=store_url, repo=git_repo)
    assert res.created is False and res.baseline.id == first["baseline_id"]

    # another window is another baseline
    r = kb("snapshot", exports["a"], *args, "--warmup", "2", cwd=git_repo)
    assert r.rc == 0 and "stored baseline" in r.stderr, r
    assert counts(store_url)["baseline"] == 2

    # --force stores again
    r3 = kb("snapshot", exports["a"], *args, "--force", cwd=git_repo)
    assert r3.rc == 0 and "stored baseline" in r3.stderr, r3
    assert json.loads(r3.stdout)["baseline_id"] != first["baseline_id"]
    assert counts(store_url)["baseline"] == 3

    # another export at the same commit: kept beside the first
    r4 = kb("snapshot", exports["b"], *args, cwd=git_repo)
    assert r4.rc == 0 and "stored baseline" in r4.stderr, r4
    at = [b for b in baseline_rows(store_url, workload="w") if b.commit == head(git_repo)]
    assert len(at) == 4
    assert {b.source_name for b in at} == {"a.sqlite", "b.sqlite"}
    # kernel names are stored once and shared by the baselines
    c = counts(store_url)
    assert (c["kernel_name"]
            == scalar(store_url, "SELECT count(DISTINCT name_id) FROM workload_kernel") >= n_rows)
    assert c["kernel_rows"] >= 3 * n_rows and c["baseline_kernels"] == c["baseline"]


# --------------------------------------------------------------------------- rollback


@pytest.mark.slow
def test_failed_write_rolls_back(store_url, exports, git_repo, monkeypatch):
    assert snap(exports["a"], name="w", db=store_url, repo=git_repo).created
    before = counts(store_url)
    names_before = scalar(store_url, "SELECT count(DISTINCT name_hash) FROM kernel_name")
    real = writer.write_kernels
    calls = []

    def failing(conn, workload, rows):
        calls.append(len(rows))
        real(conn, workload, rows)  # the kernel table and the workload's new names are written ...
        raise RuntimeError("injected failure mid-write")  # ... then the write dies

    monkeypatch.setattr(writer, "write_kernels", failing)
    with pytest.raises(StoreError, match="injected failure"):
        snap(exports["c"], name="w", db=store_url, repo=git_repo, rev="HEAD~1")
    assert calls == [1]
    assert counts(store_url) == before
    assert scalar(store_url, "SELECT count(DISTINCT name_hash) FROM kernel_name") == names_before
    assert scalar(store_url, "SELECT count(*) FROM kernel_name WHERE name LIKE 'renamed_%'") == 0
    assert scalar(store_url, "SELECT count(*) FROM baseline WHERE source_name = 'c.sqlite'") == 0

    # the CLI reports it in one line, exit 2, and stores nothing either
    r = kb("snapshot", exports["c"], "--db", store_url, "--name", "w", cwd=git_repo)
    assert_one_line_error(r, "could not save the baseline (RuntimeError: injected failure mid-write)")
    assert counts(store_url) == before

    # once the fault is gone the same snapshot goes through
    monkeypatch.setattr(writer, "write_kernels", real)
    res = snap(exports["c"], name="w", db=store_url, repo=git_repo)
    assert res.created
    after = counts(store_url)
    assert after["baseline"] == before["baseline"] + 1
    assert after["kernel_rows"] == before["kernel_rows"] + len(res.leaderboard.table)
    assert after["baseline_kernels"] == before["baseline_kernels"] + 1
    assert scalar(store_url, "SELECT count(*) FROM kernel_name WHERE name LIKE 'renamed_%'") == 2


# --------------------------------------------------------------------------- list / show / rm


@pytest.mark.slow
def test_list_show_rm(store_url, exports, git_repo, top_a, monkeypatch):
    c1, c2 = head(git_repo, "HEAD~1"), head(git_repo)
    db = ("--db", store_url)
    assert kb("snapshot", exports["a"], *db, "--name", "w", cwd=git_repo).rc == 0  # @1 main, C2
    assert kb("snapshot", exports["b"], *db, "--name", "w", "--rev", "HEAD~1", cwd=git_repo).rc == 0  # @2 C1
    git(git_repo, "checkout", "-q", "-b", "feat")
    assert kb("snapshot", exports["a"], *db, "--name", "other", cwd=git_repo).rc == 0  # @3 feat, C2
    ids = [b.id for b in baseline_rows(store_url)]
    b1, b2, b3 = sorted(ids)

    def listed(*args) -> list[int]:
        r = kb("list", *db, "--format", "json", *args, cwd=git_repo)
        assert r.rc == 0, r
        doc = json.loads(r.stdout)
        assert doc["schema"] == "kbase.list/1"
        return [b["id"] for b in doc["baselines"]]

    assert listed() == [b3, b2, b1]  # newest first
    assert listed("--name", "w") == [b2, b1]
    nope = kb("list", *db, "--name", "nope", cwd=git_repo)  # a name the store never held: a typo (issue 38)
    assert nope.rc == 2 and "no workload of that name" in nope.stderr and "other, w" in nope.stderr, nope
    assert listed("--branch", "feat") == [b3]
    assert listed("--branch", "main") == [b1]
    assert listed("--commit", c1[:7]) == [b2]
    assert listed("--commit", c2[:10].upper()) == [b3, b1]
    assert listed("--limit", "1") == [b3]
    r = kb("list", *db, "--format", "json", cwd=git_repo)
    first = json.loads(r.stdout)["baselines"][-1]
    assert first["commit"] == c2 and first["branch"] == "main" and first["workload"] == "w"
    assert first["commit_date"].startswith("2024-02-03T02:05:06")
    r = kb("list", *db, cwd=git_repo)
    assert r.rc == 0 and f"@{b1}" in r.stdout and "3 baseline(s)" in r.stdout, r

    # show @ID and show REV render what top renders
    for ref in (f"@{b1}", "HEAD", "main"):
        r = kb("show", ref, *db, "--name", "w", "--format", "json", "--limit", "0", cwd=git_repo)
        assert r.rc == 0, r
        doc = json.loads(r.stdout)
        assert doc["baseline"]["id"] == b1, ref
        assert_same_kernels(doc["kernels"], top_a["kernels"])
    r = kb("show", "HEAD~1", *db, "--name", "w", "--format", "json", cwd=git_repo)
    assert r.rc == 0 and json.loads(r.stdout)["baseline"]["id"] == b2, r
    r = kb("show", "HEAD", *db, "--name", "nope", cwd=git_repo)
    assert r.rc == 2 and "no workload of that name" in r.stderr, r
    r = kb("show", "@999", *db, cwd=git_repo)
    assert r.rc == 2 and "no such baseline" in r.stderr, r
    r = kb("show", f"@{b1}", *db, cwd=git_repo)  # the table renders
    assert r.rc == 0 and f"Baseline @{b1}" in r.stdout, r

    # rm without --yes and without a terminal: refused, nothing deleted
    before = counts(store_url)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    r = kb("rm", f"@{b2}", *db, cwd=git_repo)
    assert r.rc == 2 and "--yes" in r.stderr, r
    assert counts(store_url) == before
    n2 = scalar(store_url, "SELECT kernels FROM baseline_kernels WHERE baseline_id = :i", i=b2)
    assert n2 > 0
    # rm --yes deletes the baseline and its kernel rows, nothing else
    r = kb("rm", f"@{b2}", "--yes", *db, cwd=git_repo)
    assert r.rc == 0 and f"deleted baseline @{b2}" in r.stderr, r
    after = counts(store_url)
    assert after["baseline"] == before["baseline"] - 1
    assert after["kernel_rows"] == before["kernel_rows"] - n2
    assert scalar(store_url, "SELECT count(*) FROM baseline_kernels WHERE baseline_id = :i", i=b2) == 0
    assert listed() == [b3, b1]
    r = kb("rm", f"@{b2}", "--yes", *db, cwd=git_repo)
    assert r.rc == 2 and "no such baseline" in r.stderr, r
    r = kb("rm", "HEAD", "--yes", *db, cwd=git_repo)
    assert r.rc == 2 and "expected a baseline id" in r.stderr, r


# --------------------------------------------------------------------------- schema


def test_db_current_upgrade_and_auto_migration(store_url, exports, git_repo, backend):
    headrev = head_revision(store_url)
    r = kb("db", "current", "--db", store_url, cwd=git_repo)
    assert r.rc == 0, r
    assert "(empty)" in r.stdout and "needs upgrade" in r.stdout and headrev in r.stdout
    if backend == "sqlite":  # looking does not create the store (nor its folder)
        assert not Path(store_url[len("sqlite:///"):]).parent.exists()
    r = kb("db", "upgrade", "--db", store_url, cwd=git_repo)
    assert r.rc == 0, r
    assert f"store at revision {headrev} (head {headrev})" in r.stdout
    r = kb("db", "current", "--db", store_url, cwd=git_repo)
    assert r.rc == 0 and "up to date" in r.stdout, r
    r = kb("db", "upgrade", "--db", store_url, cwd=git_repo)  # idempotent
    assert r.rc == 0 and f"store at revision {headrev}" in r.stdout, r


def test_fresh_store_is_migrated_on_first_use(store_url, exports, git_repo):
    snap(exports["a"], name="w", db=store_url, repo=git_repo)
    assert scalar(store_url, "SELECT version_num FROM alembic_version") == head_revision(store_url)
    assert scalar(store_url, "SELECT count(*) FROM acceptance") == 0  # the newest table is there


def test_store_from_newer_kbase_is_refused_untouched(store_url, exports, git_repo, backend):
    from sqlalchemy import text

    from kbase.store.engine import sqlite_path

    engine = engine_for(store_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    path = sqlite_path(store_url)
    data = path.read_bytes() if path else None

    for args in (("snapshot", exports["a"], "--name", "w"), ("list",), ("db", "upgrade"), ("show", "@1")):
        r = kb(*args, "--db", store_url, cwd=git_repo)
        assert_one_line_error(r, "schema revision 9999 comes from a newer kbase")
        assert "not changed" in r.stderr
    with pytest.raises(StoreError, match="newer kbase"):
        store.open_store(store_url)
    r = kb("db", "current", "--db", store_url, cwd=git_repo)
    assert r.rc == 0 and "NEWER than this kbase" in r.stdout, r

    if path:
        assert path.read_bytes() == data
    else:
        from sqlalchemy import create_engine

        raw = create_engine(store_url)
        try:
            with raw.connect() as conn:
                assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "9999"
                assert conn.execute(text("SELECT count(*) FROM baseline")).scalar() == 0
        finally:
            raw.dispose()


# --------------------------------------------------------------------------- configuration


def test_kbase_db_env_selects_the_store(store_url, exports, git_repo, monkeypatch):
    monkeypatch.setenv("KBASE_DB", store_url)
    r = kb("snapshot", exports["a"], "--name", "env", cwd=git_repo)
    assert r.rc == 0, r
    assert [b.workload for b in baseline_rows(store_url)] == ["env"]
    assert not (git_repo / ".kbase").exists()
    r = kb("list", "--format", "json", cwd=git_repo)
    assert [b["workload"] for b in json.loads(r.stdout)["baselines"]] == ["env"]


@pytest.mark.slow
def test_pyproject_db_profile_and_name(exports, git_repo, tmp_path, monkeypatch):
    shutil.copy(exports["a"], git_repo / "x.sqlite")
    (git_repo / "pyproject.toml").write_text(
        '[project]\nname = "demo"\n\n[tool.kbase]\ndb = "stores/k.db"\nprofile = "x.sqlite"\n'
        'name = "cfgname"\n'
    )
    git(git_repo, "add", "pyproject.toml")
    git(git_repo, "commit", "-q", "-m", "kbase config")
    sub = git_repo / "src"
    r = kb("snapshot", cwd=sub)  # bare: profile, name and db from [tool.kbase]
    assert r.rc == 0, r
    cfg_db = f"sqlite:///{git_repo / 'stores' / 'k.db'}"
    [b] = baseline_rows(cfg_db)
    assert b.workload == "cfgname" and b.source_name == "x.sqlite" and b.commit == head(git_repo)
    assert b.dirty is False
    assert not (git_repo / ".kbase").exists() and not (sub / "stores").exists()
    # KBASE_DB beats [tool.kbase] db; --db beats both
    env_db = f"sqlite:///{tmp_path / 'env.db'}"
    monkeypatch.setenv("KBASE_DB", env_db)
    assert kb("snapshot", "--name", "viaenv", cwd=sub).rc == 0
    assert [b.workload for b in baseline_rows(env_db)] == ["viaenv"]
    opt_db = tmp_path / "opt.db"  # a plain path means SQLite
    assert kb("snapshot", "--name", "viaopt", "--db", opt_db, cwd=sub).rc == 0
    assert [b.workload for b in baseline_rows(f"sqlite:///{opt_db}")] == ["viaopt"]
    assert len(baseline_rows(cfg_db)) == 1 and len(baseline_rows(env_db)) == 1
    # no profile anywhere: a clear error
    monkeypatch.delenv("KBASE_DB")
    (git_repo / "pyproject.toml").write_text('[tool.kbase]\ndb = "stores/k.db"\n')
    r = kb("snapshot", cwd=sub)
    assert r.rc == 2 and "no profile given" in r.stderr, r


def test_default_store_at_repository_top_level(exports, git_repo):
    sub = git_repo / "src"
    r = kb("snapshot", exports["a"], "--name", "w", cwd=sub)
    assert r.rc == 0, r
    path = git_repo / ".kbase" / "kbase.db"
    assert path.is_file()
    assert not (sub / ".kbase").exists()
    [b] = baseline_rows(f"sqlite:///{path}")
    assert b.workload == "w" and b.commit == head(git_repo)
    r = kb("list", "--format", "json", cwd=sub)
    assert r.rc == 0 and len(json.loads(r.stdout)["baselines"]) == 1, r


def test_sqlite_store_is_in_wal_mode(exports, git_repo, tmp_path):
    path = tmp_path / "wal.db"
    snap(exports["a"], db=str(path), repo=git_repo)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


# --------------------------------------------------------------------------- history


@pytest.mark.slow
def test_history_one_row_per_baseline(store_url, exports, git_repo, top_a):
    db = ("--db", store_url)
    assert kb("snapshot", exports["b"], *db, "--name", "w", "--rev", "HEAD~1", cwd=git_repo).rc == 0
    assert kb("snapshot", exports["a"], *db, "--name", "w", cwd=git_repo).rc == 0
    assert kb("snapshot", exports["a"], *db, "--name", "other", cwd=git_repo).rc == 0
    ids = sorted(b.id for b in baseline_rows(store_url))
    kernel = top_a["kernels"][0]
    r = kb("history", kernel["name"], *db, "--format", "json", cwd=git_repo)
    assert r.rc == 2 and "other, w" in r.stderr, r  # two workloads stored, none named
    r = kb("history", kernel["name"], *db, "--format", "json", "--all-workloads", cwd=git_repo)
    assert r.rc == 0, r
    doc = json.loads(r.stdout)
    assert doc["schema"] == "kbase.history/1" and doc["kernel"]["name"] == kernel["name"]
    rows = doc["baselines"]
    assert [row["id"] for row in rows] == ids  # oldest first, one per baseline
    assert [row["commit"] for row in rows] == [head(git_repo, "HEAD~1"), head(git_repo), head(git_repo)]
    assert rows[1]["total_ns"] == kernel["total_ns"] and rows[1]["count"] == kernel["count"]
    assert math.isclose(rows[1]["per_iter_ns"], kernel["per_iter_ns"], rel_tol=REL)
    r = kb("history", kernel["name"], *db, "--name", "w", "--format", "json", cwd=git_repo)
    assert [row["id"] for row in json.loads(r.stdout)["baselines"]] == ids[:2]
    r = kb("history", "no_such_kernel", *db, "--format", "json", "--all-workloads", cwd=git_repo)
    assert r.rc == 2 and "no stored kernel matches" in r.stderr and not r.stdout, r
    r = kb("history", kernel["name"], *db, "--format", "csv", "--all-workloads", cwd=git_repo)
    assert r.rc == 0 and r.stdout.count("\n") == 4, r
    r = kb("history", kernel["name"], *db, "--all-workloads", cwd=git_repo)
    assert r.rc == 0 and "3 baseline(s)" in r.stdout, r

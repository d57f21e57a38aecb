"""The store's commands on SQLite and PostgreSQL: ``list``, ``show``, ``rm``, ``db current`` / ``upgrade`` and
migration on first use, a store from a newer kbase refused untouched, where the store is (``KBASE_DB``,
``[tool.kbase]``, the repository's top level), WAL mode, ``history``."""

from __future__ import annotations

import io
import json
import math
import shutil
import sqlite3
import sys
from pathlib import Path

import pytest

from kbase import store
from kbase.errors import StoreError

from helpers.library import snap
from helpers.store_cases import (
    REL,
    assert_one_line_error,
    assert_same_kernels,
    baseline_rows,
    counts,
    engine_for,
    git,
    head,
    head_revision,
    kb,
    scalar,
)

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

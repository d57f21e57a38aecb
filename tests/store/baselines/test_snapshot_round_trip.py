"""``kbase snapshot`` into the store, on SQLite and PostgreSQL: the stored leaderboard is ``kbase top``'s, the git
facts (commit, branch, dates in UTC), outside a repository, idempotence and ``--force``, a failed write rolled
back."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

import kbase
from kbase.analysis.leaderboard import COLUMNS
from kbase.errors import InputError, StoreError
from kbase.readers import source
from kbase.store import open_store as store_open
from kbase.store.write import writer

from helpers.library import snap
from helpers.store_cases import (
    C2_UTC,
    FULL_HASH,
    assert_one_line_error,
    assert_same_kernels,
    baseline_rows,
    counts,
    git,
    head,
    kb,
    kb_proc,
    scalar,
    table_records,
)

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

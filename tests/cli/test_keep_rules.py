"""Prune's keep rules, one set for ``kbase prune`` and for the tombstones ``kbase import`` applies (a tombstone
pushed to the data branch is a deletion too): a kept branch's whole history, a baseline stored on a kept branch
and what an acceptance needs are never deleted. A kept branch is a branch *name* (``main~3`` is refused),
resolved to its local and its remote-tracking ref both (a stale local ``main`` hides nothing), and a shallow
clone, or a worktree of one, is refused. The tombstones' rules are held on both backends (``fresh_url``).

The world: ``main`` (two commits, each with a baseline), ``feature`` (one commit off main, with a baseline),
``accepted`` (one commit off main whose baseline carries an acceptance), all exported with a tombstone for every
baseline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers.cli import run_kbase
from helpers.gitrepos import commit, git
from helpers.kineto_traces import make_trace
from helpers.store_state import commits_left, store_state


def _snap(repo: Path, db: str, trace: Path) -> None:
    r = run_kbase("snapshot", trace, "--db", db, "--repo", repo, "--name", "train", "-q")
    assert r.rc == 0, r


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("keep")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    trace = make_trace(root / "rank0.pt.trace.json", rank=0, world=1)
    db = f"sqlite:///{root / 'a.db'}"
    commits = {"main1": commit(repo, "1", "main one")}
    _snap(repo, db, trace)
    commits["main2"] = commit(repo, "2", "main two")
    _snap(repo, db, trace)
    git(repo, "checkout", "-q", "-b", "feature", commits["main1"])
    commits["feature"] = commit(repo, "f", "feature")
    _snap(repo, db, trace)
    git(repo, "checkout", "-q", "-b", "accepted", commits["main1"])
    commits["accepted"] = commit(repo, "a", "accepted")
    _snap(repo, db, trace)
    r = run_kbase("accept", "relu*", "--rev", commits["accepted"], "--reason", "known", "--db", db, "--repo", repo,
                  "--name", "train")
    assert r.rc == 0, r
    git(repo, "checkout", "-q", "main")
    folder = root / "data"
    assert run_kbase("export", folder, "--db", db, "--repo", repo).rc == 0
    _tombstone_everything(db, folder)
    return {"root": root, "repo": repo, "db": root / "a.db", "folder": folder, "commits": commits}


def _tombstone_everything(db: str, folder: Path) -> None:
    """A tombstone for every stored baseline: what a hostile push (or a prune run with the wrong rules) leaves."""
    from kbase.store.engine import open_store
    from kbase.store.transfer.export_files import TOMBSTONE_SUFFIX, file_name, tombstone_bytes
    from kbase.store.transfer.transfer import read_stored

    with open_store(db, readonly=True) as st:
        for s in read_stored(st.reader, st.reader.baseline_ids()).values():
            data = tombstone_bytes(s.key, s.content)
            (folder / file_name(data, TOMBSTONE_SUFFIX)).write_bytes(data)


def _commits_left(db: Path) -> set[str]:
    return commits_left(f"sqlite:///{db}")


def _fresh(world, tmp_path: Path) -> Path:
    db = tmp_path / "b.db"
    shutil.copyfile(world["db"], db)
    return db


@pytest.fixture(params=["sqlite", "postgresql"])
def fresh_url(request, world, tmp_path) -> str:
    """A copy of the world's store on each backend (PostgreSQL: the same rows, ``pg.copy_store``): the
    tombstones' keep rules hold on both."""
    if request.param == "sqlite":
        return f"sqlite:///{_fresh(world, tmp_path)}"
    return request.getfixturevalue("pg_copy_of")(f"sqlite:///{world['db']}")


def test_imported_tombstones_obey_the_keep_rules(world, fresh_url):
    r = run_kbase("import", world["folder"], "--db", fresh_url, "--repo", world["repo"])
    assert r.rc == 0, r
    c = world["commits"]
    # main's history (its default branch) and the accepted commit stay; the feature's baseline goes
    assert commits_left(fresh_url) == {c["main1"], c["main2"], c["accepted"]}
    assert "1 deleted by tombstones" in r.stderr and "3 tombstone(s) not applied" in r.stderr, r
    warnings = [line for line in r.stderr.splitlines() if "tombstone not applied" in line]
    assert len(warnings) == 3 and sum("in the history of main" in w for w in warnings) == 2, r
    assert any("acceptance" in w and c["accepted"][:12] in w for w in warnings), r


def test_a_named_kept_branch_keeps_its_baselines_from_tombstones(world, fresh_url):
    r = run_kbase("import", world["folder"], "--keep-branch", "feature", "--db", fresh_url, "--repo", world["repo"])
    assert r.rc == 0, r
    c = world["commits"]
    # feature's history holds main1 too; main2 is nobody's now; the accepted commit's baseline stays
    assert commits_left(fresh_url) == {c["main1"], c["feature"], c["accepted"]}


def test_without_a_repository_no_tombstone_deletes_anything(world, tmp_path, fresh_url):
    elsewhere = tmp_path / "not-a-repo"
    elsewhere.mkdir()
    before = store_state(fresh_url)
    r = run_kbase("import", world["folder"], "--db", fresh_url, "--repo", elsewhere)
    assert r.rc == 0 and "0 deleted by tombstones" in r.stderr and "could not be checked" in r.stderr, r
    assert store_state(fresh_url) == before


@pytest.mark.parametrize("name", ["main~1", "main^", "HEAD", "@{-1}", "-main", "main..feature"])
def test_prune_keeps_branches_by_name_only(world, tmp_path, name):
    db = _fresh(world, tmp_path)
    for command in (("prune", "--keep-branch", name), ("import", world["folder"], "--keep-branch", name)):
        r = run_kbase(*command, "--db", f"sqlite:///{db}", "--repo", world["repo"])
        assert r.rc == 2 and "not a branch name" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r
    assert _commits_left(db) == _commits_left(world["db"])


def test_a_stale_local_branch_does_not_hide_what_origin_holds(world, tmp_path):
    """``feature`` merged into ``main`` on the remote; the clone's local ``main`` predates the merge. The
    feature's baseline (stored on ``feature``) is in ``origin/main``'s history: prune keeps it."""
    origin = tmp_path / "origin"
    shutil.copytree(world["repo"], origin)
    git(origin, "-c", "user.name=dev", "-c", "user.email=dev@kbase.invalid", "merge", "-q", "-s", "ours", "-m", "merge",
        "feature")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    git(clone, "checkout", "-q", "--detach")
    git(clone, "branch", "-q", "-f", "main", world["commits"]["main2"])  # stale: before the merge
    db = _fresh(world, tmp_path)
    r = run_kbase("prune", "--keep-branch", "main", "--yes", "--db", f"sqlite:///{db}", "--repo", clone)
    assert r.rc == 0, r
    assert world["commits"]["feature"] in _commits_left(db)


def test_a_worktree_of_a_shallow_clone_is_refused(world, tmp_path):
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{world['repo']}", str(shallow))
    worktree = tmp_path / "wt"
    git(shallow, "worktree", "add", "-q", "--detach", str(worktree))
    db = _fresh(world, tmp_path)
    r = run_kbase("prune", "--keep-branch", "main", "--yes", "--db", f"sqlite:///{db}", "--repo", worktree)
    assert r.rc == 2 and "shallow clone" in r.stderr, r
    assert _commits_left(db) == _commits_left(world["db"])
    # and an import there applies no tombstone (the keep rules cannot be checked)
    r = run_kbase("import", world["folder"], "--db", f"sqlite:///{db}", "--repo", worktree)
    assert r.rc == 0 and "0 deleted by tombstones" in r.stderr, r


@pytest.mark.parametrize("age", ["999999d", "999999w", "999999h"])
def test_an_age_past_the_calendar_keeps_everything(world, tmp_path, age):
    db = _fresh(world, tmp_path)
    r = run_kbase("prune", "--keep-branch", "main", "--older-than", age, "--yes", "--db", f"sqlite:///{db}",
                  "--repo", world["repo"])
    assert r.rc == 0, r
    assert _commits_left(db) == _commits_left(world["db"])

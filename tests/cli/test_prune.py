"""``kbase prune``: a dry-run listing by default (every baseline, kept or not and why), ``--yes`` deletes; it never
deletes a baseline in a kept branch's history, stored on a kept branch, needed by an acceptance (its commit and
the stored base before it) or younger than ``--older-than``; a branch that names nothing, a shallow clone, a
missing ``--keep-branch`` or a bad age is exit 2 with the store unchanged.

The world: a generated history of 4 commits on ``main``; a pull-request branch ``feature`` (one baseline), a
branch ``feature2`` on top of it whose commit carries an acceptance, and a baseline of a commit this clone does
not hold (a CI merge commit: ``--no-git --rev``)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from helpers.cli import run_kbase
from helpers.gitrepos import commit, git

pytestmark = pytest.mark.slow

MERGE_COMMIT = "ab" * 20






@pytest.fixture(scope="module")
def history(tmp_path_factory):
    from kbase.synth.history import HistorySpec, generate_history

    return generate_history(tmp_path_factory.mktemp("prune") / "h", HistorySpec(commits=4, steps=[], iterations=4))


@pytest.fixture
def world(history, tmp_path):
    repo, db = tmp_path / "repo", tmp_path / "kbase.db"
    shutil.copytree(history.repo, repo)
    shutil.copyfile(history.db_url.removeprefix("sqlite:///"), db)
    url = f"sqlite:///{db}"
    export = history.root / "exports" / "c003.sqlite"
    git(repo, "checkout", "-q", "-b", "feature")
    f1 = commit(repo, "feature one", "feature one")
    assert run_kbase("snapshot", export, "--db", url, "--repo", repo, "--name", "train", "-q").rc == 0
    git(repo, "checkout", "-q", "-b", "feature2")
    f2 = commit(repo, "feature two", "feature two")
    assert run_kbase("snapshot", export, "--db", url, "--repo", repo, "--name", "train", "-q").rc == 0
    r = run_kbase("accept", "nvjet*", "--rev", f2, "--reason", "known", "--db", url, "--repo", repo, "--name", "train")
    assert r.rc == 0, r
    r = run_kbase("snapshot", export, "--db", url, "--no-git", "--rev", MERGE_COMMIT, "--name", "train", "-q")
    assert r.rc == 0, r
    # a third branch, deleted since: its baseline is nobody's
    git(repo, "checkout", "-q", "main")
    git(repo, "checkout", "-q", "-b", "gone")
    commit(repo, "abandoned", "abandoned")
    assert run_kbase("snapshot", export, "--db", url, "--repo", repo, "--name", "train", "-q").rc == 0
    git(repo, "checkout", "-q", "main")
    git(repo, "branch", "-q", "-D", "gone")
    return {"repo": repo, "db": db, "url": url, "main": history.commits, "f1": f1, "f2": f2}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _prune(world, *args: str):
    return run_kbase("prune", "--db", world["url"], "--repo", world["repo"], *args)


def _listing(world, *args: str) -> dict[str, dict]:
    r = _prune(world, "--format", "json", *args)
    assert r.rc == 0, r
    doc = json.loads(r.stdout)
    assert doc["schema"] == "kbase.prune/1"
    return {b["commit"]: b for b in doc["baselines"]}


def test_dry_run_lists_every_baseline_with_why_and_changes_nothing(world):
    before = _digest(world["db"])
    got = _listing(world, "--keep-branch", "main")
    assert _digest(world["db"]) == before
    for c in world["main"]:
        assert got[c]["action"] == "keep" and got[c]["why"] == "in the history of main"
    assert got[world["f2"]]["action"] == "keep" and "acceptance #1 is at its commit" in got[world["f2"]]["why"]
    assert got[world["f1"]]["action"] == "keep" and got[world["f1"]]["why"] == "the base of acceptance #1"
    assert got[MERGE_COMMIT]["action"] == "delete" and "not on a kept branch" in got[MERGE_COMMIT]["why"]
    gone = [b for c, b in got.items() if c not in (*world["main"], world["f1"], world["f2"], MERGE_COMMIT)]
    assert len(gone) == 1 and gone[0]["action"] == "delete" and gone[0]["branch"] == "gone"
    table = _prune(world, "--keep-branch", "main")
    assert table.rc == 0 and "would delete 2 baseline(s), keep 6" in table.stdout, table
    assert "the base of acceptance #1" in table.stdout and "dry run" in table.stdout
    assert _digest(world["db"]) == before


def test_yes_deletes_only_what_nobody_needs_and_the_gate_still_runs(world):
    r = _prune(world, "--keep-branch", "main", "--yes")
    assert r.rc == 0 and "deleted 2 baseline(s), kept 6" in r.stdout, r
    listed = json.loads(run_kbase("list", "--db", world["url"], "--format", "json").stdout)["baselines"]
    assert sorted(b["commit"] for b in listed) == sorted([*world["main"], world["f1"], world["f2"]])
    gate = run_kbase("gate", "HEAD~1", "HEAD", "--db", world["url"], "--repo", world["repo"], "--name", "train")
    assert gate.rc == 0, gate
    again = _listing(world, "--keep-branch", "main")
    assert all(b["action"] == "keep" for b in again.values())


def test_a_kept_branch_keeps_what_was_stored_on_it(world):
    got = _listing(world, "--keep-branch", "main", "--keep-branch", "feature")
    assert got[world["f1"]]["why"] == "in the history of main, feature"
    assert got[MERGE_COMMIT]["action"] == "delete"


def test_older_than_keeps_the_young(world, history):
    got = _listing(world, "--keep-branch", "main", "--older-than", "30d")
    assert got[MERGE_COMMIT]["action"] == "keep" and got[MERGE_COMMIT]["why"] == "newer than 30d"
    import kbase

    settings = kbase.Settings.load(db=world["url"], repo=world["repo"])
    later = kbase.prune(settings, keep_branches=["main"], older_than="30d", now=datetime.now(UTC) + timedelta(days=31))
    assert {b.commit for b in later.deleted} == {MERGE_COMMIT, *[b.commit for b in later.deleted]}
    assert MERGE_COMMIT in {b.commit for b in later.deleted} and not later.applied
    assert "would delete 2" in repr(later)


def test_origin_branch_when_there_is_no_local_one(world):
    main = git(world["repo"], "rev-parse", "main")
    git(world["repo"], "update-ref", "refs/remotes/origin/trunk", main)
    got = _listing(world, "--keep-branch", "trunk")
    assert got[world["main"][0]]["why"] == "in the history of trunk"


@pytest.mark.parametrize(("args", "words"), [
    ((), "--keep-branch"),
    (("--keep-branch", "nosuch"), "no branch 'nosuch'"),
    (("--keep-branch", "main", "--older-than", "30 days"), "--older-than"),
    (("--keep-branch", "main", "--older-than", "-1d"), "--older-than"),
    (("--keep-branch", "main", "--format", "csv"), "--format"),
])
def test_bad_input_is_one_line_exit_2_store_unchanged(world, args, words):
    before = _digest(world["db"])
    r = _prune(world, *args, "--yes")
    assert r.rc == 2 and r.stdout == "", r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kbase: error:") and words in lines[0], r
    assert _digest(world["db"]) == before


def test_a_shallow_clone_is_refused(world, tmp_path):
    shallow = tmp_path / "shallow"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{world['repo']}", str(shallow)], check=True)
    before = _digest(world["db"])
    r = run_kbase("prune", "--db", world["url"], "--repo", shallow, "--keep-branch", "main", "--yes")
    assert r.rc == 2 and "shallow clone" in r.stderr, r
    assert _digest(world["db"]) == before

"""Fixtures the store's test modules share."""

from __future__ import annotations

import pytest

from helpers.cli import run_kbase
from helpers.gitrepos import commit, git
from helpers.kineto_traces import make_trace


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(repo, the exported baseline file's bytes)."""
    root = tmp_path_factory.mktemp("hostile")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit(repo, "x = 1\n", "first")
    trace = make_trace(root / "rank0.pt.trace.json", rank=0, world=1)
    db = f"sqlite:///{root / 'a.db'}"
    r = run_kbase("snapshot", trace, "--db", db, "--repo", repo, "--name", "train", "-q")
    assert r.rc == 0, r
    r = run_kbase("export", root / "out", "--db", db, "--repo", repo)
    assert r.rc == 0, r
    (path,) = (root / "out").glob("*.baseline")
    return repo, path.read_bytes()

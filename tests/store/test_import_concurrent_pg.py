"""Two ``kbase import`` runs of one folder into one PostgreSQL store at once: both succeed and every baseline is
stored once (they used to race to insert the same baseline: a duplicate-key error in 3 of 8 trials). Imports
take a transaction-scoped advisory lock; SQLite's BEGIN IMMEDIATE already queued them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers.cli import run_kbase
from helpers.gitrepos import commit, git
from helpers.kineto_traces import make_trace, trace_doc, write_trace

pytestmark = pytest.mark.slow  # a PostgreSQL server and fresh interpreters


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("pgimport")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    db = f"sqlite:///{root / 'a.db'}"
    for i in range(4):
        commit(repo, str(i), f"c{i}")
        trace = write_trace(root / f"t{i}.json", trace_doc(0, 1, steps=4 + i))
        assert run_kbase("snapshot", trace, "--db", db, "--repo", repo, "--name", "train", "-q").rc == 0
    make_trace(root / "unused.json")
    assert run_kbase("export", root / "data", "--db", db, "--repo", repo).rc == 0
    return repo, root / "data"


def test_concurrent_imports_into_postgresql_store_each_baseline_once(pg_url, folder):
    from helpers.pg import create_database, drop_database

    repo, data = folder
    env = {k: v for k, v in os.environ.items() if k != "KBASE_DEBUG"}
    for _ in range(4):
        url = create_database(pg_url)
        try:
            assert run_kbase("db", "upgrade", "--db", url).rc == 0  # the schema first: the race is the import's
            procs = [subprocess.Popen([sys.executable, "-m", "kbase.cli", "import", str(data), "--db", url, "--repo",
                                       str(repo)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                     for _ in range(2)]
            results = [(p.wait(timeout=120), p.stderr.read()) for p in procs]
            assert all(rc == 0 for rc, _ in results), results
            assert sorted("4 new baseline(s)" in err for _, err in results) == [False, True], results
            listed = run_kbase("list", "--db", url, "--format", "json", "--limit", "0")
            assert listed.rc == 0 and len(json.loads(listed.stdout)["baselines"]) == 4, listed
        finally:
            drop_database(pg_url, url)

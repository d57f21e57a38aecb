"""Issue #6, bad-input matrix: every bad input is exit code 2, exactly one line on stderr
(``kbase: error: …``) naming the file or value and what is wrong, no traceback — and the store is
left byte for byte as it was (SQLite: sha256 of the database file and its ``-wal``; PostgreSQL:
every row of every table).

Each case runs against a store that already holds a baseline, on SQLite and (where a server can
run, see ``tests/pg.py``) PostgreSQL. Most cases run in this process (``conftest.run_kbase``); the
ones where process-level behaviour matters (a lock held by another process, the busy timeout read
at import, an unreachable server) run ``python -m kbase.cli`` as a child.

Already covered elsewhere with the same checks, so not repeated here:

- ``tests/test_top_errors.py``: the same bad profiles for ``kbase top`` (one line, exit 2, input
  untouched); here they go through ``kbase snapshot`` with a store present, which is new.
- ``tests/store/baselines/test_store_commands.py::test_store_from_newer_kbase_is_refused_untouched``: a store stamped with
  Alembic revision ``9999`` is refused by snapshot/list/show/db upgrade, one line, exit 2, store
  bytes (SQLite) and rows (PostgreSQL) unchanged.
- ``tests/store/baselines/test_snapshot_round_trip.py::test_outside_git_repository_and_no_git`` and ``test_git_facts``: no git
  repository / detached HEAD on an empty store (repeated here with a baseline present).
- ``tests/test_gate.py::test_exit_2_missing_baseline_and_unknown_revision`` and
  ``test_malformed_gate_config_exit_2``: gate on unknown revisions / a bad ``[tool.kbase.gate]``.

This folder holds the matrix (``test_bad_profiles.py``, ``test_bad_references.py``, ``test_bad_stores.py``);
its world is the folder's conftest, the helpers ``tests/helpers/bad_input.py``.
"""

from __future__ import annotations

import gc
import json
import subprocess
from pathlib import Path

import pytest

from kbase.store import open_store as store_open
from kbase.store.write import queries

from helpers.bad_input import (
    assert_bad_input,
    baseline_count,
    git,
    kb,
    make_repo,
    store_state,
)

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


# --------------------------------------------------------------------------- git and baseline references


@pytest.mark.slow
def test_unknown_revision_diff_gate_snapshot(store_url, world):
    before = store_state(store_url)
    db = ("--db", store_url, "--repo", world.repo, "--name", "w")
    for args in (("diff", "no-such-rev", "HEAD"), ("gate", "HEAD", "no-such-rev"),
                 ("snapshot", world.tiny, "--rev", "no-such-rev", "--force")):
        res = kb(*args, *db)
        assert_bad_input(res, "unknown git revision 'no-such-rev'")
        assert store_state(store_url) == before, args


def test_not_a_git_repository(store_url, world):
    before = store_state(store_url)
    res = kb("snapshot", world.tiny, "--db", store_url, "--repo", world.nongit, "--force")
    assert_bad_input(res, str(world.nongit), "not a git repository")
    res = kb("gate", "--db", store_url, "--repo", world.nongit, "--name", "w")
    assert_bad_input(res, "not a git repository")
    assert store_state(store_url) == before


@pytest.fixture(scope="module")
def shallow(world) -> Path:
    """``git clone --depth 1`` of the world repository: HEAD's parent is not there."""
    dest = world.root / "shallow"
    out = subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{world.repo}", str(dest)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert (dest / ".git" / "shallow").exists()
    return dest


def test_shallow_clone_without_head_parent(store_url, world, shallow):
    before = store_state(store_url)
    db = ("--db", store_url, "--repo", shallow, "--name", "w")
    # default gate: HEAD~1 vs HEAD, and HEAD~1 is cut off
    res = kb("gate", *db)
    line = assert_bad_input(res, "HEAD~1")
    assert "shallow" in line
    res = kb("diff", "HEAD~1", "HEAD", *db)
    assert_bad_input(res, "HEAD~1", "shallow")
    res = kb("snapshot", world.tiny, "--rev", "HEAD~1", *db)
    assert_bad_input(res, "HEAD~1", "shallow")
    assert store_state(store_url) == before


def test_shallow_clone_ancestry_walk_stops_at_the_cut(store_url, world, shallow):
    """HEAD exists but has no baseline of workload ``nope``, which the store has never held: one clear line
    (the workload is unknown: issue 38), never a crash on the shallow clone's missing parent."""
    before = store_state(store_url)
    res = kb("diff", "@1", "HEAD", "--db", store_url, "--repo", shallow, "--name", "nope")
    assert_bad_input(res, "no workload of that name", "'nope'")
    res = kb("gate", "@1", "HEAD", "--db", store_url, "--repo", shallow, "--name", "nope")
    assert_bad_input(res, "no workload of that name")
    assert store_state(store_url) == before


def test_shallow_clone_head_has_a_baseline(store_url, world, shallow):
    """In the shallow clone HEAD is the world's HEAD, which has a baseline: diff works."""
    res = kb("diff", "@1", "HEAD", "--db", store_url, "--repo", shallow, "--name", "w", "--format", "json")
    assert res.rc == 0, res
    assert json.loads(res.stdout)["after"]["commit"] == world.head()


def test_detached_head_snapshot_works(store_url, world, tmp_path):
    """Detached HEAD is not an error: the baseline says detached=True, branch ""."""

    clone = tmp_path / "detached"
    git(tmp_path, "clone", "-q", str(world.repo), str(clone))
    git(clone, "checkout", "-q", "--detach", "HEAD~1")
    n = baseline_count(store_url)
    res = kb("snapshot", world.tiny, "--db", store_url, "--repo", clone, "--name", "detached-w",
             "--format", "json", "--limit", "1")
    assert res.rc == 0, res
    assert "(detached)" in res.stderr
    doc = json.loads(res.stdout)
    assert doc["created"] and doc["commit"] == world.head("HEAD~1")
    lst = kb("list", "--db", store_url, "--name", "detached-w", "--format", "json")
    assert lst.rc == 0, lst
    [b] = json.loads(lst.stdout)["baselines"]
    assert b["detached"] is True and b["branch"] == "" and b["commit"] == world.head("HEAD~1")
    assert baseline_count(store_url) == n + 1
    with store_open(store_url) as st:
        queries.delete_baseline(st, b["id"])  # the module's store keeps its two baselines
    gc.collect()  # the commands' pooled connections: closed, the WAL checkpointed


@pytest.mark.slow
def test_baseline_id_that_does_not_exist(store_url, world):
    before = store_state(store_url)
    db = ("--db", store_url, "--repo", world.repo)
    assert_bad_input(kb("show", "@999", *db), "@999", "no such baseline")
    assert_bad_input(kb("diff", "@999", "@1", *db), "@999", "no such baseline")
    assert_bad_input(kb("gate", "@1", "@999", *db), "@999", "no such baseline")
    assert_bad_input(kb("rm", "@999", "--yes", *db), "@999", "no such baseline")
    assert store_state(store_url) == before


@pytest.mark.slow
def test_workload_with_no_baselines(store_url, world):
    before = store_state(store_url)
    # a workload the store has never held (it holds others): said as such, with the stored names (issue 38)
    res = kb("gate", "--name", "nope", "--db", store_url, "--repo", world.repo)
    assert_bad_input(res, "no workload of that name", "'nope'", "it holds")
    res = kb("show", "HEAD", "--name", "nope", "--db", store_url, "--repo", world.repo)
    assert_bad_input(res, "no workload of that name", "'nope'")
    assert store_state(store_url) == before


# --------------------------------------------------------------------------- configuration and usage


@pytest.mark.slow
@pytest.mark.parametrize("toml, mention", [
    ("[tool.kbase\nname = 'x'\n", "malformed TOML"),
    ("[tool.kbase]\nwarmup = 'two'\n", "warmup must be a int"),
    ("[tool.kbase]\nname = 3\n", "name must be a str"),
    ("[tool.kbase]\ntrim = [1]\n", "trim"),
    ("[tool.kbase]\nno_such_key = 1\n", "unknown key 'no_such_key'"),
], ids=["bad-toml", "warmup-type", "name-type", "trim-shape", "unknown-key"])
def test_malformed_tool_kbase(store_url, world, tmp_path, toml, mention):
    repo = make_repo(tmp_path / "cfg", commits=2)
    (repo / "pyproject.toml").write_text(toml)
    before = store_state(store_url)
    for args in (("snapshot", world.tiny, "--force"), ("gate", "@1", "@2"), ("diff", "@1", "@2")):
        res = kb(*args, "--db", store_url, "--repo", repo)
        assert_bad_input(res, str(repo / "pyproject.toml"), mention)
    assert store_state(store_url) == before


@pytest.mark.slow
def test_unknown_format_everywhere(store_url, world):
    before = store_state(store_url)
    db = ("--db", store_url, "--repo", world.repo, "--name", "w")
    for args in (("snapshot", world.tiny, "--force"), ("show", "@1"), ("list",), ("diff", "@1", "@2"),
                 ("gate", "@1", "@2"), ("history", "x")):
        res = kb(*args, *db, "--format", "xml")
        assert_bad_input(res, "xml")
    assert store_state(store_url) == before

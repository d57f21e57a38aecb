"""The workload a command means when ``--name`` is not given (``api.common.workload_for``): the one named by
``[tool.kbase] name`` or ``KBASE_NAME``, else the store's only workload, else exit 2 with one line listing the
stored workloads and naming ``--name`` — the same for every command that reads a workload (diff, gate, history,
steps, report, accept, show of a revision; ``list`` lists every workload unless one is named). And ``list``,
``steps`` and ``history`` show each commit's subject and date (from git; the stored date without it).

One generated history (8 commits of ``train`` with a GEMM 30% slower at commit 5) is copied per case: as it is
(one workload), with a second workload ``infer`` stored at the last two commits (several), and an empty store.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from helpers.cli import run_kbase

pytestmark = pytest.mark.slow

GEMM = "nvjet_hsh_256x128"
# every command that reads the store for one workload, and a word of its successful output
READING = {
    "diff": (["diff", "HEAD~1", "HEAD", "--format", "json"], "kbase.diff"),
    "gate": (["gate", "HEAD~1", "HEAD", "--format", "json"], "kbase.diff"),
    "history": (["history", GEMM, "--format", "json"], "kbase.history"),
    "steps": (["steps", "--format", "json"], "kbase.steps"),
    "show": (["show", "HEAD", "--format", "json"], "kbase.leaderboard"),
    "report": (["report", "--out", "{tmp}/site", "--quiet"], "index.html"),
    "accept": (["accept", "--rev", "HEAD", "--reason", "known", f"{GEMM}*"], ""),
}


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    from kbase.synth.history import HistorySpec, InjectedStep, _kernel, generate_history

    spec = HistorySpec(commits=8, steps=[InjectedStep(5, _kernel(GEMM), 1.3, "gemm: switch to 256x128 tiles")],
                       iterations=4)
    return generate_history(tmp_path_factory.mktemp("workloads") / "h", spec)


@pytest.fixture
def world(history, tmp_path):
    """A copy of the history's repository and store (the cases write acceptances and pyproject.toml)."""
    repo, db = tmp_path / "repo", tmp_path / "kbase.db"
    shutil.copytree(history.repo, repo)
    shutil.copyfile(history.db_url.removeprefix("sqlite:///"), db)
    return history, repo, f"sqlite:///{db}"


def _add_workload(history, repo: Path, db: str, name: str = "infer") -> None:
    exports = history.root / "exports"
    for rev, export in (("HEAD~1", "c006.sqlite"), ("HEAD", "c007.sqlite")):
        r = run_kbase("snapshot", exports / export, "--db", db, "--repo", repo, "--rev", rev, "--name", name, "-q")
        assert r.rc == 0, r


def _run(case: str, repo: Path, db: str, tmp: Path, *extra: str):
    args, _ = READING[case]
    return run_kbase(*[a.format(tmp=tmp) for a in args], "--db", db, "--repo", repo, *extra)


@pytest.mark.parametrize("case", list(READING))
def test_one_stored_workload_needs_no_name(world, case, tmp_path):
    history, repo, db = world
    r = _run(case, repo, db, tmp_path)
    assert r.rc in (0, 1), r
    _, word = READING[case]
    assert word in r.stdout or (case == "accept" and "accepted" in r.stderr), r
    if case in ("diff", "gate"):
        assert json.loads(r.stdout)["after"]["workload"] == history.workload
    if case == "history":
        assert json.loads(r.stdout)["filters"]["workload"] == history.workload
    if case == "steps":
        assert json.loads(r.stdout)["workload"] == history.workload and json.loads(r.stdout)["steps"]


@pytest.mark.parametrize("case", list(READING))
def test_several_workloads_and_no_name_exit_2_listing_them(world, case, tmp_path):
    history, repo, db = world
    _add_workload(history, repo, db)
    before = Path(db.removeprefix("sqlite:///")).read_bytes()
    r = _run(case, repo, db, tmp_path)
    assert r.rc == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r
    assert "infer, train" in lines[0] and "--name" in lines[0], lines[0]
    assert Path(db.removeprefix("sqlite:///")).read_bytes() == before  # nothing written
    # each way of naming it chooses it
    named = _run(case, repo, db, tmp_path, "--name", "train")
    assert named.rc in (0, 1), named


def test_a_configured_or_environment_name_is_the_name(world, tmp_path, monkeypatch):
    history, repo, db = world
    _add_workload(history, repo, db)
    (repo / "pyproject.toml").write_text('[tool.kbase]\nname = "infer"\n', encoding="utf-8")
    r = _run("diff", repo, db, tmp_path)
    assert r.rc == 0 and json.loads(r.stdout)["after"]["workload"] == "infer", r
    monkeypatch.setenv("KBASE_NAME", "train")  # the environment over pyproject.toml
    r = _run("diff", repo, db, tmp_path)
    assert r.rc == 0 and json.loads(r.stdout)["after"]["workload"] == "train", r
    r = _run("diff", repo, db, tmp_path, "--name", "infer")  # and the flag over both
    assert r.rc == 0 and json.loads(r.stdout)["after"]["workload"] == "infer", r
    monkeypatch.delenv("KBASE_NAME")
    r = run_kbase("list", "--db", db, "--repo", repo, "--format", "json")
    assert {b["workload"] for b in json.loads(r.stdout)["baselines"]} == {"infer"}  # a named workload filters


def test_list_lists_every_workload_unless_one_is_named(world):
    history, repo, db = world
    _add_workload(history, repo, db)
    r = run_kbase("list", "--db", db, "--repo", repo, "--format", "json")
    assert r.rc == 0 and {b["workload"] for b in json.loads(r.stdout)["baselines"]} == {"infer", "train"}
    r = run_kbase("list", "--db", db, "--repo", repo, "--format", "json", "--name", "infer")
    assert {b["workload"] for b in json.loads(r.stdout)["baselines"]} == {"infer"}


def test_no_stored_workload_means_the_default_one(tmp_path, history):
    """An empty store: the commands mean the workload a bare ``kbase snapshot`` stores, and say there is no
    baseline of it (the gate's ``--if-no-baseline pass`` passes)."""
    from kbase.store import open_store

    db = f"sqlite:///{tmp_path / 'empty.db'}"
    open_store(db).close()
    r = run_kbase("diff", "HEAD~1", "HEAD", "--db", db, "--repo", history.repo)
    assert r.rc == 2 and "no baseline of workload 'default'" in r.stderr, r
    r = run_kbase("gate", "--db", db, "--repo", history.repo, "--if-no-baseline", "pass")
    assert r.rc == 0, r
    r = run_kbase("steps", "--db", db, "--repo", history.repo, "--format", "json")
    assert r.rc == 0 and json.loads(r.stdout)["workload"] == "default" and json.loads(r.stdout)["steps"] == []


def test_list_steps_and_history_show_subject_and_date(world, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # wide enough for every column (the tables drop columns to fit)
    history, repo, db = world
    dates = subprocess.run(["git", "-C", str(repo), "log", "--format=%H %cI"], capture_output=True, text=True,
                           check=True).stdout.split("\n")
    date_of = {line.split()[0]: line.split()[1] for line in dates if line}
    subject_of = dict(zip(history.commits, history.subjects))
    r = run_kbase("list", "--db", db, "--repo", repo, "--format", "json")
    for b in json.loads(r.stdout)["baselines"]:
        assert b["subject"] == subject_of[b["commit"]]
        assert b["commit_date"][:19] == date_of[b["commit"]][:19]
    table = run_kbase("list", "--db", db, "--repo", repo).stdout
    assert "gemm: switch to 256x128 tiles" in table and date_of[history.commits[5]][:10] in table

    r = run_kbase("steps", "--db", db, "--repo", repo, "--format", "json")
    step = next(s for s in json.loads(r.stdout)["steps"] if s["short_name"].startswith(GEMM))
    assert step["first_commit"] == history.commits[5]
    assert step["subject"] == "gemm: switch to 256x128 tiles" and step["commit_date"][:10] == date_of[
        history.commits[5]][:10]
    assert "gemm: switch to 256x128 tiles" in run_kbase("steps", "--db", db, "--repo", repo).stdout

    r = run_kbase("history", GEMM, "--db", db, "--repo", repo, "--format", "json")
    rows = json.loads(r.stdout)["baselines"]
    assert [x["subject"] for x in rows] == history.subjects
    assert all(x["commit_date"][:19] == date_of[x["commit"]][:19] for x in rows)
    assert "gemm: switch to 256x128 tiles" in run_kbase("history", GEMM, "--db", db, "--repo", repo).stdout
    csv_head = run_kbase("history", GEMM, "--db", db, "--repo", repo, "--format", "csv").stdout.splitlines()[0]
    assert "subject" in csv_head and "commit_date" in csv_head


def test_without_the_repository_the_stored_date_and_no_subject(world, tmp_path):
    """A CI artifact's store read outside its repository: dates from the store, subjects empty."""
    history, _, db = world
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    r = run_kbase("history", GEMM, "--db", db, "--repo", elsewhere, "--format", "json")
    assert r.rc == 0, r
    rows = json.loads(r.stdout)["baselines"]
    assert all(x["subject"] == "" and x["commit_date"] for x in rows)
    r = run_kbase("list", "--db", db, "--repo", elsewhere, "--format", "json")
    assert all(b["subject"] == "" and b["commit_date"] for b in json.loads(r.stdout)["baselines"])


def test_a_long_subject_is_cut_to_fit(world, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    history, repo, db = world
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "x" * 300], check=True)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    r = run_kbase("snapshot", history.root / "exports" / "c000.sqlite", "--db", db, "--repo", repo, "-q")
    assert r.rc == 0, r
    out = run_kbase("list", "--db", db, "--repo", repo).stdout
    line = next(x for x in out.splitlines() if head[:12] in x)
    assert "x" * 60 in line and "x" * 80 not in line and "…" in line

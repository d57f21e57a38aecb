"""``kbase bisect`` on generated repositories: a line of 64 commits, each setting in ``perf.json`` how much slower
one kernel is (``helpers.bisect_repos``); the capture command is ``capture.py`` in the repository, which writes
an nsys-style export with kbase's own generator. GOOD and BAD are stored first, as CI would have them.

A +5% step of the kernel at commit k is found in at most 7 runs, for k at both ends and inside; a partial change
is a range; a failing midpoint is skipped and listed; the user's working tree, index and stash are byte-identical
afterwards; stored baselines are reused; Ctrl-C leaves no worktree and keeps the finished snapshots."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.bisect_repos import COMMAND, Line, capture_at, make_line
from helpers.cli import run_kbase
from helpers.gitrepos import git

STEP = [1.0] * 20 + [1.05] * 44  # +5% of the kernel from commit 20 on


def _store(line: Line, tmp: Path, gpus: int = 1) -> str:
    import kbase

    db = f"sqlite:///{tmp / 'kbase.db'}"
    settings = kbase.Settings.load(repo=line.repo, db=db, name="train")
    for i in (0, len(line.commits) - 1):
        kbase.snapshot(capture_at(line, i, tmp / f"ci-{i}.sqlite", gpus), settings, rev=line.commits[i])
    return db


@pytest.fixture(scope="module")
def stepped(tmp_path_factory):
    """The line with the step at 20, GOOD and BAD stored: copied per test (repository and store)."""
    tmp = tmp_path_factory.mktemp("bisect")
    line = make_line(tmp / "repo", STEP)
    return line, _store(line, tmp)


@pytest.fixture
def world(stepped, tmp_path):
    line, db = stepped
    repo = tmp_path / "repo"
    shutil.copytree(line.repo, repo, symlinks=True)
    shutil.copy(db.removeprefix("sqlite:///"), tmp_path / "kbase.db")
    return Line(repo, line.commits), f"sqlite:///{tmp_path / 'kbase.db'}", tmp_path / "kbase.db"


def _bisect(line: Line, db: str, *args: str, good: int = 0, bad: int = -1):
    return run_kbase("bisect", line.commits[good], line.commits[bad], "--run", COMMAND, "--repo", line.repo,
                     "--db", db, "--name", "train", *args)


def _fingerprint(repo: Path) -> dict[str, str]:
    """Every file of the working tree, the index, the stash and the list of worktrees, as digests."""
    out = {}
    for p in sorted(repo.rglob("*")):
        rel = p.relative_to(repo)
        if p.is_file() and (rel.parts[0] != ".git" or rel.as_posix() in (".git/index", ".git/refs/stash",
                                                                           ".git/logs/refs/stash", ".git/HEAD")):
            out[rel.as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    out["stash list"] = git(repo, "stash", "list")
    out["worktrees"] = git(repo, "worktree", "list", "--porcelain")
    out["status"] = git(repo, "status", "--porcelain=v2")
    return out


def test_a_step_is_found_and_the_users_tree_index_and_stash_are_untouched(world):
    line, db, _ = world
    repo = line.repo
    (repo / "perf.json").write_text('{"kernel": "edited", "slowdown": 9}')  # unstaged
    (repo / "notes.txt").write_text("staged\n")
    git(repo, "add", "notes.txt")
    (repo / "capture.py").write_text("# stashed edit\n")
    git(repo, "stash", "push", "-q", "--", "capture.py")
    (repo / "untracked.bin").write_bytes(b"\x00\x01")
    before = _fingerprint(repo)

    r = _bisect(line, db, "--format", "json")
    assert r.rc == 0, r
    doc = json.loads(r.stdout)
    assert doc["schema"] == "kbase.bisect/1"
    assert doc["first_bad"] == line.commits[20] and doc["range"] is None
    assert 1 <= doc["runs"] <= 7
    assert all(set(m) >= {"commit", "verdict", "reused"} and m["verdict"] in ("good", "bad") and m["reused"] is False
               for m in doc["midpoints"])
    assert doc["first_bad_subject"] == "change 20: slowdown 1.05"
    assert doc["target"]["label"].startswith("flash_fwd") and doc["diff"]["after"]
    assert _fingerprint(repo) == before

    listed = json.loads(run_kbase("list", "--db", db, "--format", "json", "--limit", "0").stdout)["baselines"]
    kinds = sorted(b["kind"] for b in listed)
    assert kinds == ["bisect"] * doc["runs"] + ["snapshot"] * 2

    import kbase  # the report tells the midpoints from the job's own snapshots

    points = kbase.report_data(kbase.Settings.load(repo=repo, db=db, name="train"), step_pages=0).commits
    assert sorted(p.ref.bisect for p in points) == [False] * 2 + [True] * doc["runs"]

    # a second bisect reuses every midpoint the first stored: no run at all
    again = json.loads(_bisect(line, db, "--format", "json").stdout)
    assert again["runs"] == 0 and again["first_bad"] == line.commits[20]
    assert all(m["reused"] for m in again["midpoints"])

    # prune --kind bisect takes the probes (main's history does not keep them), never the snapshots
    pruned = run_kbase("prune", "--keep-branch", "main", "--kind", "bisect", "--yes", "--repo", repo, "--db", db)
    assert pruned.rc == 0, pruned
    left = json.loads(run_kbase("list", "--db", db, "--format", "json").stdout)["baselines"]
    assert sorted(b["kind"] for b in left) == ["snapshot", "snapshot"]


def test_a_midpoint_stored_before_is_judged_without_running(world, tmp_path):
    import kbase

    line, db, _ = world
    settings = kbase.Settings.load(repo=line.repo, db=db, name="train")
    kbase.snapshot(capture_at(line, 31, tmp_path / "nightly.sqlite"), settings, rev=line.commits[31])
    doc = json.loads(_bisect(line, db, "--format", "json").stdout)
    first = doc["midpoints"][0]
    assert first["commit"] == line.commits[31] and first["reused"] is True and first["runs"] == 0
    assert doc["first_bad"] == line.commits[20] and doc["runs"] <= 5


def test_text_and_markdown_name_the_commit_and_show_its_diff(world):
    line, db, _ = world
    text = _bisect(line, db)
    assert text.rc == 0, text
    assert f"first bad commit for kernel flash_fwd_kernel: {line.commits[20][:12]} change 20" in text.stdout
    assert "Kernel diff" in text.stdout and "midpoints (in the order judged):" in text.stdout
    md = _bisect(line, db, "--format", "markdown")
    assert md.stdout.startswith("## kbase bisect") and "| # | commit | verdict | runs | subject |" in md.stdout
    assert f"### Diff of `{line.commits[20][:12]}` against its parent" in md.stdout


def test_dry_run_shows_the_plan_and_changes_nothing(world):
    line, db, path = world
    before = path.read_bytes()
    r = _bisect(line, db, "--dry-run", "--format", "json", "--kernel", "flash_fwd")
    assert r.rc == 0, r
    doc = json.loads(r.stdout)
    assert doc["runs"] == 0 and doc["midpoints"] == [] and doc["plan"]["max_probes"] == 6
    assert doc["plan"]["first_probe"] == line.commits[31] and "capture.py" in doc["plan"]["command"]
    assert path.read_bytes() == before


@pytest.mark.parametrize(("args", "words"), [
    (["--run", "python capture.py"], "--run 'python capture.py': the capture command must name {out}"),
    (["--kernel", "/vectorized_layer_norm/"], "did not change beyond its noise"),
    (["--kernel", "a*", "--step"], "name one target"),
    (["--repeats", "0"], "--repeats 0: must be at least 1"),
    (["--from-steps"], "--from-steps takes GOOD and BAD from kbase steps: give neither"),
])
def test_bad_input_is_one_line_exit_2_store_unchanged(world, args, words):
    line, db, path = world
    before = path.read_bytes()
    r = run_kbase("bisect", line.commits[0], line.commits[-1], "--run", COMMAND, *args, "--repo", line.repo,
                  "--db", db, "--name", "train")
    assert r.rc == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r
    assert "Traceback" not in r.stderr and path.read_bytes() == before


def test_no_baseline_at_good_or_no_store_is_refused_and_nothing_is_created(world, tmp_path):
    line, db, path = world
    before = path.read_bytes()
    r = _bisect(line, db, good=1)
    assert r.rc == 2 and "no baseline of workload 'train'" in r.stderr, r
    assert path.read_bytes() == before
    missing = tmp_path / "none" / "kbase.db"
    r = _bisect(line, f"sqlite:///{missing}")
    assert r.rc == 2 and len(r.stderr.strip().splitlines()) == 1 and not missing.exists(), r


def test_good_after_bad_is_refused(world):
    line, db, path = world
    before = path.read_bytes()
    r = _bisect(line, db, good=-1, bad=0)
    assert r.rc == 2 and "GOOD must come before BAD" in r.stderr, r
    assert path.read_bytes() == before and git(line.repo, "worktree", "list").count("\n") == 0


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 42, 63])
def test_a_5pct_step_at_commit_k_of_64_takes_at_most_7_runs(tmp_path, k):
    line = make_line(tmp_path / "repo", [1.0] * k + [1.05] * (64 - k))
    db = _store(line, tmp_path)
    doc = json.loads(_bisect(line, db, "--format", "json").stdout)
    assert doc["first_bad"] == line.commits[k] and doc["runs"] <= 7, doc["midpoints"]


@pytest.mark.slow
def test_a_partial_change_is_a_range_and_a_failing_midpoint_is_skipped(tmp_path):
    # GOOD 1.0 .. 19; 1.05 from 20 (half-way: like neither end); 1.10 from 40; the build fails at 31
    line = make_line(tmp_path / "repo", [1.0] * 20 + [1.05] * 20 + [1.10] * 24, failing={31})
    db = _store(line, tmp_path)
    r = _bisect(line, db, "--format", "json")  # 3 runs at an undecided midpoint: 3 captures pooled there
    assert r.rc == 0, r
    doc = json.loads(r.stdout)
    assert doc["first_bad"] is None and doc["range"] == [line.commits[19], line.commits[40]]
    verdicts = {m["commit"]: m for m in doc["midpoints"]}
    assert verdicts[line.commits[31]]["verdict"] == "skipped" and "build failed" in verdicts[line.commits[31]]["why"]
    assert doc["skipped"] == [line.commits[31]]
    undecided = [m for m in doc["midpoints"] if m["verdict"] == "undecided"]
    assert undecided and all(20 <= m["index"] < 40 and m["runs"] == 3 for m in undecided)  # rerun, then a range
    assert all(m["verdict"] != "undecided" for m in doc["midpoints"] if not 20 <= m["index"] < 40)


@pytest.mark.slow
def test_ctrl_c_removes_the_worktree_and_keeps_finished_snapshots(world, tmp_path):
    """The second run of the command interrupts kbase (SIGINT to its parent, as a terminal's Ctrl-C would):
    exit 130, no worktree left, the first midpoint's snapshot stored, nothing half-written."""
    line, db, _ = world
    flag = tmp_path / "second"
    cmd = f"{COMMAND}; if [ -e {flag} ]; then kill -INT $PPID; sleep 30; fi; touch {flag}"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kbase.cli", "bisect", line.commits[0], line.commits[-1], "--run",
                           cmd, "--repo", str(line.repo), "--db", db, "--name", "train"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert proc.returncode == 130 and "interrupted" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert "1 midpoint(s) captured before are kept" in proc.stderr
    assert time.monotonic() - start < 30  # the sleeping command was ended, not waited for
    assert git(line.repo, "worktree", "list").count("\n") == 0
    listed = json.loads(run_kbase("list", "--db", db, "--format", "json").stdout)["baselines"]
    assert sorted(b["kind"] for b in listed) == ["bisect", "snapshot", "snapshot"]


@pytest.mark.slow
def test_a_short_command_on_fewer_gpus_needs_the_ends_captured_too(tmp_path):
    """CI stored GOOD and BAD on 2 GPUs; the capture command runs one rank. Judging its capture against CI's would
    compare two different things: refused with the way out; --capture-ends captures both ends with it."""
    line = make_line(tmp_path / "repo", [1.0] * 5 + [1.05] * 11)
    db = _store(line, tmp_path, gpus=2)
    r = _bisect(line, db)
    assert r.rc == 2 and "GPU count differs" in r.stderr and "--capture-ends" in r.stderr, r
    doc = json.loads(_bisect(line, db, "--capture-ends", "--format", "json").stdout)
    assert doc["first_bad"] == line.commits[5] and doc["runs"] <= 2 + 4


def test_an_op_whose_kernel_was_swapped_is_bisected_by_op(tmp_path):
    """PyTorch traces whose aten::mm changes kernel (gemm_a -> gemm_b) and gets 10% slower at commit 9: no kernel
    can be followed across the swap; the op can, and is the default target."""
    k = 9
    line = make_line(tmp_path / "repo", [1.0] * k + [1.1] * (16 - k), gemms=["gemm_a"] * k + ["gemm_b"] * (16 - k))
    db = _store(line, tmp_path)
    doc = json.loads(_bisect(line, db, "--format", "json").stdout)
    assert doc["target"] == {"kind": "op", "pattern": "aten::mm", "label": "aten::mm"}
    assert doc["first_bad"] == line.commits[k] and doc["runs"] <= 4
    again = _bisect(line, db, "--op", "aten::mm", "--format", "json")
    assert json.loads(again.stdout)["first_bad"] == line.commits[k] and json.loads(again.stdout)["runs"] == 0
    r = _bisect(line, db, "--op", "aten::relu")
    assert r.rc == 2 and "op aten::relu did not change beyond its noise" in r.stderr


@pytest.mark.slow
def test_the_step_time_is_bisected_with_its_noise_stated(tmp_path):
    k = 11  # the largest kernel 20% slower: the step ~3.4% longer
    line = make_line(tmp_path / "repo", [1.0] * k + [1.2] * (32 - k), kernel="void flash::flash_bwd")
    db = _store(line, tmp_path)
    doc = json.loads(_bisect(line, db, "--step", "--format", "json").stdout)
    assert doc["target"]["kind"] == "step" and doc["first_bad"] == line.commits[k] and doc["runs"] <= 5 + 3
    assert any(n.startswith("step noise: ") for n in doc["notes"])


@pytest.mark.slow
def test_from_steps_bisects_the_step_kbase_steps_found(tmp_path):
    """Nightly CI stored every 8th commit; ``kbase steps`` says "between 16 and 24"; bisect finds 20."""
    import kbase

    line = make_line(tmp_path / "repo", STEP)
    db = f"sqlite:///{tmp_path / 'kbase.db'}"
    settings = kbase.Settings.load(repo=line.repo, db=db, name="train")
    for i in [*range(0, 64, 8), 63]:
        kbase.snapshot(capture_at(line, i, tmp_path / f"n{i}.sqlite"), settings, rev=line.commits[i])
    r = run_kbase("bisect", "--from-steps", "--run", COMMAND, "--repo", line.repo, "--db", db, "--name", "train",
                  "--format", "json")
    assert r.rc == 0, r
    doc = json.loads(r.stdout)
    assert (doc["good"], doc["bad"]) == (line.commits[16], line.commits[24])
    assert doc["first_bad"] == line.commits[20] and doc["runs"] <= 3


def test_the_kind_travels_in_export_files_and_a_snapshots_file_is_unchanged(world, tmp_path):
    import kbase
    from kbase.store.transfer.export_files import MAGIC

    line, db, _ = world
    settings = kbase.Settings.load(repo=line.repo, db=db, name="train")
    kbase.snapshot(capture_at(line, 31, tmp_path / "mid.sqlite"), settings, rev=line.commits[31], kind="bisect")
    kbase.export_baselines(tmp_path / "out", settings)
    headers = [json.loads(p.read_bytes()[len(MAGIC):].split(b"\n", 1)[0]) for p in (tmp_path / "out").glob("*.baseline")]
    kinds = sorted(h["baseline"].get("kind", "(left out)") for h in headers)
    assert kinds == ["(left out)", "(left out)", "bisect"]  # a snapshot's file is what 0.2.0 wrote
    fresh = kbase.Settings.load(repo=line.repo, db=f"sqlite:///{tmp_path / 'fresh.db'}", name="train")
    kbase.import_baselines(tmp_path / "out", fresh)
    assert sorted(b.kind for b in kbase.baselines(fresh)) == ["bisect", "snapshot", "snapshot"]


@pytest.mark.slow
def test_a_command_that_hangs_is_ended_at_the_timeout_and_skipped(tmp_path):
    line = make_line(tmp_path / "repo", [1.0] * 4 + [1.05] * 4)
    db = _store(line, tmp_path)
    start = time.monotonic()
    r = run_kbase("bisect", line.commits[0], line.commits[-1], "--run", "sleep 30; echo {out}", "--timeout", "0.5",
                  "--repo", line.repo, "--db", db, "--name", "train", "--format", "json")
    assert r.rc == 0, r
    doc = json.loads(r.stdout)
    assert time.monotonic() - start < 25 and doc["runs"] == 6 and doc["range"] == [line.commits[0], line.commits[-1]]
    assert all(m["verdict"] == "skipped" and m["why"] == "timed out after 0.5 s" for m in doc["midpoints"])
    assert git(line.repo, "worktree", "list").count("\n") == 0


def test_nsys_style_output_names_are_found(world):
    """``nsys profile -o {out}`` writes {out}.nsys-rep and, with --export sqlite, {out}.sqlite: read that."""
    line, db, _ = world
    cmd = COMMAND.replace("{out}", "{out}.sqlite")
    doc = json.loads(run_kbase("bisect", line.commits[0], line.commits[-1], "--run", cmd, "--repo", line.repo,
                               "--db", db, "--name", "train", "--format", "json").stdout)
    assert doc["first_bad"] == line.commits[20]

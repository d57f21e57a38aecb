"""The step is the verdict (``comparison.step``): real ResNet-50 captures that differ in DataLoader workers, the
A/A pairs, repeat captures stored as several processes per commit, and generated exports with a slower host."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

import kbase
from kbase.comparison.diff import compute_diff
from kbase.comparison.gate import STEP_TIME, FindingKind, decide
from kbase.comparison.side import side_from_leaderboards
from kbase.comparison.step import SideBudget, judge
from kbase.policy import Policy

from helpers.cli import run_kbase
from helpers.gitrepos import commit, git
from helpers.shared import KINETO_DIR, REPO, SHARED_SKIP_REASON

DATA = REPO / "tests" / "data" / "kineto"
W4_JAN, W0_JAN = (DATA / f"v100_resnet50_w{n}_jan2021.pt.trace.json.gz" for n in (4, 0))
W0_JUNE = [DATA / f"v100_resnet50_w0_jun2021_{x}.pt.trace.json.gz" for x in "ab"]
W4_JUNE = [KINETO_DIR / f"v100_resnet50_w4_repeat_{x}.pt.trace.json.gz" for x in "ab"]


def _need(*paths: Path) -> None:
    for p in paths:
        if not p.is_file():
            pytest.skip(SHARED_SKIP_REASON)


def _side(*paths: Path):
    s = kbase.Settings.load()
    return side_from_leaderboards([kbase.leaderboard(kbase.window(kbase.read(p, s), s), sketches=True)
                                   for p in paths], "+".join(p.name for p in paths))


@pytest.fixture(scope="module")
def sides():
    return {p: _side(p) for p in (W4_JAN, W0_JAN, *W0_JUNE)}


def test_fewer_workers_fails_on_the_step_explained_by_idle_and_the_reverse_passes(sides):
    result = compute_diff(sides[W4_JAN], sides[W0_JAN], Policy())
    b = result.budget
    assert b is not None and b.step is not None and b.step_source == "host"
    assert b.step.delta_pct == pytest.approx(24.5, abs=0.1)
    # kernel time is flat: the change is the GPU waiting on the host
    assert abs(result.totals.kernel.delta_pct) < 1
    assert b.grew is not None and b.grew[0] == "idle_ns" and b.idle_cause == "host"
    # the block deltas add up to the window's delta
    assert sum(b.delta[k] for k in ("compute_ns", "communication_exposed_ns", "memory_exposed_ns", "idle_ns")) \
        == pytest.approx(b.delta["window_ns"], abs=1e-6)
    v = decide(result)
    # never silent: it fails, or is a warning with the MDE it would need
    step = [f for f in v.failing + v.warnings if f.name == STEP_TIME]
    assert step, "the step's +24% must be reported"
    assert v.code == 1 and v.failing[0].kind == FindingKind.STEP and "idle" in v.failing[0].explain
    back = decide(compute_diff(sides[W0_JAN], sides[W4_JAN], Policy()))
    assert back.code == 0


def test_step_gate_off_keeps_the_step_as_a_warning(sides):
    v = decide(compute_diff(sides[W4_JAN], sides[W0_JAN], Policy(step_gate=False)))
    assert v.code == 0 and [f.kind for f in v.warnings if f.name == STEP_TIME] == [FindingKind.STEP]


def test_aa_pairs_pass_both_ways_on_step_time(sides):
    for x, y in itertools.permutations(W0_JUNE, 2):
        result = compute_diff(sides[x], sides[y], Policy())
        assert result.budget is not None and result.budget.step is not None
        assert not result.budget.step.regressed
        assert decide(result).code == 0


def test_shared_aa_pair_passes_both_ways():
    _need(*W4_JUNE)
    a, b = (_side(p) for p in W4_JUNE)
    for x, y in ((a, b), (b, a)):
        result = compute_diff(x, y, Policy())
        assert result.budget is not None and not result.budget.step.regressed  # type: ignore[union-attr]
        assert decide(result).code == 0


def test_repeat_captures_stored_judge_the_step_on_their_between_process_noise(tmp_path):
    """Two processes per commit (4 workers, then 0): the between-process spread of the step comes from the repeats."""
    _need(*W4_JUNE)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    c1 = commit(repo, "workers = 4\n", "four workers")
    c2 = commit(repo, "workers = 0\n", "no workers")
    db = f"sqlite:///{tmp_path / 'k.db'}"
    for rev, files in ((c1, W4_JUNE), (c2, W0_JUNE)):
        for f in files:
            r = run_kbase("snapshot", f, "--rev", rev, "--db", db, "--repo", repo, "--quiet")
            assert r.rc == 0, r
    r = run_kbase("gate", c1, c2, "--db", db, "--repo", repo, "--format", "json")
    doc = json.loads(r.stdout)
    step = doc["budget"]["step"]
    assert step["noise"] == "repeat" and step["regressed"] and step["judged"], step
    assert r.rc == 1 and any(x.startswith("step +") for x in doc["verdict"]["reasons"])
    back = run_kbase("gate", c2, c1, "--db", db, "--repo", repo, "--format", "json")
    assert back.rc == 0, back


def test_budget_of_a_stored_baseline(tmp_path):
    db = f"sqlite:///{tmp_path / 'k.db'}"
    r = run_kbase("snapshot", W0_JAN, "--no-git", "--rev", "a" * 40, "--db", db, "--quiet")
    assert r.rc == 0, r
    out = run_kbase("budget", "@1", "--db", db, "--format", "json")
    assert out.rc == 0, out
    doc = json.loads(out.stdout)
    direct = json.loads(run_kbase("budget", W0_JAN, "--format", "json").stdout)
    assert doc["total"] == direct["total"]
    assert doc["iterations"] == direct["iterations"]
    bad = run_kbase("budget", "@1", "--db", db, "--window", "all")
    assert bad.rc == 2 and "needs the profile" in bad.stderr


def test_generated_slow_input_pipeline_fails_on_the_step_with_flat_kernels(tmp_path):
    """A generated job whose host spends 20 ms more per step before its input copy: kernels identical, the step
    and idle grow; with three repeat processes per side the step rule catches it and A/A stays quiet."""
    from kbase.synth.generate import generate_export

    def side(delay: int, seeds: range):
        paths = []
        for seed in seeds:
            p = tmp_path / f"d{delay}_s{seed}.sqlite"
            generate_export(p, n_gpus=1, iterations=8, seed=seed, host_delay_ns=delay)
            paths.append(p)
        return _side(*paths)

    base, same, slow = side(0, range(3)), side(0, range(3, 6)), side(20_000_000, range(6, 9))
    quiet = compute_diff(base, same, Policy())
    assert quiet.budget is not None and not quiet.budget.step.regressed  # type: ignore[union-attr]
    result = compute_diff(base, slow, Policy())
    b = result.budget
    assert b is not None and b.step is not None and b.step.regressed and b.step.noise == "repeat"
    assert b.grew is not None and b.grew[0] == "idle_ns"
    assert abs(result.totals.kernel.delta_pct) < 0.5


def test_judge_is_symmetric_and_states_its_mde():
    before = [[100.0, 101.0, 99.0, 100.5, 99.5]]
    after = [[110.0, 111.0, 109.0, 110.5, 109.5]]
    p = Policy()
    up, down = judge(before, after, p), judge(after, before, p)
    assert up is not None and down is not None
    assert up.noise == "assumed" and up.mde_pct > 0
    assert up.se_pct == pytest.approx(down.se_pct, rel=0.02)
    assert not up.judged or up.regressed


def test_without_markers_the_busy_share_is_judged(tmp_path):
    from kbase.synth.generate import generate_export

    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    generate_export(a, n_gpus=1, iterations=6, nvtx=False)
    generate_export(b, n_gpus=1, iterations=6, nvtx=False, seed=1)
    result = compute_diff(_side(a), _side(b), Policy())
    assert result.budget is not None and result.budget.step is None and result.budget.busy is not None
    assert any("step time cannot be judged" in n for n in result.notes)


def test_side_budget_needs_every_capture():
    assert SideBudget([]).unit == "window"


def test_steps_and_history_follow_the_step_time(tmp_path):
    """Six commits, the host 30 ms slower per step from the fourth on: ``kbase steps`` finds the step in the step
    time (kernels flat), ``kbase history (step)`` and ``(idle)`` list it per baseline."""
    from kbase.synth.generate import generate_export

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    db = f"sqlite:///{tmp_path / 'k.db'}"
    commits = []
    for i in range(6):
        commits.append(commit(repo, f"loader = {i}\n", f"commit {i}"))
        export = tmp_path / f"c{i}.sqlite"
        generate_export(export, n_gpus=1, iterations=6, seed=i, host_delay_ns=30_000_000 if i >= 3 else 0)
        assert run_kbase("snapshot", export, "--db", db, "--repo", repo, "--name", "job", "--quiet").rc == 0
    r = run_kbase("steps", "--db", db, "--repo", repo, "--name", "job", "--format", "json")
    assert r.rc == 0, r
    found = [s for s in json.loads(r.stdout)["steps"] if s["name"] == "(step time per iteration)"]
    assert found and found[0]["to_commit"] == commits[3] and found[0]["rel"] > 0.3, found
    h = run_kbase("history", "(step)", "--db", db, "--repo", repo, "--name", "job", "--format", "json")
    assert h.rc == 0, h
    rows = json.loads(h.stdout)["baselines"]
    assert len(rows) == 6 and rows[3]["per_iter_ns"] > 1.3 * rows[2]["per_iter_ns"]
    idle = run_kbase("history", "(idle)", "--db", db, "--repo", repo, "--name", "job", "--quiet")
    assert idle.rc == 0, idle

"""Captures without iteration markers of programs that do a fixed amount of work (``kbase.synth.fixed_work``):
the unit is the run, launches are paired by ordinal, the tests are symmetric, and a kernel that nothing can
judge says so (docs/diff.md "Units")."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import kbase
from kbase.api.comparing import _decide
from kbase.comparison.side import Unit
from kbase.enums import GateStatus, KernelClass
from kbase.render.diff import diff_doc, diff_md, verdict_lines
from kbase.synth.fixed_work import FixedKernel, FixedWorkSpec, generate_fixed_work

from helpers.cli import run_kbase

# Gaussian elimination: every launch works on a smaller matrix than the one before
FAN1 = FixedKernel("Fan1(float*, float*, int, int)", "Fan1", 1023, 30_000, 2_000)
FAN2 = FixedKernel("Fan2(float*, float*, float*, int, int, int)", "Fan2", 1023, 400_000, 4_000)
# a kernel that fills its window: the GPU never waits for the host
STENCIL = FixedKernel("void stencil_kernel<float>(float const*, float*, int)", "stencil_kernel", 800, 250_000)
SOLO = FixedKernel("void dp_kernel<256>(int*, int const*, int)", "dp_kernel", 1, 40_000_000)
HELPER = FixedKernel("void init_kernel(int*, int)", "init_kernel", 400, 20_000)


def _gen(tmp: Path, name: str, kernels: list[FixedKernel], **kw) -> str:
    return str(generate_fixed_work(tmp / name, FixedWorkSpec(kernels=kernels, **kw), overwrite=True))


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return kbase.Settings.load(repo=tmp_path_factory.mktemp("norepo"))


def _gate(a: str, b: str, settings, **policy):
    if policy:
        from dataclasses import replace

        settings = replace(settings, policy=replace(settings.policy, **policy))
    comparison = kbase.compare(a, b, settings)
    return comparison, _decide(comparison, [], False, False).verdict


def _row(comparison, short: str) -> dict:
    return next(r for r in comparison.result.records() if r["short_name"] == short)


def test_a_kernel_that_fills_its_window_slowed_25_percent_fails(tmp_path, settings):
    a = _gen(tmp_path, "a.sqlite", [STENCIL], seed=1, host_gap_ns=1_000)
    b = _gen(tmp_path, "b.sqlite", [STENCIL], seed=2, host_gap_ns=1_000, slowdown={STENCIL.name: 1.25})
    comparison, verdict = _gate(a, b, settings)
    assert comparison.result.totals.unit == Unit.RUN
    row = _row(comparison, "stencil_kernel")
    assert row["class"] == KernelClass.REGRESSED and row["delta_pct"] == pytest.approx(25, abs=1.5)
    assert verdict.status == GateStatus.FAIL
    # per window-second it reads unchanged: the unit was the bug
    window, _ = _gate(a, b, settings, unit="window")
    assert window.result.totals.unit == Unit.WINDOW_SECOND
    assert abs(window.result.totals.kernel.delta_pct) < 2


@pytest.mark.parametrize("slowdown", [3.65, (1.3, 9.0), 1.092])
def test_a_slowdown_of_a_trending_kernel_fails_and_its_reverse_mirrors_it(tmp_path, settings, slowdown):
    a = _gen(tmp_path, "a.sqlite", [FAN1, FAN2], seed=1)
    b = _gen(tmp_path, "b.sqlite", [FAN1, FAN2], seed=2, slowdown={FAN2.name: slowdown})
    forward, verdict = _gate(a, b, settings)
    backward, reverse_verdict = _gate(b, a, settings)
    fwd, bwd = _row(forward, "Fan2"), _row(backward, "Fan2")
    assert fwd["class"] == KernelClass.REGRESSED and verdict.status == GateStatus.FAIL
    assert bwd["class"] == KernelClass.IMPROVED and reverse_verdict.status == GateStatus.PASS
    assert bwd["z"] == pytest.approx(-fwd["z"]) and bwd["p_value"] == pytest.approx(fwd["p_value"])
    assert bwd["mde_rel"] == pytest.approx(fwd["mde_rel"])  # one test, one MDE, either way round
    # the MDE shown is the test's; a uniform slowdown leaves the launches' trend out of the noise entirely
    assert fwd["delta_pct"] / 100 > fwd["mde_rel"]
    if not isinstance(slowdown, tuple):
        assert fwd["mde_rel"] < 0.05
    fan1 = _row(forward, "Fan1")
    assert fan1["class"] in (KernelClass.UNCHANGED, KernelClass.WITHIN_NOISE)


def test_an_unchanged_pair_is_judged_unchanged_both_ways(tmp_path, settings):
    a = _gen(tmp_path, "a.sqlite", [FAN1, FAN2], seed=1)
    b = _gen(tmp_path, "b.sqlite", [FAN1, FAN2], seed=2)
    for x, y in ((a, b), (b, a)):
        comparison, verdict = _gate(x, y, settings)
        assert verdict.status == GateStatus.PASS
        assert {r["class"] for r in comparison.result.records()} <= {KernelClass.UNCHANGED, KernelClass.WITHIN_NOISE}


def test_a_shorter_host_part_does_not_move_the_totals(tmp_path, settings):
    """+1.3% of kernel time with the host's pause shortened: per run it is +1.3%, per window-second it was not."""
    kernels = [STENCIL, HELPER]
    a = _gen(tmp_path, "a.sqlite", kernels, seed=1, pause_ns=150_000_000)
    b = _gen(tmp_path, "b.sqlite", kernels, seed=2, pause_ns=20_000_000, slowdown={STENCIL.name: 1.0135})
    comparison, verdict = _gate(a, b, settings)
    total = comparison.result.totals.kernel
    assert comparison.result.totals.unit == Unit.RUN
    assert total.delta_pct == pytest.approx(1.3, abs=0.3)
    assert "total kernel time per run +1.3%" in "\n".join(verdict_lines(verdict)) or not total.regressed
    window, _ = _gate(a, b, settings, unit="window")
    assert window.result.totals.kernel.delta_pct > 20  # what the window-second made of it


def test_a_slice_of_a_steady_state_is_compared_per_window_second(tmp_path, settings):
    a = _gen(tmp_path, "a.sqlite", [STENCIL, HELPER], seed=1, slice_ns=60_000_000)
    b = _gen(tmp_path, "b.sqlite", [STENCIL, HELPER], seed=2, slice_ns=60_000_000, slowdown={STENCIL.name: 1.2})
    comparison, _ = _gate(a, b, settings)
    assert comparison.result.totals.unit == Unit.WINDOW_SECOND
    assert any(n.startswith("unit: the window-second") for n in comparison.result.notes)


def test_a_single_launch_cannot_be_judged_and_says_so(tmp_path, settings):
    a = _gen(tmp_path, "a.sqlite", [SOLO, HELPER], seed=1)
    b = _gen(tmp_path, "b.sqlite", [SOLO, HELPER], seed=2, slowdown={SOLO.name: 1.2})
    comparison, verdict = _gate(a, b, settings)
    row = _row(comparison, "dp_kernel")
    assert row["class"] == KernelClass.CANNOT_JUDGE and row["confidence"] == "low"
    assert math.isfinite(row["mde_rel"]) and row["mde_rel"] > 0  # the change it would need
    assert verdict.status == GateStatus.PASS
    lines = "\n".join(verdict_lines(verdict))
    assert "cannot judge dp_kernel" in lines and "repeat captures a side it would detect about" in lines
    doc = diff_doc(comparison, verdict)
    assert doc["counts"]["cannot_judge"] == 1
    assert "cannot judge" in diff_md(doc, verdict=verdict)
    _, strict = _gate(a, b, settings, cannot_judge="fail")
    assert strict.status == GateStatus.FAIL and "not judged: cannot judge dp_kernel" in "\n".join(verdict_lines(strict))


def test_every_surface_names_the_unit(tmp_path):
    a = _gen(tmp_path, "a.sqlite", [FAN1, FAN2], seed=1)
    b = _gen(tmp_path, "b.sqlite", [FAN1, FAN2], seed=2, slowdown={FAN2.name: 1.5})
    table = run_kbase("gate", a, b, "--repo", tmp_path, "--wide")
    assert table.rc == 1, table
    assert "per run per GPU" in table.stdout and "Δ/run" in table.stdout and "/iter" not in table.stdout
    assert "per iteration" not in table.stdout
    doc = json.loads(run_kbase("diff", a, b, "--repo", tmp_path, "-f", "json").stdout)
    assert doc["unit"] == "run" and doc["before"]["unit"] == "run"
    md = run_kbase("diff", a, b, "--repo", tmp_path, "-f", "md", "--unit", "window").stdout
    assert "Δ/s" in md and "per window-second" in md


def test_a_unit_the_captures_cannot_give_is_refused_in_one_line(tmp_path):
    a = _gen(tmp_path, "a.sqlite", [FAN1], seed=1)
    b = _gen(tmp_path, "b.sqlite", [FAN1], seed=2)
    before = {p: Path(p).read_bytes() for p in (a, b)}
    for unit in ("iteration", "launch"):
        res = run_kbase("diff", a, b, "--repo", tmp_path, "--unit", unit)
        assert res.rc == 2 and "--unit" in res.stderr and "Traceback" not in res.stderr, res
        assert len(res.stderr.strip().splitlines()) == 1, res
    assert {p: Path(p).read_bytes() for p in (a, b)} == before


# --------------------------------------------------------------------------- repeat captures are processes


def _stored_pair(tmp_path: Path, candidate_slowdown: float, window: dict | None = None):
    """Three repeat captures stored at one commit, one capture at the next (``candidate_slowdown`` on the
    single-launch kernel); the gate between them."""
    from dataclasses import replace

    from kbase.analysis.spec import WindowSpec
    from kbase.store import open_store

    from helpers.gitrepos import commit, git

    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    settings = kbase.Settings.load(repo=repo, db=f"sqlite:///{tmp_path / 'kbase.db'}", name="solver")
    if window:
        settings = replace(settings, window=WindowSpec(**window))
    kernels = [SOLO, HELPER]
    commit(repo, "v1\n", "v1")
    with open_store(settings) as st:
        for seed in (1, 2, 3):
            kbase.snapshot(_gen(tmp_path, f"r{seed}.sqlite", kernels, seed=seed, run_sd=0.01), settings, store=st)
        commit(repo, "v2\n", "v2")
        kbase.snapshot(_gen(tmp_path, "c.sqlite", kernels, seed=9, run_sd=0.01,
                            slowdown={SOLO.name: candidate_slowdown}), settings, store=st)
        return kbase.gate("HEAD~1", "HEAD", settings, store=st)


@pytest.mark.parametrize("window", [None, {"iteration_kernel": "dp_kernel", "warmup": 0}],
                         ids=["no-markers", "iteration-kernel"])
def test_three_stored_repeats_judge_a_single_launch(tmp_path, window):
    slower = _stored_pair(tmp_path / "slower", 1.2, window)
    row = _row(slower.comparison, "dp_kernel")
    assert not slower.comparison.result.mismatches  # repeats are processes, not iterations
    assert row["class"] == KernelClass.REGRESSED and row["noise_source"] == "repeat", row
    assert slower.verdict.status == GateStatus.FAIL
    fourth = _stored_pair(tmp_path / "same", 1.0, window)
    assert not fourth.comparison.result.mismatches
    assert _row(fourth.comparison, "dp_kernel")["class"] != KernelClass.CANNOT_JUDGE
    assert fourth.verdict.status == GateStatus.PASS, verdict_lines(fourth.verdict)


def test_a_changed_kernel_set_on_a_faster_run_gives_the_net_change(tmp_path, settings):
    fast = FixedKernel("void fan2_fused_kernel<float>(float*, float*, int)", "fan2_fused_kernel", 1023, 250_000, 2_500)
    a = _gen(tmp_path, "a.sqlite", [FAN1, FAN2], seed=1)
    b = _gen(tmp_path, "b.sqlite", [FAN1, fast], seed=2)
    comparison, verdict = _gate(a, b, settings)
    assert verdict.status == GateStatus.FAIL  # the new-kernel rule
    net = comparison.result.totals.kernel.delta_pct
    assert net < -20
    lines = "\n".join(verdict_lines(verdict))
    assert f"net: total kernel time per run {net:+.1f}% with the changed kernel set" in lines
    assert "faster overall; failing on the new-kernel rule" in lines

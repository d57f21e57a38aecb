"""Fresh processes (issue 27): algorithm swaps judged by op, practical significance, between-process noise.

On real fresh-process captures (tests/data/kineto: committed; ../shared/data: skipped without it) and on
simulated processes (``kbase.synth.fresh``), the gate stays green where only the process changed, and still
fails on a regression that matters — inside a swapped op too."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import kbase
from kbase.comparison.diff import compute_diff
from kbase.comparison.gate import FindingKind, decide
from kbase.comparison.noise import Estimate, pick_noise, repeat_components
from kbase.comparison.noise import decide as decide_kernel
from kbase.comparison.side import side_from_captures, side_from_leaderboards
from kbase.policy import Policy
from kbase.synth.fresh import FreshSpec, process, without_ops, workload

from helpers.shared import KINETO_DIR, REPO, SHARED_SKIP_REASON

DATA = REPO / "tests" / "data" / "kineto"
JAN = [DATA / f"v100_resnet50_w{n}_jan2021.pt.trace.json.gz" for n in (0, 4)]
JUNE_W0 = [DATA / f"v100_resnet50_w0_jun2021_{x}.pt.trace.json.gz" for x in "ab"]
JUNE_W4 = [KINETO_DIR / f"v100_resnet50_w4_repeat_{x}.pt.trace.json.gz" for x in "ab"]


def _side(path: Path, ops: bool = True):
    s = kbase.Settings.load()
    lb = kbase.leaderboard(kbase.window(kbase.read(path, s), s), sketches=True, ops=ops)
    return side_from_leaderboards([lb], path.name)


@pytest.fixture(scope="module")
def jan():
    return {p: (_side(p), _side(p, ops=False)) for p in JAN}


def test_the_held_out_kind_of_pair_passes_both_ways_with_the_swap_reported(jan):
    """January 2021: the same ResNet-50 with 0 and 4 DataLoader workers, two processes. Before ops, the gate
    failed one way on a cuDNN helper (scalePackedTensor_kernel +4.8%, +0.03% of the iteration) whose launch
    count changed with the algorithm swap. No kernel or op fails either way; the step does, from 4 workers to 0
    (``tests/comparison/test_step.py``): 0 -> 4 passes."""
    for x, y in itertools.permutations(JAN, 2):
        result = compute_diff(jan[x][0], jan[y][0], Policy())
        v = decide(result)
        assert [f.name for f in v.failing] == (["(step time per iteration)"] if x == JAN[1] else [])
        assert result.ops is not None
        swapped = {g["op"] for g in result.ops.groups}
        assert "aten::cudnn_convolution_backward_input" in swapped
        helper = result.rows[result.rows["short_name"] == "scalePackedTensor_kernel"].iloc[0]
        assert helper["swap"] and not helper["gated"] and helper["op"] == "aten::cudnn_convolution_backward_input"
        assert any(n.startswith("algorithm swap in op aten::cudnn_convolution") for n in result.notes)
    # without op information the library-swap rule alone fails it (the helper is not a matmul/convolution)
    old = decide(compute_diff(jan[JAN[0]][1], jan[JAN[1]][1], Policy(min_effect_pct=0.0)))
    assert old.code == 1 and [f.short_name for f in old.failing] == ["scalePackedTensor_kernel"]


def test_june_processes_pass_every_ordered_pair():
    """Four processes of June 2021 (workers 0 twice, workers 4 twice): no kernel or op fails any ordered pair; the
    workers-0-vs-4 pairs report the swap (before ops: 6 of 12 failed). The step may fail only from 4 workers to 0
    (the input pipeline moved onto the training process: a real slowdown) — never the A/A pairs or 0 -> 4."""
    for p in JUNE_W4:
        if not p.is_file():
            pytest.skip(f"{p} not present: {SHARED_SKIP_REASON}")
    sides = {p: _side(p) for p in JUNE_W0 + JUNE_W4}
    for x, y in itertools.permutations(sides, 2):
        result = compute_diff(sides[x], sides[y], Policy())
        failing = [f.name for f in decide(result).failing]
        allowed = ["(step time per iteration)"] if x in JUNE_W4 and y in JUNE_W0 else []
        assert failing in ([], allowed), (x.name, y.name, failing)
        crossing = (x in JUNE_W0) != (y in JUNE_W0)
        assert bool(result.ops.groups) == crossing, (x.name, y.name)


def test_a_regression_inside_a_swapped_op_still_fails_through_the_op(jan):
    """+20% on the largest backward-weight kernel of the 4-worker capture, whose op is a swap: the op's time is
    judged and fails the gate (the kernel itself is covered by the swap)."""
    s = kbase.Settings.load()
    prof = kbase.read(JAN[1], s)
    lb = kbase.leaderboard(kbase.window(prof, s), sketches=True)
    names = lb.table["name"].tolist()
    target = next(n for n in names if "wgrad_alg0_engine" in n)
    k = prof.columns
    m = k.names[k.name] == target
    k.end = k.end.copy()
    k.end[m] = k.start[m] + np.rint((k.end[m] - k.start[m]) * 1.2).astype(k.end.dtype)
    slow = side_from_leaderboards([kbase.leaderboard(kbase.window(prof, s), sketches=True)], "slow")
    result = compute_diff(jan[JAN[0]][0], slow, Policy())
    v = decide(result)
    assert v.code == 1
    assert [(f.kind, f.name) for f in v.failing] == [(FindingKind.OP_REGRESSED,
                                                      "aten::cudnn_convolution_backward_weight")]


# --------------------------------------------------------------------------- simulated fresh processes


def test_simulated_processes_pass_and_the_old_rule_fails_them():
    w = workload(FreshSpec(seed=3))
    caps = [process(w, i) for i in range(4)]
    new = old = 0
    for x, y in itertools.permutations(range(4), 2):
        new += decide(compute_diff(side_from_captures([caps[x]], "a"), side_from_captures([caps[y]], "b"))).code
        old += decide(compute_diff(side_from_captures([without_ops(caps[x])], "a"),
                                   side_from_captures([without_ops(caps[y])], "b"), Policy(min_effect_pct=0))).code
    assert new == 0 and old >= 6


def test_reassignment_at_unchanged_launch_counts_is_a_swap():
    """Two kernels of one op trade layers at unchanged launch counts: one slower per launch, one faster, the op's
    time unchanged — one swap, not a regression."""
    w = workload(FreshSpec(seed=11, pick_noise=0.0, kernel_shift=0.0))
    base = process(w, 0)
    speed = w.speed.copy()
    # give layer 0 and layer 1 of the forward convolution each other's best algorithm, at the same cost
    a0, a1 = int(speed[0, 0].argmin()), int(speed[0, 1].argmin())
    if a0 == a1:
        pytest.skip("the two layers share their best algorithm in this workload")
    speed[0, 0, [a0, a1]] = speed[0, 0, [a1, a0]]
    speed[0, 1, [a0, a1]] = speed[0, 1, [a1, a0]]
    moved = process(replace(w, speed=speed), 0)
    result = compute_diff(side_from_captures([base], "a"), side_from_captures([moved], "b"))
    op = next(r for r in result.ops.records() if r["op"] == "aten::cudnn_convolution")
    assert op["reshuffled"] and op["swap"] and not op["gated"]
    assert decide(result).code == 0


def test_one_kernel_alone_is_not_a_swap():
    """A single kernel slower per launch at unchanged counts (nothing compensating in its op) stays a kernel
    regression, gated on its own."""
    w = workload(FreshSpec(seed=4, pick_noise=0.0, kernel_shift=0.0))
    base = process(w, 0)
    name = max(zip(base.total_ns.tolist(), base.names.tolist()))[1]
    slow = process(w, 0, inject={name: 1.10})
    result = compute_diff(side_from_captures([base], "a"), side_from_captures([slow], "b"))
    row = result.rows[result.rows["name"] == name].iloc[0]
    assert row["class"] == "regressed" and row["gated"] and not row["swap"]
    assert [f.name for f in decide(result).failing] == [name]


# --------------------------------------------------------------------------- practical significance


def test_below_the_floor_is_shown_not_gated_and_the_bound_decides():
    est = Estimate(rel=0.02, se=0.002, source="launches", n=8, df=7.0)
    # +2% of a 10%-share kernel: +0.2% of the iteration, confidently under a 0.5% floor
    k = decide_kernel(est, before_ns=10.0, after_ns=10.2, wall_ns=100.0, z_crit=3.0, abs_floor_ns=0.0,
                      share_floor=0.0, rel_floor=0.0, min_effect=0.005)
    assert k.below_floor and not k.regressed
    # +2% of a 24%-share kernel: +0.48% measured, but not confidently under the floor: gated
    k = decide_kernel(est, before_ns=24.0, after_ns=24.48, wall_ns=100.0, z_crit=3.0, abs_floor_ns=0.0,
                      share_floor=0.0, rel_floor=0.0, min_effect=0.005)
    assert k.regressed and not k.below_floor
    # floor 0: significance alone, as before issue 27
    k = decide_kernel(est, before_ns=10.0, after_ns=10.2, wall_ns=100.0, z_crit=3.0, abs_floor_ns=0.0,
                      share_floor=0.0, rel_floor=0.0, min_effect=0.0)
    assert k.regressed


def test_min_effect_pct_is_a_policy_setting(tmp_path):
    from kbase.policy import load_policy
    from kbase.render.policy_toml import policy_toml

    assert Policy().min_effect_pct == 0.5
    assert "min_effect_pct = 0.5" in policy_toml(Policy().as_dict())
    assert load_policy({"min_effect_pct": 0.25}).min_effect_pct == 0.25
    assert load_policy({"kernels": {"*gemm*": {"min_effect_pct": 0.0}}}).kernels["*gemm*"]["min_effect_pct"] == 0.0
    assert load_policy(None, {"min_effect_pct": 1.0}).min_effect_pct == 1.0


# --------------------------------------------------------------------------- between-process noise


def test_repeat_components_split_within_from_between():
    """Captures whose means differ by a known between-process sd: the one-way random-effects estimate finds it;
    captures that differ only within find ~0."""
    rng = np.random.default_rng(2)
    caps, iters = 40, 6
    means = 100.0 * (1 + rng.normal(0, 0.02, caps))
    samples = means[:, None] * (1 + rng.normal(0, 0.01, (caps, iters)))
    sd, df = repeat_components(samples.reshape(1, -1), np.repeat(np.arange(caps), iters))
    assert df == caps - 1 and 0.015 < sd[0] < 0.025
    flat = 100.0 * (1 + rng.normal(0, 0.01, (caps, iters)))
    sd, _ = repeat_components(flat.reshape(1, -1), np.repeat(np.arange(caps), iters))
    assert sd[0] < 0.004


def test_repeat_captures_carry_their_between_process_noise_into_the_test():
    """Pooled repeat captures at one commit: the between-process sd of their kernels is the test's run-to-run
    part (source ``repeat``), so a kernel whose speed differs between processes is not flagged."""
    w = workload(FreshSpec(seed=8, kind="transformer", kernel_shift=0.01))
    caps = [process(w, i) for i in range(6)]
    result = compute_diff(side_from_captures(caps[:3], "a"), side_from_captures(caps[3:], "b"),
                          Policy(min_effect_pct=0.0))
    assert set(result.rows["run_noise_source"].dropna()) == {"repeat"}
    assert any(n.startswith("between-process noise: repeat") for n in result.notes)
    assert decide(result).code == 0


def test_the_fallback_is_stated():
    w = workload(FreshSpec(seed=9, kind="transformer"))
    result = compute_diff(side_from_captures([process(w, 0)], "a"), side_from_captures([process(w, 1)], "b"))
    line = next(n for n in result.notes if n.startswith("between-process noise: "))
    assert "assumed" in line and "run_noise 0.2%" in line and "min_history 5" in line
    assert (result.rows["run_noise_source"].dropna() == "assumed").all()


def test_pick_noise_adds_the_between_process_component():
    within = Estimate(rel=0.01, se=0.003, source="launches", n=8, df=7.0)
    est = pick_noise(0.01, [within], ("repeat", 0.02, 4.0, True), (2, 2), 0.002)
    assert est.source == "repeat" and est.run_source == "repeat" and est.se > within.se
    prior = (10 * 0.002 ** 2 + 4 * 0.02 ** 2) / 14
    assert est.se == pytest.approx((0.003 ** 2 + prior * (1 / 2 + 1 / 2)) ** 0.5)

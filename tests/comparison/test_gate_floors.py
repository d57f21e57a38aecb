"""The gate's floors hold exactly where the policy puts them, through ``kbase.gate`` on generated exports.

A kernel is regressed only when its change is significant *and* every floor holds: the absolute floor
(``abs_floor_us``: 2 µs per iteration per GPU), the share floor (``share_floor``: 0.5% of the iteration; a new
kernel under it is not gated either) and the optional relative floor (``max_increase_pct``); the total kernel
time fails at ``total_increase_pct`` (3%). Each floor is tested on both sides of its value and at the value
itself (a floor is reached at equality; ``min_effect_pct`` is off here except in its own tests), so a floor moved (2 µs read as 2 ns), ignored, or compared with ``>``
instead of ``>=`` fails a test here.

The exports are exact: the kernels under test have no jitter, so a kernel of 100 µs per iteration slowed by
2% takes exactly 102 µs in every iteration, and its change is exactly 2,000 ns and 2% — far beyond the noise
(the within-capture spread is nil; the assumed run-to-run noise is 0.2%): only the floors decide.
"""

from __future__ import annotations

import math

import pytest

import kbase
from kbase.enums import KernelClass
from kbase.synth.generate import ExportSpec, KernelSpec, generate_export

GEMM = KernelSpec("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn", "ampere_bf16_s16816gemm", 8_000_000, 1,
                  jitter=0.0)
TARGET = KernelSpec("void kbase_floor_target_kernel<float>(float *, int)", "kbase_floor_target_kernel", 100_000, 1,
                    jitter=0.0)  # ~1.2% of the iteration
SMALL = KernelSpec("void kbase_floor_small_kernel<float>(float *, int)", "kbase_floor_small_kernel", 20_000, 1,
                   jitter=0.0)  # ~0.25% of the iteration: under the share floor
NOISE = KernelSpec("void at::native::vectorized_elementwise_kernel<(int)4, FillFunctor<float>>(int, T2, T3)",
                   "vectorized_elementwise_kernel", 200_000, 2, jitter=0.01)
NEW_SMALL = KernelSpec("void kbase_floor_new_kernel<float>(float *, int)", "kbase_floor_new_kernel", 20_000, 1,
                       jitter=0.0)
MIX = [GEMM, TARGET, SMALL, NOISE]

RECIPES = {
    "base": {},
    "abs_below": {"slowdown": {TARGET.name: 1.01999}},  # +1,999 ns: 1 ns under the absolute floor
    "abs_at": {"slowdown": {TARGET.name: 1.02}},  # +2,000 ns: at the absolute floor, +2.0%
    "small_slower": {"slowdown": {SMALL.name: 1.25}},  # +5,000 ns, +25%, but 0.3% of the iteration
    "target_slower": {"slowdown": {TARGET.name: 1.05}},  # +5,000 ns, +5%
    "new_small": {"add": [NEW_SMALL]},  # a new kernel of 0.25% of the iteration
    "gemm_slower": {"slowdown": {GEMM.name: 1.02}},  # the total kernel time +~1.9%
}


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("floors")
    return {key: generate_export(root / f"{key}.sqlite", ExportSpec(n_gpus=1, iterations=8, seed=1, kernels=MIX,
                                                                      **knobs)).path
            for key, knobs in RECIPES.items()}


def _gate(exports, after: str, tmp_path, **policy):
    # min_effect_pct off unless a test sets it: the floors under test decide alone (the practical-significance
    # floor has its own tests below)
    settings = kbase.Settings.load(repo=tmp_path, db=f"sqlite:///{tmp_path / 'kb.db'}",
                                   policy={"min_effect_pct": 0.0, **policy})
    return kbase.gate(str(exports["base"]), str(exports[after]), settings)


def _row(result, kernel: KernelSpec) -> dict:
    return next(r for r in result.comparison.result.records() if r["name"] == kernel.name)


def _regressed(result, kernel: KernelSpec) -> bool:
    return _row(result, kernel)["class"] == KernelClass.REGRESSED


# --------------------------------------------------------------------------- the absolute floor (2 µs)


def test_a_change_one_ns_under_the_absolute_floor_is_not_a_regression(exports, tmp_path):
    result = _gate(exports, "abs_below", tmp_path)
    row = _row(result, TARGET)
    assert row["delta_ns"] == 1_999.0 and row["share_before"] >= 0.005
    assert abs(row["z"]) > 5  # significant: only the floor keeps it out
    assert not _regressed(result, TARGET)
    assert result.verdict.code == 0


def test_a_change_at_the_absolute_floor_is_a_regression(exports, tmp_path):
    result = _gate(exports, "abs_at", tmp_path)
    row = _row(result, TARGET)
    assert row["delta_ns"] == 2_000.0
    assert _regressed(result, TARGET)
    assert result.verdict.code == 1 and [f.name for f in result.verdict.failing] == [TARGET.name]


def test_the_absolute_floor_is_read_in_microseconds(exports, tmp_path):
    """``abs_floor_us`` from the policy, in µs: 1.999 lets the 1,999 ns change through, 2.001 holds 2,000 back."""
    assert _regressed(_gate(exports, "abs_below", tmp_path, abs_floor_us=1.999), TARGET)
    assert not _regressed(_gate(exports, "abs_at", tmp_path, abs_floor_us=2.001), TARGET)


# --------------------------------------------------------------------------- the share floor (0.5%)


def test_a_kernel_under_the_share_floor_is_never_gated(exports, tmp_path):
    result = _gate(exports, "small_slower", tmp_path)
    row = _row(result, SMALL)
    assert row["delta_ns"] == 5_000.0 and abs(row["z"]) > 5  # well past the absolute floor and the noise
    assert 0.0005 < max(row["share_before"], row["share_after"]) < 0.005
    assert not _regressed(result, SMALL) and result.verdict.code == 0
    # the same change with the floor under its share: regressed
    assert _regressed(_gate(exports, "small_slower", tmp_path, share_floor=0.0005), SMALL)


def test_a_kernel_at_the_share_floor_is_gated(exports, tmp_path):
    """The floor set to exactly the kernel's share of the iteration (the larger of before and after, over the
    before side's iteration time): gated; a hair above it: not."""
    first = _gate(exports, "target_slower", tmp_path)
    assert _regressed(first, TARGET)
    row = _row(first, TARGET)
    share = max(row["before"], row["after"]) / first.comparison.result.before.unit_wall_ns
    assert _regressed(_gate(exports, "target_slower", tmp_path, share_floor=share), TARGET)
    assert not _regressed(_gate(exports, "target_slower", tmp_path, share_floor=math.nextafter(share, 1.0)), TARGET)


def test_a_new_kernel_under_the_share_floor_does_not_fail_the_gate(exports, tmp_path):
    result = _gate(exports, "new_small", tmp_path)
    row = _row(result, NEW_SMALL)
    assert row["class"] == KernelClass.NEW and row["share_after"] < 0.005
    assert not row["gated"] and result.verdict.code == 0
    lowered = _gate(exports, "new_small", tmp_path, share_floor=0.0005)  # (new kernels fail by default)
    assert _row(lowered, NEW_SMALL)["gated"] and lowered.verdict.code == 1
    at = _gate(exports, "new_small", tmp_path, share_floor=row["share_after"])  # at the floor: gated
    assert _row(at, NEW_SMALL)["gated"] and at.verdict.code == 1
    above = _gate(exports, "new_small", tmp_path, share_floor=math.nextafter(row["share_after"], 1.0))
    assert not _row(above, NEW_SMALL)["gated"] and above.verdict.code == 0


# --------------------------------------------------------------------------- the relative floor (off by default)


def test_the_relative_floor_is_off_by_default(exports, tmp_path):
    assert kbase.Settings.load(repo=tmp_path).policy.max_increase_pct == 0.0
    assert _regressed(_gate(exports, "abs_at", tmp_path), TARGET)  # +2%: no relative floor holds it back


def test_a_change_at_the_relative_floor_is_a_regression_and_under_it_is_not(exports, tmp_path):
    row = _row(_gate(exports, "abs_at", tmp_path), TARGET)
    assert row["delta_ns"] / row["before"] == 0.02  # exactly +2%
    assert _regressed(_gate(exports, "abs_at", tmp_path, max_increase_pct=2.0), TARGET)
    assert not _regressed(_gate(exports, "abs_at", tmp_path, max_increase_pct=2.001), TARGET)
    assert not _regressed(_gate(exports, "target_slower", tmp_path, max_increase_pct=10.0), TARGET)  # +5% < 10%


# --------------------------------------------------------------------------- the total kernel time (3%)


def test_the_total_kernel_time_fails_at_its_floor(exports, tmp_path):
    """+~1.9% of kernel time, significant (every iteration slower): under the 3% floor it does not fail the
    gate's total rule; with the floor at exactly that increase, it does."""
    result = _gate(exports, "gemm_slower", tmp_path)
    total = result.comparison.result.totals.kernel
    assert 1.0 < total.delta_pct < 3.0 and total.p_value < 0.05
    assert not total.regressed
    at = _gate(exports, "gemm_slower", tmp_path, total_increase_pct=total.delta_pct).comparison.result.totals.kernel
    assert at.regressed
    above = _gate(exports, "gemm_slower", tmp_path, total_increase_pct=math.nextafter(total.delta_pct, 100.0))
    assert not above.comparison.result.totals.kernel.regressed


# --------------------------------------------------------------------------- min_effect_pct (practical significance)


def test_a_significant_regression_under_min_effect_pct_is_reported_and_does_not_fail(exports, tmp_path):
    result = _gate(exports, "target_slower", tmp_path, min_effect_pct=0.5)  # +5,000 ns: ~0.06% of the iteration
    row = _row(result, TARGET)
    assert row["class"] == KernelClass.REGRESSED_BELOW_FLOOR and abs(row["z"]) > 5
    assert row["effect"] < 0.005 and not row["gated"]
    assert result.verdict.code == 0


def test_a_regression_over_min_effect_pct_fails(exports, tmp_path):
    result = _gate(exports, "target_slower", tmp_path, min_effect_pct=0.05)
    assert _regressed(result, TARGET) and _row(result, TARGET)["effect"] >= 0.0005
    assert result.verdict.code == 1

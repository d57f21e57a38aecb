"""Noise sources and the per-kernel decision."""

import math

import numpy as np
import pytest

from kbase.comparison import noise


def test_iteration_estimate():
    b = np.array([100.0, 101, 99, 100, 100])
    a = b * 1.05
    e = noise.iteration_estimate(b, a)
    assert e is not None and e.rel == pytest.approx(0.05) and e.source == "iterations"
    assert e.se == pytest.approx(math.sqrt(np.var(b, ddof=1) / 5 + np.var(a, ddof=1) / 5) / 100)
    assert noise.iteration_estimate(b[:2], a) is None


def test_level_noise_ignores_a_step():
    rng = np.random.default_rng(0)
    x = 1000 * (1 + rng.normal(0, 0.003, 40))
    x[20:] *= 1.10
    assert noise.level_noise(x) == pytest.approx(0.003, rel=0.35)
    assert math.isnan(noise.level_noise(np.array([1.0, 2.0])))


def test_history_needs_min_history_levels():
    lv = np.array([[100, 101, 99, 100, 100.5, 99.5], [100, np.nan, np.nan, np.nan, 100, 101]])
    sd = noise.history_noise(lv, min_history=5)
    assert np.isfinite(sd[0]) and np.isnan(sd[1])


def test_repeat_noise():
    lv = np.array([[100.0, 102.0, 98.0]])
    assert noise.repeat_noise(lv)[0] == pytest.approx(0.02)
    assert np.isnan(noise.repeat_noise(np.array([[100.0]]))[0])


def test_pick_noise_prefers_run_to_run_then_smallest_within():
    within = [noise.Estimate(0.03, 0.01, "iterations", 5), noise.Estimate(0.031, 0.002, "launches", 8)]
    hist = noise.pick_noise(0.029, within, ("history", 0.004, 10.0), (1, 1), 0.002)
    prior = noise.RUN_NOISE_PRIOR_DF
    pooled = (prior * 0.002**2 + 10.0 * 0.004**2) / (prior + 10.0)  # the assumed floor as prior evidence
    assert hist.source == "history" and hist.rel == 0.029 and hist.se == pytest.approx(math.sqrt(2 * pooled))
    assert hist.df == prior + 10.0
    w = noise.pick_noise(0.029, within, None, (1, 1), 0.002)
    assert w.source == "launches" and w.se == pytest.approx(math.sqrt(0.002**2 + 2 * 0.002**2))
    assert noise.pick_noise(0.0, [None], None, (1, 1), 0.002).source == "assumed"


def test_a_young_history_is_pooled_with_the_assumed_run_noise():
    """5 baselines give a robust sd ~2 degrees of freedom: alone, Student's t at 2 df needs ~10x the noise
    to call anything; pooled with ``run_noise`` the test keeps its power, and a long history dominates."""
    young = noise.pick_noise(0.03, [], ("history", 0.002, 2.0), (1, 1), 0.002)
    assert young.df == noise.RUN_NOISE_PRIOR_DF + 2.0 and young.se == pytest.approx(0.002 * math.sqrt(2))
    args = {"before_ns": 1e6, "after_ns": 1.03e6, "wall_ns": 5e6, "z_crit": noise.z_threshold(0.02, 25),
            "abs_floor_ns": 0, "share_floor": 0, "rel_floor": 0}
    assert noise.decide(young, **args).regressed  # +3% over 0.28% noise
    alone = noise.Estimate(0.03, 0.002 * math.sqrt(2), "history", 2, df=2.0)
    assert not noise.decide(alone, **args).regressed and noise.decide(alone, **args).mde_rel > 0.1
    long = noise.pick_noise(0.03, [], ("history", 0.01, 200.0), (1, 1), 0.002)
    assert long.se == pytest.approx(math.sqrt(2 * (noise.RUN_NOISE_PRIOR_DF * 0.002**2 + 200 * 0.01**2) / 210))


def _decide(rel, se, before=1e6, wall=1e7, **kw):
    args = {"z_crit": noise.z_threshold(0.01, 20), "abs_floor_ns": 2000, "share_floor": 0.005, "rel_floor": 0.0}
    args.update(kw)
    return noise.decide(noise.Estimate(rel, se, "iterations", 5), before_ns=before, after_ns=before * (1 + rel),
                        wall_ns=wall, **args)


def test_decide_against_own_noise_and_floors():
    assert noise.z_threshold(0.01, 20) == pytest.approx(3.48, abs=0.01)
    k = _decide(0.03, 0.004)
    assert k.regressed and not k.improved and k.z == pytest.approx(7.5)
    assert k.mde_rel == pytest.approx((noise.z_threshold(0.01, 20) + noise.POWER_Z) * 0.004)
    assert k.mde_ns == pytest.approx(k.mde_rel * 1e6)
    assert not _decide(0.03, 0.01).regressed  # within its noise
    assert _decide(-0.03, 0.004).improved
    assert not _decide(0.03, 0.004, before=5e4).regressed  # 1.5 µs: under the absolute floor
    assert not _decide(0.03, 0.004, wall=1e9).regressed  # 0.1% of the iteration: under the share floor
    assert not _decide(0.03, 0.004, rel_floor=0.05).regressed  # optional relative floor
    assert not _decide(0.03, float("nan")).regressed


def test_assumed_is_never_a_regression():
    k = noise.decide(noise.assumed_noise(), before_ns=1e6, after_ns=2e6, wall_ns=1e7, z_crit=3.0, abs_floor_ns=0,
                     share_floor=0, rel_floor=0)
    assert not k.regressed and k.test == "none" and math.isnan(k.mde_rel)


def test_student_t_thresholds_for_small_samples():
    assert noise.t_threshold(0.05, 10) == pytest.approx(2.228, abs=0.002)
    assert noise.t_threshold(0.05, float("inf")) == pytest.approx(1.960, abs=0.001)
    e = noise.iteration_estimate(np.array([100.0, 101, 99, 100, 100]), np.array([103.0, 104, 102, 103, 103]))
    assert e is not None and e.df == pytest.approx(8.0)
    # the same z is enough with many degrees of freedom and not with few
    args = {"before_ns": 1e6, "after_ns": 1.03e6, "wall_ns": 1e7, "z_crit": noise.z_threshold(0.01, 20),
            "abs_floor_ns": 0, "share_floor": 0, "rel_floor": 0}
    assert noise.decide(noise.Estimate(0.03, 0.0075, "iterations", 5, df=math.inf), **args).regressed
    assert not noise.decide(noise.Estimate(0.03, 0.0075, "iterations", 5, df=6.0), **args).regressed


def test_pick_noise_floor_raises_degrees_of_freedom():
    e = noise.pick_noise(0.0, [noise.Estimate(0.0, 0.002, "iterations", 5, df=8.0)], None, (1, 1), 0.002)
    assert e.df == pytest.approx((0.002**2 + 2 * 0.002**2) ** 2 / (0.002**4 / 8))


def test_policy_keys_for_the_noise_model():
    from kbase.errors import InputError
    from kbase.policy import Policy, load_policy

    p = load_policy({"fpr": 0.05, "run_noise": 0.001, "min_history": 8, "history_baselines": 30})
    assert (p.fpr, p.run_noise, p.min_history, p.history_baselines) == (0.05, 0.001, 8, 30)
    assert Policy().max_increase_pct == 0.0  # the relative floor is an option, off by default
    for bad in ({"fpr": 1.5}, {"fpr": 0}, {"min_history": 0}, {"run_noise": -1}):
        with pytest.raises(InputError):
            load_policy(bad)

"""Step detection over a kernel's per-commit levels."""

import numpy as np

from kbase.comparison.changepoints import commit_levels, detect_steps, find_creeps, kernel_steps


def _noise(seed, n=40, sd=0.003):
    return 1e5 * (1 + np.random.default_rng(seed).normal(0, sd, n))


def test_single_steps_are_located_exactly():
    for seed in range(20):
        x = _noise(seed)
        x[13:] *= 1.03
        steps = detect_steps(x)
        assert [s.index for s in steps] == [13], seed
        assert abs(steps[0].rel - 0.03) < 0.005


def test_noise_only_histories_have_no_steps():
    assert sum(len(detect_steps(_noise(100 + seed))) for seed in range(50)) <= 1


def test_creep_of_small_steps_reports_cumulative_size():
    found = 0
    for seed in range(20):
        x = _noise(200 + seed, sd=0.002)
        for at in (5, 11, 17, 23, 29):
            x[at:] *= 1.01
        creeps = find_creeps(detect_steps(x))
        if len(creeps) == 1:
            found += 1
            assert abs(creeps[0].rel - 0.051) < 0.012 and creeps[0].steps >= 3
    assert found >= 18


def test_large_step_is_not_a_creep():
    x = _noise(5)
    x[20:] *= 1.2
    assert find_creeps(detect_steps(x)) == []


def test_kernel_steps_orders_by_effect_and_names_commit_ranges():
    commits = [f"c{i:02d}" for i in range(40)]
    lv = np.vstack([_noise(1), _noise(2) * 10, _noise(3)])
    lv[0, 27:] *= 1.05
    lv[1, 13:] *= 1.03  # ten times the time: the larger effect on the iteration
    out = kernel_steps(lv, ["a", "b", "c"], ["a", "b", "c"], commits, 1e7)
    assert [(s.name, s.from_commit, s.to_commit) for s in out] == [("b", "c12", "c13"), ("a", "c26", "c27")]
    assert out[0].effect > out[1].effect > 0


def test_commit_levels_average_repeat_baselines():
    lv = np.array([[1.0, 3.0, 5.0, np.nan]])
    per, order = commit_levels(lv, ["x", "x", "y", "z"])
    assert order == ["x", "y", "z"] and per[0][0] == 2.0 and per[0][1] == 5.0 and np.isnan(per[0][2])


def test_the_matrix_path_equals_the_list_path_to_the_bit():
    """``kbase steps`` hands every kernel over thousands of baselines as one numpy matrix (vectorised splits,
    noise and commit means); ``kbase history`` one kernel as a list (plain Python). Same series, same steps:
    boundaries, levels and z equal to the last bit, on random histories with steps, creeps, gaps (NaN:
    not run), repeat baselines at one commit and flat stretches."""
    rng = np.random.default_rng(7)
    n_kernels, n = 60, 160
    levels = np.empty((n_kernels, n))
    for i in range(n_kernels):
        base = rng.uniform(1e3, 1e7)
        row = base * (1 + rng.uniform(0.001, 0.05) * rng.standard_normal(n))
        for at in rng.integers(2, n - 2, size=rng.integers(0, 4)):
            row[at:] *= rng.choice([0.7, 0.97, 1.01, 1.02, 1.3])
        row[rng.random(n) < 0.05] = np.nan
        if i % 7 == 0:
            row[:] = base  # no noise at all
        levels[i] = row
    commits = [f"c{j // 3 if j % 5 == 0 else j}" for j in range(n)]  # some commits hold several baselines
    names = [f"k{i}" for i in range(n_kernels)]
    as_lists = kernel_steps(levels.tolist(), names, names, commits, 1e8)
    as_matrix = kernel_steps(levels, names, names, commits, 1e8)
    assert as_lists and as_matrix == as_lists  # dataclasses: every field, floats compared exactly
    per_commit, order = commit_levels(levels, commits)
    lists, order_l = commit_levels(levels.tolist(), commits)
    assert order == order_l
    np.testing.assert_array_equal(per_commit, np.array(lists))
    for row in levels[:20]:
        x = row[np.isfinite(row)]
        assert detect_steps(x) == detect_steps(x.tolist())

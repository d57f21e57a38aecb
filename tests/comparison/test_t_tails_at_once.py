"""The t tails of a whole diff at once (``stats.t_two_sided_p_many``, ``noise.p_values``) are the scalar ones bit
for bit, and a decision that leaves its p-value to them (``decide(..., with_p=False)``) is otherwise the same
decision. No scipy: the scalar functions are the reference here (test_stats.py holds them to scipy)."""

from __future__ import annotations

import math
from dataclasses import asdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbase.comparison.noise import Estimate, _same_sign, decide, p_value, p_values
from kbase.comparison.stats import t_two_sided_p, t_two_sided_p_many

_SPECIAL = [0.0, -0.0, 1e-300, 5e-324, 1e300, math.inf, -math.inf, math.nan, 1.0, 0.5, -1.0]
_t = st.one_of(st.sampled_from(_SPECIAL), st.floats(0, 1e3), st.floats(allow_nan=True, allow_infinity=True))
_df = st.one_of(st.sampled_from([*_SPECIAL, 2.0, 98.0, 1000.5, 1e7]), st.floats(0.01, 1e5),
                st.floats(allow_nan=True, allow_infinity=True))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_t, _df), max_size=40))
def test_t_tails_at_once_are_the_scalar_ones_bit_for_bit(pairs):
    t = np.array([p[0] for p in pairs], dtype=float)
    df = np.array([p[1] for p in pairs], dtype=float)
    try:
        want = np.array([t_two_sided_p(a, b) for a, b in pairs], dtype=float)
    except ValueError:  # a subnormal df halves to 0: log-gamma's domain error, in both
        with pytest.raises(ValueError):
            t_two_sided_p_many(t, df)
        return
    assert _same(t_two_sided_p_many(t, df), want)


def test_t_tails_at_once_over_a_diff_sized_spread():
    rng = np.random.default_rng(7)
    n = 5000
    t = np.abs(rng.standard_normal(n)) * rng.choice([0.01, 1, 3, 10, 300], n)
    df = rng.choice([1, 1.5, 2, 5, 19, 98, 400, 1e4], n) * rng.uniform(0.5, 2, n)
    df[::7] = 98.0  # shared degrees of freedom (the log-gamma part is taken once per value)
    want = np.array([t_two_sided_p(a, b) for a, b in zip(t.tolist(), df.tolist())])
    assert _same(t_two_sided_p_many(t, df), want)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=True, allow_infinity=True), _df), max_size=40))
def test_p_values_are_p_value_of_each_pair(pairs):
    z = np.array([p[0] for p in pairs], dtype=float)
    df = np.array([p[1] for p in pairs], dtype=float)
    try:
        want = np.array([p_value(a, b) for a, b in pairs], dtype=float)
    except ValueError:  # (as above)
        with pytest.raises(ValueError):
            p_values(z, df)
        return
    assert _same(p_values(z, df), want)


@pytest.mark.parametrize("df", [3.0, 47.5, math.inf])
@pytest.mark.parametrize("rel", [0.2, -0.2, 0.0, 1e-9, math.nan])
def test_a_decision_without_its_p_value_is_otherwise_the_same(rel, df):
    est = Estimate(rel=rel, se=0.01, source="iterations", n=40, df=df)
    kw = dict(before_ns=1e6, after_ns=1e6 * (1 + (0.0 if rel != rel else rel)), wall_ns=5e7, z_crit=3.0,
              abs_floor_ns=1e3, share_floor=0.001, rel_floor=0.0, min_effect=0.001)
    whole, later = asdict(decide(est, **kw)), asdict(decide(est, **kw, with_p=False))
    p = whole.pop("p_value")
    assert math.isnan(later.pop("p_value"))
    assert later.keys() == whole.keys()
    assert all(later[k] == whole[k] or (later[k] != later[k] and whole[k] != whole[k]) for k in whole)
    assert _same(p_values(np.array([whole["z"]]), np.array([df])), np.array([p]))


@pytest.mark.parametrize("a", _SPECIAL)
@pytest.mark.parametrize("b", _SPECIAL)
def test_same_sign_is_numpys_sign_comparison(a, b):
    with np.errstate(invalid="ignore"):
        assert _same_sign(a, b) == bool(np.sign(a) == np.sign(b))


def test_a_diff_fills_every_tested_kernels_and_ops_p_value():
    """The p-values left to ``p_values`` reach the rows: every kernel row and op row a test ran on has one, of
    its z (the committed January 2021 ResNet-50 pair: workers 0 and 4, kernels and ops)."""
    import kbase
    from kbase.comparison.diff import compute_diff
    from kbase.comparison.side import side_from_leaderboards
    from kbase.policy import Policy

    from helpers.shared import REPO

    settings_ = kbase.Settings.load()
    sides = []
    for n in (0, 4):
        path = REPO / "tests" / "data" / "kineto" / f"v100_resnet50_w{n}_jan2021.pt.trace.json.gz"
        lb = kbase.leaderboard(kbase.window(kbase.read(path, settings_), settings_), sketches=True, ops=True)
        sides.append(side_from_leaderboards([lb], path.name))
    result = compute_diff(sides[0], sides[1], Policy())
    rows = result.rows
    tested = rows["test"] != "none"
    assert tested.sum() > 10
    assert np.isfinite(rows.loc[tested, "p_value"]).all()
    assert rows.loc[~tested, "p_value"].isna().all()
    assert result.ops is not None
    z, p = result.ops.table["z"], result.ops.table["p_value"]
    assert np.isfinite(z).sum() > 10
    assert np.isfinite(p[np.isfinite(z)]).all() and ((p >= 0) & (p <= 1))[np.isfinite(z)].all()


def test_the_threshold_memo_stays_bounded_and_answers_alike(monkeypatch):
    """``t_threshold`` memoises on its raw arguments; a process running many diffs meets new p's (the z threshold
    depends on the kernels tested): past its bound the memo starts over, and every answer is ``_t_quantile``'s."""
    from kbase.comparison import noise

    monkeypatch.setattr(noise, "_THRESHOLDS", {})
    monkeypatch.setattr(noise, "_THRESHOLDS_MAX", 50)
    for tested in range(1, 400):
        p = math.erfc(noise.z_threshold(0.001, tested) / math.sqrt(2.0))
        for df in (3.2, 98.0, math.inf):
            got = noise.t_threshold(p, df)
            key = math.inf if not math.isfinite(df) or df > 1000 else max(math.floor(df * 2) / 2, 1.0)
            assert got == noise._t_quantile(float(f"{p:.6g}"), key)
            assert len(noise._THRESHOLDS) <= 50

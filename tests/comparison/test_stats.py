"""kbase.comparison.stats (plain numpy/math, no scipy at run time) agrees with scipy.stats.

- ``mann_whitney_p``: two-sided Mann–Whitney U. Exact null distribution when there are no ties and
  both sides have at most ``EXACT_MAX`` samples (scipy ``method="exact"``), else the normal
  approximation with tie and continuity corrections (scipy ``method="asymptotic"``).
- ``t_two_sided_p``: Student's t two-sided tail (scipy ``t.sf``), at the fractional degrees of freedom
  Welch–Satterthwaite gives; ``t_two_sided_quantile``: its inverse, the threshold of the noise model's tests.

scipy is a test-only reference here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from kbase.comparison.stats import EXACT_MAX, mann_whitney_p, t_two_sided_p, t_two_sided_quantile

sps = pytest.importorskip("scipy.stats")


def _scipy_mw(a, b, exact: bool) -> float:
    return float(sps.mannwhitneyu(a, b, alternative="two-sided", method="exact" if exact else "asymptotic",
                                  use_continuity=True).pvalue)


def _has_ties(a, b) -> bool:
    both = np.concatenate([a, b])
    return len(np.unique(both)) < len(both)


def _close(got: float, want: float, rtol: float = 1e-6, atol: float = 1e-12) -> bool:
    return math.isclose(got, want, rel_tol=rtol, abs_tol=atol)


# --------------------------------------------------------------------------- Mann–Whitney U


@pytest.mark.parametrize("seed", range(40))
def test_mann_whitney_small_exact_no_ties(seed):
    rng = np.random.default_rng([seed, 1])
    n1, n2 = int(rng.integers(1, 13)), int(rng.integers(1, 13))
    shift = rng.choice([0.0, 0.5, 1.5, 4.0])
    a = rng.normal(0.0, 1.0, n1)
    b = rng.normal(shift, 1.0, n2)
    assert not _has_ties(a, b)
    got, want = mann_whitney_p(a, b), _scipy_mw(a, b, exact=True)
    assert _close(got, want), (n1, n2, shift, got, want)


@pytest.mark.parametrize("n1,n2", [(5, 5), (6, 6), (5, 6), (6, 5), (9, 9), (10, 11), (12, 12), (25, 25),
                                   (25, 3), (1, 25), (EXACT_MAX, EXACT_MAX - 1)])
def test_mann_whitney_exact_sizes_and_extremes(n1, n2):
    """Boundary sizes of the exact path, fully separated samples (smallest p) and identical-looking ones."""
    rng = np.random.default_rng([n1, n2, 7])
    a = rng.normal(0.0, 1.0, n1)
    b = rng.normal(0.0, 1.0, n2)
    for x, y in ((a, b), (a, b + 100.0), (a + 100.0, b)):
        got, want = mann_whitney_p(x, y), _scipy_mw(x, y, exact=True)
        assert _close(got, want), (n1, n2, got, want)
    # The smallest possible two-sided p at 6 vs 6 (the short-capture case of the noise model).
    if (n1, n2) == (6, 6):
        assert _close(mann_whitney_p(np.arange(6.0), np.arange(6.0) + 10), 2 / math.comb(12, 6))


@pytest.mark.parametrize("seed", range(30))
def test_mann_whitney_with_ties(seed):
    """Integer-rounded samples (ties within and across sides): normal approximation with tie correction."""
    rng = np.random.default_rng([seed, 2])
    n1, n2 = int(rng.integers(3, 40)), int(rng.integers(3, 40))
    a = np.round(rng.normal(10.0, 2.0, n1))
    b = np.round(rng.normal(10.0 + rng.choice([0.0, 1.0, 3.0]), 2.0, n2))
    if not _has_ties(a, b):
        a[0] = b[0]
    got, want = mann_whitney_p(a, b), _scipy_mw(a, b, exact=False)
    assert _close(got, want), (n1, n2, got, want)


@pytest.mark.parametrize("seed", range(20))
def test_mann_whitney_larger_n(seed):
    """Beyond EXACT_MAX: the normal approximation with continuity correction, as scipy's asymptotic."""
    rng = np.random.default_rng([seed, 3])
    n1, n2 = int(rng.integers(EXACT_MAX + 1, 300)), int(rng.integers(2, 300))
    a = rng.lognormal(0.0, 0.3, n1)
    b = rng.lognormal(rng.choice([0.0, 0.02, 0.1]), 0.3, n2)
    got, want = mann_whitney_p(a, b), _scipy_mw(a, b, exact=False)
    assert _close(got, want), (n1, n2, got, want)


def test_mann_whitney_degenerate_inputs():
    assert mann_whitney_p([], [1.0, 2.0]) == 1.0
    assert mann_whitney_p([1.0], []) == 1.0
    # every value tied: no evidence of a shift (scipy returns nan or 1 here depending on version)
    assert mann_whitney_p([3.0] * 8, [3.0] * 8) == 1.0
    # symmetric in its arguments (two-sided)
    rng = np.random.default_rng(5)
    a, b = rng.normal(0, 1, 7), rng.normal(1, 1, 9)
    assert _close(mann_whitney_p(a, b), mann_whitney_p(b, a))


# --------------------------------------------------------------------------- Student's t


@pytest.mark.parametrize("seed", range(20))
def test_t_tail_matches_scipy_at_fractional_degrees_of_freedom(seed):
    """The tail the noise model's z-tests take, at the degrees of freedom Welch–Satterthwaite gives (fractional,
    from 1 to the thousands) and |t| from 0 to far in the tail."""
    rng = np.random.default_rng([seed, 4])
    for df, t in zip(rng.uniform(1.0, 3000.0, 10) ** rng.uniform(0.0, 1.0, 10), rng.exponential(3.0, 10)):
        got, want = t_two_sided_p(float(t), float(df)), float(2 * sps.t.sf(t, df))
        assert _close(got, want, rtol=1e-6, atol=1e-300), (t, df, got, want)


@pytest.mark.parametrize("t,df", [(0.0, 5.0), (0.5, 1.0), (1.96, 1e6), (2.0, 3.3), (-3.0, 12.0), (10.0, 40.0),
                                  (40.0, 300.0), (1.0, 0.5), (6.0, 2.0)])
def test_t_distribution_tail(t, df):
    assert _close(t_two_sided_p(t, df), float(2 * sps.t.sf(abs(t), df)), rtol=1e-6, atol=1e-300)


def test_t_tail_degenerate_inputs():
    assert t_two_sided_p(float("inf"), 10) == 0.0
    assert t_two_sided_p(3.0, 0.0) == 1.0  # no degrees of freedom: no evidence


@pytest.mark.parametrize("df", [1.0, 1.5, 2.0, 3.0, 4.5, 7.0, 12.0, 30.0, 99.0, 600.0])
def test_t_quantile_has_the_asked_tail(df):
    """The threshold the diff uses: its two-sided tail is p to 1e-9, from p = 0.5 down to 1e-10."""
    from statistics import NormalDist

    for p in (0.5, 0.05, 1e-3, 2.5e-4, 1e-6, 1e-10):
        z = NormalDist().inv_cdf(1 - p / 2)
        q = t_two_sided_quantile(p, df, z)
        assert q >= z - 1e-12
        assert t_two_sided_p(q, df) == pytest.approx(p, rel=1e-9), (p, df, q)
    # textbook values (two-sided 5% and 1%)
    assert t_two_sided_quantile(0.05, 10.0, 1.959964) == pytest.approx(2.228139, abs=1e-6)
    assert t_two_sided_quantile(0.01, 3.0, 2.575829) == pytest.approx(5.840909, abs=1e-6)

"""``mann_whitney_many`` (all kernels ranked at once) gives, row by row, exactly what a per-kernel
loop gives: against a plain reference ranking (the pre-vectorisation algorithm, kept here) always,
and against scipy.stats.mannwhitneyu when scipy is installed."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kbase.comparison.stats import EXACT_MAX, mann_whitney_many, mann_whitney_p


def _reference_ranks(a: np.ndarray, b: np.ndarray) -> tuple[float, list[int]]:
    """U of ``a`` and the tie group sizes, by the straightforward loop over sorted values."""
    both = np.concatenate([a, b])
    order = both.argsort(kind="mergesort")
    ranks = np.empty(len(both))
    vals = both[order]
    ties, i = [], 0
    while i < len(both):
        j = i
        while j + 1 < len(both) and vals[j + 1] == vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    return ranks[: len(a)].sum() - len(a) * (len(a) + 1) / 2.0, ties


def _reference_normal_p(a: np.ndarray, b: np.ndarray) -> float:
    n1, n2 = len(a), len(b)
    u1, ties = _reference_ranks(a, b)
    n = n1 + n2
    tie_term = sum(t**3 - t for t in ties) / (n * (n - 1))
    sigma = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term))
    if sigma == 0:
        return 1.0
    z = (abs(u1 - n1 * n2 / 2.0) - 0.5) / sigma
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0)))


def _matrices(seed: int, k: int, n1: int, n2: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([seed, n1, n2])
    if kind == "ties":  # per-iteration sums of a few launch lengths: many ties, whole rows of zeros
        a = rng.integers(0, 6, (k, n1)).astype(float) * 1e3
        b = rng.integers(0, 7, (k, n2)).astype(float) * 1e3
        a[::7] = 0.0
        b[::7] = 0.0
    else:
        a = rng.normal(1e5, 1e3, (k, n1))
        b = rng.normal(1e5, 1e3, (k, n2)) + rng.choice([0.0, 500.0, 3e3], (k, 1))
    return a, b


@pytest.mark.parametrize("kind", ["ties", "continuous"])
@pytest.mark.parametrize("n1,n2", [(99, 99), (50, 120), (30, 26), (3, 40)])
def test_many_equals_the_reference_loop_on_the_normal_path(kind, n1, n2):
    a, b = _matrices(1, 300, n1, n2, kind)
    got = mann_whitney_many(a, b)
    want = np.array([_reference_normal_p(a[i], b[i]) for i in range(len(a))])
    assert np.array_equal(got, want)  # bit-identical: same ranks, same tie term, same formula


@pytest.mark.parametrize("kind", ["ties", "continuous"])
@pytest.mark.parametrize("n1,n2", [(5, 5), (12, 9), (EXACT_MAX, EXACT_MAX), (1, 25)])
def test_many_equals_the_scalar_test_row_by_row(kind, n1, n2):
    """Small sides take the exact null without ties and the normal approximation with them."""
    a, b = _matrices(2, 200, n1, n2, kind)
    got = mann_whitney_many(a, b)
    assert np.array_equal(got, np.array([mann_whitney_p(a[i], b[i]) for i in range(len(a))]))


@pytest.mark.parametrize("n1,n2", [(99, 99), (8, 10), (40, 7)])
def test_many_agrees_with_scipy(n1, n2):
    sps = pytest.importorskip("scipy.stats", reason="scipy is a test-only reference")
    for kind in ("ties", "continuous"):
        a, b = _matrices(3, 60, n1, n2, kind)
        got = mann_whitney_many(a, b)
        for i in range(len(a)):
            ties = len(np.unique(np.r_[a[i], b[i]])) < n1 + n2
            exact = not ties and n1 <= EXACT_MAX and n2 <= EXACT_MAX
            if not exact and np.ptp(np.r_[a[i], b[i]]) == 0:
                assert got[i] == 1.0  # all values equal: no evidence (scipy returns nan here)
                continue
            want = sps.mannwhitneyu(a[i], b[i], alternative="two-sided", method="exact" if exact else "asymptotic",
                                    use_continuity=True).pvalue
            assert math.isclose(got[i], want, rel_tol=1e-6, abs_tol=1e-12), (kind, i, got[i], want)


def test_many_edge_shapes():
    assert mann_whitney_many(np.zeros((0, 5)), np.zeros((0, 7))).shape == (0,)
    assert np.array_equal(mann_whitney_many(np.zeros((3, 0)), np.ones((3, 4))), np.ones(3))
    with pytest.raises(ValueError):
        mann_whitney_many(np.zeros((3, 4)), np.zeros((2, 4)))
    nan_row = np.array([[np.nan, 1.0, 2.0]])
    assert mann_whitney_many(nan_row, np.array([[3.0, np.nan]]))[0] == mann_whitney_p(nan_row[0], [3.0, np.nan])


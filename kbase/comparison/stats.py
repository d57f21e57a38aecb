"""The two significance tests of the noise model, in plain numpy/math (importing scipy.stats
would cost a CLI call more time than the whole diff).

- ``mann_whitney_p``: two-sided Mann–Whitney U on per-iteration samples; exact null distribution
  when there are no ties and both sides are small, else the normal approximation with tie and
  continuity corrections.
- ``welch_p``: two-sided Welch t-test from (count, mean, std) of per-launch durations.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

EXACT_MAX = 25


@lru_cache(maxsize=256)
def _u_distribution(n1: int, n2: int) -> np.ndarray:
    """Counts of rank arrangements giving each U (0..n1*n2), by the standard recursion."""
    # f[m][u] for the current n (columns grow with n2): iterate with a 2-D table over (i, j).
    prev = [np.ones(1, dtype=np.float64) for _ in range(n1 + 1)]  # j = 0: only U = 0
    for j in range(1, n2 + 1):
        cur = [np.ones(1, dtype=np.float64)]  # i = 0
        for i in range(1, n1 + 1):
            size = i * j + 1
            a = np.zeros(size)
            left = cur[i - 1]  # f(i-1, j, u - j)
            a[j : j + len(left)] += left
            up = prev[i]  # f(i, j-1, u)
            a[: len(up)] += up
            cur.append(a)
        prev = cur
    return prev[n1]


def mann_whitney_p(a, b) -> float:
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return 1.0
    both = np.concatenate([a, b])
    order = both.argsort(kind="mergesort")
    ranks = np.empty(len(both))
    sorted_vals = both[order]
    # average ranks for ties
    i = 0
    ties = []
    while i < len(both):
        j = i
        while j + 1 < len(both) and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1.0
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    u1 = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    u = min(u1, n1 * n2 - u1)
    if not ties and n1 <= EXACT_MAX and n2 <= EXACT_MAX:
        dist = _u_distribution(min(n1, n2), max(n1, n2))
        p = 2.0 * dist[: int(math.floor(u)) + 1].sum() / dist.sum()
        return float(min(1.0, p))
    n = n1 + n2
    tie_term = sum(t**3 - t for t in ties) / (n * (n - 1)) if n > 1 else 0.0
    sigma = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term))
    if sigma == 0:
        return 1.0
    z = (abs(u1 - n1 * n2 / 2.0) - 0.5) / sigma
    return float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0))))


def _betacf(a: float, b: float, x: float) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + aa / c if abs(c) > 1e-300 else 1e300
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > 1e-300 else 1e-300)
        c = 1.0 + aa / c if abs(c) > 1e-300 else 1e300
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-12:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(lbeta) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbeta) * _betacf(b, a, 1 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    if not math.isfinite(t):
        return 0.0
    if df <= 0:
        return 1.0
    return float(_betainc(df / 2.0, 0.5, df / (df + t * t)))


def welch_p(n1: float, m1: float, s1: float, n2: float, m2: float, s2: float) -> float:
    if n1 < 2 or n2 < 2:
        return 1.0
    v1, v2 = s1 * s1 / n1, s2 * s2 / n2
    if v1 + v2 == 0:
        return 1.0 if m1 == m2 else 0.0
    t = (m2 - m1) / math.sqrt(v1 + v2)
    df = (v1 + v2) ** 2 / ((v1 * v1) / (n1 - 1) + (v2 * v2) / (n2 - 1)) if (v1 or v2) else n1 + n2 - 2
    return t_two_sided_p(t, df)

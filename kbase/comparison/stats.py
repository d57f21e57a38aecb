"""The two significance tests of the noise model, in plain numpy/math (importing scipy.stats
would cost a CLI call more time than the whole diff).

- ``mann_whitney_p``: two-sided Mann–Whitney U on per-iteration samples; exact null distribution
  when there are no ties and both sides are small, else the normal approximation with tie and
  continuity corrections.
- ``t_two_sided_p`` / ``t_two_sided_quantile``: Student's t tail and threshold, for the noise model's z-tests
  at an estimate's degrees of freedom.
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


def _tie_ranks(both: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Average ranks (1-based; tied values share their mean rank) of every row of ``both`` (rows x n),
    each row's tie term sum(t**3 - t) over its groups of tied values, and whether the row has ties.

    All rows at once: one sort per row, group boundaries from the sorted values, no Python loop over
    kernels or values (the per-kernel loop was two thirds of a stored diff's compute time)."""
    rows, n = both.shape
    order = both.argsort(axis=1, kind="mergesort")
    s = np.take_along_axis(both, order, axis=1)
    start = np.ones((rows, n), dtype=bool)
    start[:, 1:] = s[:, 1:] != s[:, :-1]
    flat_start = np.flatnonzero(start.ravel())  # first position of every group, row-major
    sizes = np.diff(np.append(flat_start, rows * n))  # groups never span rows: every row starts one
    avg = flat_start % n + (sizes - 1) / 2.0 + 1.0
    ranks = np.empty((rows, n))
    np.put_along_axis(ranks, order, np.repeat(avg, sizes).reshape(rows, n), axis=1)
    row_of = flat_start // n
    tied = sizes > 1
    tie = np.bincount(row_of, weights=np.where(tied, sizes**3 - sizes, 0).astype(float), minlength=rows)
    has_ties = np.bincount(row_of, weights=tied.astype(float), minlength=rows) > 0
    return ranks, tie, has_ties


def mann_whitney_many(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Two-sided Mann–Whitney U p-values of every row pair: row i of ``a`` (k x n1) against row i of
    ``b`` (k x n2). The same p-values as ``mann_whitney_p`` row by row, ranked all at once."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    if a.ndim != 2 or b.ndim != 2 or len(a) != len(b):
        raise ValueError(f"expected two matrices with the same number of rows, got {a.shape} and {b.shape}")
    k, n1 = a.shape
    n2 = b.shape[1]
    if k == 0:
        return np.empty(0)
    if n1 == 0 or n2 == 0:
        return np.ones(k)
    ranks, tie, has_ties = _tie_ranks(np.concatenate([a, b], axis=1))
    u1 = ranks[:, :n1].sum(axis=1) - n1 * (n1 + 1) / 2.0
    out = np.empty(k)
    cum = None  # exact null: cumulative counts of U (integers below 2**53, so the sums are exact)
    if n1 <= EXACT_MAX and n2 <= EXACT_MAX:
        cum = np.cumsum(_u_distribution(min(n1, n2), max(n1, n2)))
    n = n1 + n2
    for i in range(k):  # scalar tail per row (cheap): keeps every p-value bit-identical to the scalar test
        out[i] = _p_from_u(float(u1[i]), n1, n2, n, float(tie[i]), bool(has_ties[i]), cum)
    return out


def _p_from_u(u1: float, n1: int, n2: int, n: int, tie_sum: float, ties: bool, cum: np.ndarray | None) -> float:
    u = min(u1, n1 * n2 - u1)
    if not ties and cum is not None:
        return float(min(1.0, 2.0 * cum[int(math.floor(u))] / cum[-1]))
    tie_term = tie_sum / (n * (n - 1)) if n > 1 else 0.0
    sigma = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term))
    if sigma == 0:
        return 1.0
    z = (abs(u1 - n1 * n2 / 2.0) - 0.5) / sigma
    return float(min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2.0))))


def mann_whitney_p(a, b) -> float:
    """Two-sided Mann–Whitney U p-value of two samples (one row of ``mann_whitney_many``)."""
    a = np.asarray(a, dtype=float).ravel()
    b = np.asarray(b, dtype=float).ravel()
    if len(a) == 0 or len(b) == 0:
        return 1.0
    return float(mann_whitney_many(a[None, :], b[None, :])[0])


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


def t_two_sided_p_many(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    """``t_two_sided_p`` of every (|t|, df) pair, bit for bit (a diff asks it of every kernel: 20,000 continued
    fractions in Python were ~0.3 s). The continued fraction runs on all pairs at once with the same
    operations in the same order (IEEE arithmetic: numpy's and Python's are the same), each pair leaving
    where the scalar loop stops; the log-gamma prefactor stays ``math``'s, per pair."""
    t = np.asarray(t, dtype=float)
    df = np.asarray(df, dtype=float)
    out = np.where(np.isfinite(t), 1.0, 0.0)
    with np.errstate(invalid="ignore"):
        run = np.flatnonzero(np.isfinite(t) & ~(df <= 0))  # (a NaN df goes on, as in the scalar test)
    with np.errstate(all="ignore"):  # (t * t past the float range: inf, x = 0; df inf: x NaN; as in Python)
        x = df[run] / (df[run] + t[run] * t[run])
        a, b = df[run] / 2.0, np.full(len(run), 0.5)
        low, high = x <= 0, x >= 1
        out[run[low]] = 0.0
        out[run[high]] = 1.0
        inside = ~(low | high)
        run, x, a, b = run[inside], x[inside], a[inside], b[inside]
        front = x < (a + 1) / (a + b + 2)  # as ``_betainc`` chooses its side
    ca, cb = np.where(front, a, b), np.where(front, b, a)
    frac = _betacf_many(ca, cb, np.where(front, x, 1 - x))
    gammas: dict[float, float] = {}  # the log-gamma part by a: kernels share degrees of freedom
    values = []
    for aj, bj, xj, fj, front_j in zip(a.tolist(), b.tolist(), x.tolist(), frac.tolist(), front.tolist()):
        g = gammas.get(aj)
        if g is None:
            g = gammas[aj] = math.lgamma(aj + bj) - math.lgamma(aj) - math.lgamma(bj)  # (b is always 0.5)
        lbeta = g + aj * math.log(xj) + bj * math.log(1 - xj)  # (``_betainc``'s sum, in its order)
        values.append(math.exp(lbeta) * fj / aj if front_j else 1.0 - math.exp(lbeta) * fj / bj)
    out[run] = values
    return out


def _betacf_many(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``_betacf`` of every (a, b, x), elementwise: the same steps, each element frozen once it converges."""
    h = np.empty(len(a))
    with np.errstate(all="ignore"):  # (the branch ``np.where`` drops may divide by ~0)
        qab, qap, qam = a + b, a + 1.0, a - 1.0
        c, d = np.ones(len(a)), 1.0 - qab * x / qap
        d = 1.0 / np.where(np.abs(d) > 1e-300, d, 1e-300)
        hh = d
        live = np.arange(len(a))
        for m in range(1, 300):
            if not len(live):
                break
            m2 = 2 * m
            aa = m * (b - m) * x / ((qam + m2) * (a + m2))
            d = 1.0 + aa * d
            d = 1.0 / np.where(np.abs(d) > 1e-300, d, 1e-300)
            c = np.where(np.abs(c) > 1e-300, 1.0 + aa / c, 1e300)
            hh = hh * (d * c)
            aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
            d = 1.0 + aa * d
            d = 1.0 / np.where(np.abs(d) > 1e-300, d, 1e-300)
            c = np.where(np.abs(c) > 1e-300, 1.0 + aa / c, 1e300)
            delta = d * c
            hh = hh * delta
            done = np.abs(delta - 1.0) < 1e-12
            if done.any():
                h[live[done]] = hh[done]
                keep = ~done
                live = live[keep]
                a, b, x, qab, qap, qam, c, d, hh = (v[keep] for v in (a, b, x, qab, qap, qam, c, d, hh))
        h[live] = hh  # (not converged in 299 steps: where the scalar loop ends too)
    return h


def t_pdf(t: float, df: float) -> float:
    """Student's t density."""
    return math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
                    - (df + 1) / 2 * math.log1p(t * t / df))


def t_two_sided_quantile(p: float, df: float, z: float) -> float:
    """|t| whose two-sided tail at ``df`` degrees of freedom is ``p`` (``z``: the normal quantile, a lower
    bound). Newton steps on log tail from the Cornish–Fisher expansion (A&S 26.7.5), kept inside a
    bracket that bisection narrows when a step leaves it: 3–6 tail evaluations instead of ~65 for
    bisection alone (each is a continued fraction in Python; a diff evaluates hundreds of thresholds)."""
    lo, target = z, math.log(p)
    z2 = z * z
    t = z * (1 + (z2 + 1) / (4 * df) + (5 * z2 * z2 + 16 * z2 + 3) / (96 * df * df)
             + (3 * z2 ** 3 + 19 * z2 * z2 + 17 * z2 - 15) / (384 * df ** 3))
    hi = max(t, z) * 1.5 + 1.0
    while t_two_sided_p(hi, df) > p:
        lo, hi = hi, hi * 2
    t = min(max(t, lo), hi)
    for _ in range(100):
        tail = t_two_sided_p(t, df)
        if tail > p:
            lo = t
        else:
            hi = t
        if tail <= 0.0:
            step = (lo + hi) / 2 - t
        else:
            step = (math.log(tail) - target) * tail / (2 * t_pdf(t, df))  # d log tail / dt = -2 f / tail
        nxt = t + step
        if not lo < nxt < hi:
            nxt = (lo + hi) / 2
        if abs(nxt - t) <= 1e-13 * t or hi - lo <= 1e-13 * hi:
            return nxt
        t = nxt
    return t

"""Launches placed in marker ranges (``iterations._contain``) equal a brute-force search over every range of the
launch's scope: for ranges that never overlap within a scope (step markers, placed by one search per launch)
and for nested ones (the innermost, searched back through enclosing ranges); launches already placed, without
a launch time, or from a scope without ranges keep what they had."""

from __future__ import annotations

import numpy as np
import pytest

from kbase.analysis.iterations import NOT_IN_ITERATION, MarkerRanges, _contain
from kbase.readers.profile import RangeColumns


def _ranges(rng, scopes: list[int], per_scope: int, nested: bool) -> tuple[np.ndarray, MarkerRanges]:
    rows = []
    for s in scopes:
        at = int(rng.integers(0, 1_000))
        for _ in range(per_scope):
            length = int(rng.integers(0, 300))  # zero-length ranges hold nothing
            rows.append((at, at + length, s))
            if nested and rng.random() < 0.5:  # one or two ranges inside, maybe ending with it
                inner = at + int(rng.integers(0, length + 1))
                rows.append((inner, inner + int(rng.integers(0, at + length - inner + 1)), s))
                rows.append((inner, inner + int(rng.integers(0, at + length - inner + 1)), s))
            at += length + int(rng.integers(0, 3)) * int(rng.integers(0, 50))  # back to back, or a gap
    rng.shuffle(rows)
    start, end, scope = (np.array(c, dtype=np.int64) for c in zip(*rows))
    key = rng.permutation(len(rows)).astype(np.int64) + 100
    ranges = RangeColumns(start=start, end=end, tid=scope, pid=scope, name=np.array(["r"] * len(rows), dtype=object))
    return scope, MarkerRanges(ranges, key)


def _brute(t, kscope, rscope, r: MarkerRanges, out):
    """The latest-starting range of the launch's scope holding it (ties: the later in (scope, start) order)."""
    want = out.copy()
    order = np.lexsort((r.ranges.start, rscope))
    for i in range(len(t)):
        if want[i] != NOT_IN_ITERATION or t[i] < 0:
            continue
        for j in order[::-1]:
            if rscope[j] == kscope[i] and r.ranges.start[j] <= t[i] < r.ranges.end[j]:
                want[i] = r.key[j]
                break
    return want


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("nested", [False, True])
def test_contain_equals_a_brute_force_search(seed, nested):
    rng = np.random.default_rng(seed)
    scopes = [5, 9, 1 << 40][: 1 + seed % 3]  # one scope (no lookup) or several
    rscope, r = _ranges(rng, scopes, per_scope=30, nested=nested)
    n = 3_000
    t = rng.integers(-100, int(r.ranges.end.max()) + 100, n)
    t[rng.random(n) < 0.05] = -1  # no launch call
    kscope = rng.choice(np.array([*scopes, 7]), n)  # scope 7 owns no range
    out = np.full(n, NOT_IN_ITERATION, dtype=np.int64)
    out[rng.random(n) < 0.1] = 42  # placed by an earlier pass: kept
    want = _brute(t, kscope, rscope, r, out)
    _contain(out, t, kscope, rscope, r, chunk=1_000)
    assert np.array_equal(out, want)
    placed = (want != NOT_IN_ITERATION) & (want != 42)
    assert 0.2 < placed.mean() < 0.95  # launches inside and outside ranges are both exercised

"""Launches placed in marker ranges (``iterations._contain``) equal a brute-force search over every range of the
launch's scope: for ranges that never overlap within a scope (step markers, placed by one search per launch)
and for nested ones (the innermost, searched back through enclosing ranges); launches already placed, without
a launch time, or from a scope without ranges keep what they had."""

from __future__ import annotations

import numpy as np
import pytest

from kbase.analysis.iterations import NOT_IN_ITERATION, MarkerRanges, _contain, _contain_in_order
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
@pytest.mark.parametrize("in_order", [False, True])
def test_contain_equals_a_brute_force_search(seed, nested, in_order):
    rng = np.random.default_rng(seed)
    scopes = [5, 9, 1 << 40][: 1 + seed % 3]  # one scope (no lookup) or several
    rscope, r = _ranges(rng, scopes, per_scope=30, nested=nested)
    n = 3_000
    t = rng.integers(-100, int(r.ranges.end.max()) + 100, n)
    t[rng.random(n) < 0.05] = -1  # no launch call
    kscope = rng.choice(np.array([*scopes, 7]), n)  # scope 7 owns no range
    out = np.full(n, NOT_IN_ITERATION, dtype=np.int64)
    out[rng.random(n) < 0.1] = 42  # placed by an earlier pass: kept
    if in_order:  # a reader's (thread, launch call) order: the disjoint ranges' cut-and-repeat path
        order = np.lexsort((t, kscope))
        t, kscope, out = t[order], kscope[order], out[order]
    want = _brute(t, kscope, rscope, r, out)
    _contain(out, t, kscope, rscope, r, chunk=1_000)
    assert np.array_equal(out, want)
    placed = (want != NOT_IN_ITERATION) & (want != 42)
    assert 0.2 < placed.mean() < 0.95  # launches inside and outside ranges are both exercised


def _disjoint_args(t, kscope, rscope, r: MarkerRanges):
    """``_contain``'s disjoint search structures for one chunk (as it builds them)."""
    scopes, r_code = np.unique(rscope, return_inverse=True)
    t0 = min(int(r.ranges.start.min()), int(t.min()))
    span = max(int(r.ranges.end.max()), int(t.max())) - t0 + 1
    order = np.lexsort((r.ranges.start, r_code))
    bounds = np.empty(2 * len(order), dtype=np.int64)
    bounds[0::2] = r_code[order] * span + r.ranges.start[order] - t0
    bounds[1::2] = r_code[order] * span + r.ranges.end[order] - t0
    label = np.full(len(bounds) + 1, NOT_IN_ITERATION, dtype=np.int64)
    label[1::2] = r.key[order]
    return scopes, t0, span, bounds, label


@pytest.mark.parametrize("seed", range(6))
def test_launches_in_scope_and_time_order_are_cut_at_the_boundaries(seed):
    """The (scope, time)-ordered path equals the brute-force search, boundary times included; launches in any
    other order are refused (False) and left untouched for the per-launch search."""
    rng = np.random.default_rng(100 + seed)
    scopes = [3, 1 << 40, (1 << 62) + 5][: 1 + seed % 3]
    rscope, r = _ranges(rng, scopes, per_scope=25, nested=False)
    edges = np.concatenate([r.ranges.start, r.ranges.end])  # launches exactly at a start or an end
    n = 2_000
    t = np.concatenate([rng.integers(-50, int(r.ranges.end.max()) + 50, n - len(edges)), edges])
    t[rng.random(n) < 0.03] = -1
    kscope = rng.choice(np.array([*scopes, -1, 4]), n)  # -1 and 4 own no range
    order = np.lexsort((t, kscope))
    t, kscope = t[order], kscope[order]
    out = np.full(n, NOT_IN_ITERATION, dtype=np.int64)
    out[rng.random(n) < 0.1] = 42
    want = _brute(t, kscope, rscope, r, out)
    args = _disjoint_args(t, kscope, rscope, r)
    assert _contain_in_order(out, t, kscope, *args)
    assert np.array_equal(out, want)
    shuffled = rng.permutation(n)
    t2, k2 = t[shuffled], kscope[shuffled]
    if not np.array_equal(np.lexsort((t2, k2)), np.arange(n)):
        left = np.full(n, NOT_IN_ITERATION, dtype=np.int64)
        assert not _contain_in_order(left, t2, k2, *args)
        assert (left == NOT_IN_ITERATION).all()


def test_time_going_back_within_a_scope_is_not_in_order():
    """Scopes ascending but one scope's times not: refused (a merge over unsorted times would be wrong)."""
    rng = np.random.default_rng(7)
    rscope, r = _ranges(rng, [1, 2], per_scope=5, nested=False)
    t = np.array([10, 20, 5, 1, 2], dtype=np.int64)
    kscope = np.array([1, 1, 1, 2, 2], dtype=np.int64)
    out = np.full(5, NOT_IN_ITERATION, dtype=np.int64)
    assert not _contain_in_order(out, t, kscope, *_disjoint_args(t, kscope, rscope, r))

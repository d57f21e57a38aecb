"""Each kernel's launch call (same process, same correlation id) found through the dense launch table equals
the sorted-key join it replaces, on hostile keys: repeated keys (the first runtime row wins), no launch,
processes and ids the runtime table lacks; and the table declines ids too far apart."""

import numpy as np
import pytest

from kbase.readers.nsys_launches import LaunchTable, gather_launches, launch_rows
from kbase.readers.nsys_sql import NULL_PID, U32


def _sorted_join(r_key, r_tid, r_start, k_key):
    order = np.argsort(r_key, kind="stable")
    runtime = [r_key[order], r_tid[order], r_start[order]]
    return gather_launches(launch_rows(k_key, runtime), runtime)


def _table_join(r_key, r_tid, r_start, k_key, step=1 << 20):
    table = LaunchTable.build(r_key, step=step)
    assert table is not None
    runtime = [table, r_tid, r_start]
    return gather_launches(launch_rows(k_key, runtime), runtime)


def _keys(rng, n, pids, corr_lo, corr_hi):
    return (rng.choice(pids, n).astype(np.int64) << 32) | rng.integers(corr_lo, corr_hi, n)


@pytest.mark.parametrize("seed", range(6))
def test_table_equals_sorted_join(seed):
    rng = np.random.default_rng(seed)
    pids = np.array([7, 9, 4_000, 70_000][: 2 + seed % 3])
    n = 5_000
    r_key = _keys(rng, n, pids, 10_000, 14_000)  # ~1,000 slots per process: repeated keys are common
    r_key[rng.random(n) < 0.05] = -2  # runtime rows without a usable correlation id
    if seed % 2:
        r_key = np.sort(r_key)  # nsys writes them nearly sorted
    r_tid = rng.integers(0, 1 << 40, n)
    r_start = rng.integers(0, 1 << 50, n)
    k_key = _keys(rng, 8_000, np.append(pids, 12), 9_000, 15_000)  # pid 12 and ids outside: no launch
    k_key[rng.random(len(k_key)) < 0.05] = -1
    want = _sorted_join(r_key, r_tid, r_start, k_key)
    got = _table_join(r_key, r_tid, r_start, k_key, step=777)  # several blocks
    assert all(np.array_equal(w, g) for w, g in zip(want, got))
    found = want[0] >= 0
    assert 0.1 < found.mean() < 0.95  # both found and missing launches are exercised
    # a repeated key gives its first runtime row
    first = {}
    for i, k in enumerate(r_key.tolist()):
        first.setdefault(k, i)
    for j in np.flatnonzero(found)[:200]:
        assert got[0][j] == r_tid[first[int(k_key[j])]]


def test_table_declines_ids_far_apart():
    rng = np.random.default_rng(1)
    sparse = (np.int64(3) << 32) | rng.choice(U32, 1_000, replace=False).astype(np.int64)
    assert LaunchTable.build(sparse) is None  # corr ids across 2^32: the sorted join instead
    far_pids = (np.array([1, NULL_PID + 1] * 500, dtype=np.int64) << 32) | np.arange(1_000)
    assert LaunchTable.build(far_pids) is None
    assert LaunchTable.build(np.full(10, -2, dtype=np.int64)) is None
    assert LaunchTable.build(np.zeros(0, dtype=np.int64)) is None


@pytest.mark.parametrize("absent_pid", [False, True])
def test_table_equals_sorted_join_when_every_key_is_in_range(absent_pid):
    """Every kernel key inside the table's process and id ranges (a real capture's case, which the lookup
    takes without boolean indexing): still equal to the sorted join, with ids no runtime row holds (-1) and,
    with ``absent_pid``, a process between two others that launched nothing."""
    rng = np.random.default_rng(3)
    pids = np.array([7, 9])
    r_key = _keys(rng, 4_000, pids, 10_000, 13_000)
    r_tid = rng.integers(0, 1 << 40, len(r_key))
    r_start = rng.integers(0, 1 << 50, len(r_key))
    k_pids = np.array([7, 8, 9]) if absent_pid else pids
    lo, hi = int((r_key & U32).min()), int((r_key & U32).max()) + 1
    k_key = _keys(rng, 6_000, k_pids, lo, hi)
    want = _sorted_join(r_key, r_tid, r_start, k_key)
    got = _table_join(r_key, r_tid, r_start, k_key)
    assert all(np.array_equal(w, g) for w, g in zip(want, got))
    assert 0.2 < (want[0] >= 0).mean() < 0.9


@pytest.mark.parametrize("no_launch", [False, True])
def test_table_of_keys_each_once_equals_sorted_join(no_launch):
    """Every key once (as CUPTI numbers a process's calls): the table placed without keeping first rows, over
    several blocks and in any order, still equals the sorted join; with ``no_launch`` rows without an id too."""
    rng = np.random.default_rng(5)
    slots = (np.repeat(np.array([7, 9, 30], dtype=np.int64), 3_000) << 32) | np.tile(np.arange(5_000, 8_000), 3)
    r_key = rng.permutation(slots)[:7_000]
    if no_launch:
        r_key[rng.random(len(r_key)) < 0.05] = -2
    r_tid = rng.integers(0, 1 << 40, len(r_key))
    r_start = rng.integers(0, 1 << 50, len(r_key))
    k_key = rng.choice(slots, 6_000)
    want = _sorted_join(r_key, r_tid, r_start, k_key)
    got = _table_join(r_key, r_tid, r_start, k_key, step=999)
    assert all(np.array_equal(w, g) for w, g in zip(want, got))
    assert 0.5 < (got[0] >= 0).mean() < 0.95

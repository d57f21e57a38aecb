"""The per-kernel statistics (``analysis.kernel_stats``) equal the plain computation they replaced, bit for bit:
32-bit keys (short kernels, few names) and 64-bit ones, keys handed over sorted (the launch sketches' sort),
launches in GPU order or not, and the edges (no launch, one group, durations past 2^40 or negative)."""

from __future__ import annotations

import numpy as np
import pytest

from kbase.analysis import kernel_stats
from kbase.analysis.kernel_stats import _gpus_per_name, _sorted_by_group, aggregate_kernels, group_stats


def _plain_stats(group: np.ndarray, dur: np.ndarray, n_groups: int, chunk: int = 1 << 20) -> dict[str, np.ndarray]:
    """The computation before: one 64-bit sort, bincounts over every launch."""
    dur = np.clip(dur, 0, (1 << 40) - 1).astype(np.int64)
    count = np.bincount(group, minlength=n_groups).astype(np.int64)
    total = np.bincount(group, weights=dur, minlength=n_groups)
    ordered = np.sort((group.astype(np.int64) << 40) | dur) & ((1 << 40) - 1)
    first = np.concatenate([[0], np.cumsum(count)[:-1]]).astype(np.int64)
    present = count > 0
    safe_first = np.where(present, first, 0)
    last = np.where(present, first + count - 1, 0)
    mean = np.divide(total, count, out=np.zeros(n_groups), where=present)
    ss = np.zeros(n_groups)
    for i in range(0, len(dur), chunk):
        g = group[i : i + chunk]
        dev = dur[i : i + chunk] - mean[g]
        ss += np.bincount(g, weights=dev * dev, minlength=n_groups)
    lo = ordered[safe_first + np.maximum(count - 1, 0) // 2]
    hi = ordered[safe_first + count // 2 - (count == 0)]
    return {"count": count, "total_ns": np.rint(total).astype(np.int64), "avg_ns": mean, "median_ns": (lo + hi) / 2.0,
            "min_ns": ordered[safe_first], "max_ns": ordered[last],
            "std_ns": np.sqrt(np.divide(ss, count - 1, out=np.zeros(n_groups), where=count > 1)), "present": present}


def _assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert list(got) == list(want)
    for key in want:
        present = want["present"]  # an absent group's min/max/median are not read
        a, b = got[key], want[key]
        if key in ("min_ns", "max_ns", "median_ns"):
            a, b = a[present], b[present]
        assert a.dtype == b.dtype, key
        assert a.tobytes() == b.tobytes(), key


@pytest.mark.parametrize("chunk", [1 << 20, 1_000])
@pytest.mark.parametrize("case", ["short", "long", "huge", "one_group", "one_launch", "unsorted_groups"])
def test_group_stats_equal_the_plain_computation(case, chunk, monkeypatch):
    """(A 1,000-launch chunk: the path of captures longer than one chunk, without a test of 1M launches.)"""
    monkeypatch.setattr(kernel_stats, "_CHUNK", chunk)
    rng = np.random.default_rng(len(case))
    n, n_groups, top = {"short": (50_000, 300, 200_000), "long": (50_000, 300, 10**10), "huge": (2_000, 40, 1 << 42),
                        "one_group": (3_000, 1, 5_000), "one_launch": (1, 7, 100),
                        "unsorted_groups": (20_000, 2_000, 1 << 20)}[case]
    group = rng.integers(0, n_groups, n).astype(np.int32)
    if case == "unsorted_groups":
        group[group % 3 == 0] = 11  # absent groups between present ones
    dur = rng.integers(-5, top, n).astype(np.int64)  # negative and (huge) past-2^40 durations are clipped
    if case == "huge":
        dur[:2] = np.iinfo(np.int64).max, np.iinfo(np.int64).min
    want = _plain_stats(group, dur.copy(), n_groups, chunk)
    _assert_same(group_stats(group, dur.copy(), n_groups), want)
    # keys handed over already sorted (a snapshot's sketch sort): the same numbers
    keys = np.sort((group.astype(np.int64) << 40) | np.clip(dur, 0, (1 << 40) - 1))
    _assert_same(group_stats(group, dur.copy(), n_groups, ordered=keys), want)


def test_keys_are_32_bit_only_where_they_fit():
    group = np.array([0, 1, 1, 2], dtype=np.int32)
    assert _sorted_by_group(group, np.array([5, 7, 0, (1 << 32) // 3 - 1]), 3).keys.dtype == np.uint32
    assert _sorted_by_group(group, np.array([5, 7, 0, (1 << 32) // 3]), 3).keys.dtype == np.int64
    assert _sorted_by_group(group[:1], np.array([(1 << 32) - 2]), 1).keys.dtype == np.uint32
    assert _sorted_by_group(group[:1], np.array([(1 << 32) - 1]), 1).keys.dtype == np.int64


@pytest.mark.parametrize("seed", range(4))
def test_gpus_per_name_in_gpu_order_equals_any_order(seed):
    rng = np.random.default_rng(seed)
    n = [0, 1, 5_000, 5_000][seed]
    codes = rng.integers(0, 50, n).astype(np.int32)
    gpu = np.sort(rng.choice(np.array([0, 3, 4], dtype=np.int32), n))
    shuffled = rng.permutation(n)
    if n > 1:
        shuffled[:2] = [n - 1, 0]
    ordered = _gpus_per_name(codes, gpu, 50, 5)
    assert ordered.dtype == np.int64
    assert np.array_equal(ordered, _gpus_per_name(codes[shuffled], gpu[shuffled], 50, 5))
    truth = [len(set(gpu[codes == c].tolist())) for c in range(50)]
    assert ordered.tolist() == truth


def test_aggregate_per_gpu_and_not():
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 20, 4_000).astype(np.int32)
    gpu = np.sort(rng.integers(0, 3, 4_000).astype(np.int32))
    dur = rng.integers(0, 10_000, 4_000).astype(np.int64)
    whole = aggregate_kernels(codes, gpu, dur.copy(), 20, per_gpu=False)
    per = aggregate_kernels(codes, gpu, dur.copy(), 20, per_gpu=True)
    assert whole["count"].sum() == per["count"].sum() == 4_000
    assert np.array_equal(np.bincount(per["code"], weights=per["total_ns"], minlength=20)[whole["code"]],
                          whole["total_ns"])
    assert whole["gpus"].tolist() == [len(set(gpu[codes == c].tolist())) for c in whole["code"].tolist()]

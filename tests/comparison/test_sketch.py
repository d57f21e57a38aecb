"""Launch sketches: quantiles per launch-order chunk, robust to a mix of launch shapes."""

import numpy as np
import pytest

from kbase.analysis import sketch
from kbase.comparison import sketch as compared


def _mixed(rng, n=400, slow=1.0):
    """One kernel name over two shapes (150 µs and 7.9 ms launches), interleaved as a training step
    repeats them (3 large of every 10 launches), with timing noise, in start order."""
    big = np.arange(n) % 10 < 3
    dur = np.where(big, 7.9e6, 1.5e5) * (1 + rng.normal(0, 0.002, n)) * slow
    return np.zeros(n, dtype=np.int64), np.arange(n, dtype=np.int64) * 10_000_000, dur


def test_build_sketch_shapes_counts_and_totals():
    rng = np.random.default_rng(0)
    codes, start, dur = _mixed(rng)
    sk = sketch.build_sketches(codes, start, dur, 2)
    assert sk.shape == (2, sketch.CHUNKS, sketch.WIDTH)
    assert sk[0, :, sketch.COUNT].sum() == 400 and sk[0, :, sketch.TOTAL].sum() == pytest.approx(dur.sum())
    assert np.isnan(sk[1, :, : sketch.QUANTILES]).all() and sk[1, :, sketch.COUNT].sum() == 0  # kernel 1 never ran
    q = sk[0, :, : sketch.QUANTILES]
    assert (np.diff(q, axis=1) >= 0).all()  # quantiles ascend within a chunk
    assert q.min() == pytest.approx(1.5e5, rel=0.01) and q.max() == pytest.approx(7.9e6, rel=0.01)


def test_chunks_follow_launch_order_not_row_order():
    dur = np.arange(1, 17, dtype=float)  # launch i lasts i ns; rows shuffled
    start = np.arange(16) * 100
    perm = np.random.default_rng(1).permutation(16)
    sk = sketch.build_sketches(np.zeros(16, dtype=np.int64), start[perm], dur[perm], 1)
    assert list(sk[0, :, sketch.TOTAL]) == [3, 7, 11, 15, 19, 23, 27, 31]


def test_pack_round_trip_and_size():
    sk = sketch.build_sketches(np.zeros(50, dtype=np.int64), np.arange(50), np.arange(50, dtype=float) + 1, 1)[0]
    blob = sketch.pack(sk)
    assert len(blob) == sketch.CHUNKS * sketch.WIDTH * 4
    back = sketch.unpack(blob)
    assert back is not None and np.allclose(back, sk, equal_nan=True)
    assert sketch.unpack(None) is None and sketch.unpack(b"short") is None


def test_uniform_slowdown_of_a_shape_mix_is_measured_exactly():
    rng = np.random.default_rng(2)
    c, s, d = _mixed(rng)
    before = sketch.build_sketches(c, s, d, 1)[0]
    c2, s2, d2 = _mixed(np.random.default_rng(3), slow=1.03)  # another draw of the mix, 3% slower
    after = sketch.build_sketches(c2, s2, d2, 1)[0]
    rel, se, chunks = compared.compare(before, after)
    assert chunks == 8 and rel == pytest.approx(0.03, abs=0.004) and se < 0.005
    assert se < 0.03 * d.std() / d.mean()  # pooled launches: a spread of ~140% hides 3%; matched quantiles do not
    c3, s3, d3 = _mixed(np.random.default_rng(4))
    rel0, se0, _ = compared.compare(before, sketch.build_sketches(c3, s3, d3, 1)[0])
    assert abs(rel0) < 0.002 and abs(rel0) < 4 * se0 + 0.001


def test_pool_averages_quantiles_and_sums_counts():
    a = sketch.build_sketches(np.zeros(16, dtype=np.int64), np.arange(16), np.full(16, 10.0), 1)[0]
    b = sketch.build_sketches(np.zeros(16, dtype=np.int64), np.arange(16), np.full(16, 20.0), 1)[0]
    p = compared.pool([a, b])
    assert np.allclose(p[:, : sketch.QUANTILES], 15.0) and p[:, sketch.COUNT].sum() == 32


@pytest.mark.parametrize("in_order", [True, False])
def test_sketches_built_in_blocks_equal_a_plain_per_chunk_reference(monkeypatch, in_order):
    """Each (kernel, chunk): the launches at order ``rank * CHUNKS // count`` within their kernel (start
    order), their durations sorted, quantile q at position floor(q * n). Blocks of 7 launches split
    every kernel across blocks, as 64K-launch blocks do at scale."""
    monkeypatch.setattr(sketch, "_BLOCK", 7)
    rng = np.random.default_rng(5)
    n, names = 300, 5
    codes = rng.integers(0, names, n).astype(np.int16)
    start = np.arange(n) * 10 if in_order else rng.permutation(n) * 10
    dur = rng.integers(1_000, 90_000, n)
    got = sketch.build_sketches(codes, start, dur, names)
    for k in range(names):
        launches = sorted((int(s), int(d)) for c, s, d in zip(codes, start, dur) if c == k)
        chunks: list[list[int]] = [[] for _ in range(sketch.CHUNKS)]
        for rank, (_, d) in enumerate(launches):
            chunks[rank * sketch.CHUNKS // len(launches)].append(d)
        for j, ds in enumerate(chunks):
            ds.sort()
            assert got[k, j, sketch.COUNT] == len(ds) and got[k, j, sketch.TOTAL] == sum(ds)
            want = [ds[min(int(q * len(ds)), len(ds) - 1)] for q in sketch.QPOS] if ds else [np.nan] * sketch.QUANTILES
            assert np.array_equal(got[k, j, : sketch.QUANTILES], want, equal_nan=True)


def _esd_reference(x: np.ndarray, alpha: float, max_out: int) -> set[int]:
    """Rosner's generalized ESD as published, one row at a time, critical values from scipy."""
    from scipy import stats

    idx, vals, suspects, found = list(range(len(x))), list(x), [], 0
    n = len(x)
    for i in range(1, max_out + 1):
        v = np.array(vals)
        dev = np.abs(v - v.mean())
        j = int(dev.argmax())
        r = dev[j] / v.std(ddof=1)
        p = 1 - alpha / (2 * (n - i + 1))
        t = stats.t.ppf(p, n - i - 1)
        lam = (n - i) * t / np.sqrt((n - i - 1 + t * t) * (n - i + 1))
        if r > lam:
            found = i
        suspects.append(idx.pop(j))
        vals.pop(j)
    return set(suspects[:found])


def test_outlier_chunks_are_gross_esd_outliers():
    """ESD against the textbook procedure, and the modified-z condition on top (median/MAD)."""
    rng = np.random.default_rng(8)
    rows = rng.normal(0, 0.01, (400, 8))
    rows[:150, 2] += rng.choice([-1, 1], 150) * rng.uniform(0.02, 0.3, 150)  # one gross or mild outlier
    rows[:60, 5] -= rng.uniform(0.05, 0.3, 60)  # a second one
    ok = np.ones_like(rows, dtype=bool)
    got = compared.outlier_chunks(rows, ok)
    assert got[:150].any() and not got[300:].any()
    for x, g in zip(rows, got):
        med = np.median(x)
        mad = np.median(np.abs(x - med))
        want = {j for j in _esd_reference(x, compared.OUTLIER_ALPHA, compared.MAX_OUTLIERS)
                if 0.6745 * abs(x[j] - med) > compared.OUTLIER_MODIFIED_Z * mad}
        assert set(np.flatnonzero(g)) == want
    few = compared.outlier_chunks(rows[:150, :5], ok[:150, :5])  # under MIN_CHUNKS_FOR_OUTLIERS: none dropped
    assert not few.any()


def test_normal_chunks_are_rarely_left_out():
    rows = np.random.default_rng(9).normal(0, 0.01, (50_000, sketch.CHUNKS))
    assert compared.outlier_chunks(rows, np.ones_like(rows, dtype=bool)).any(axis=1).mean() < 0.01


def test_one_odd_launch_per_capture_does_not_hide_a_uniform_slowdown():
    """Ten launches alternating two shapes (a ResNet-50 convolution over two layers, 5 iterations), 1%
    jitter, and in each capture one launch 12% long at a different place (a real A/A pair has exactly
    this). Every launch 3% slower: the chunk ratios' spread, odd chunks included, would hide it."""
    rng = np.random.default_rng(10)
    shapes = np.where(np.arange(10) % 2 == 0, 710e3, 595e3)

    def capture(odd: int, slow: float) -> np.ndarray:
        d = np.rint(shapes * (1 + rng.normal(0, 0.01, 10)) / 1e3) * 1e3
        d[odd] *= 1.12
        return sketch.build_sketches(np.zeros(10, dtype=np.int64), np.arange(10), d * slow, 1)[0]

    before, after = capture(9, 1.0), capture(7, 1.03)
    ratios = compared.chunk_ratios(before, after)
    rel, se, chunks = compared.compare(before, after)
    assert chunks == 6 and rel == pytest.approx(0.03, abs=0.01) and rel / se > 4
    assert np.nanstd(ratios, ddof=1) / np.sqrt(8) > 3 * se  # what the plain standard error would have been


def test_fill_from_keys_with_high_bits_equals_fill_from_durations():
    """Quantiles and totals from (kernel << 40 | duration) keys equal those from the bare durations, even
    where count x (kernel << 40) wraps int64 (kernel codes near 2^20)."""
    rng = np.random.default_rng(4)
    gcount = np.array([0, 20, 3, 1, 0, 40], dtype=np.int64)
    gfirst = np.concatenate([[0], np.cumsum(gcount)[:-1]])
    dur = np.concatenate([np.sort(rng.integers(1, 1 << 39, c)) for c in gcount]).astype(np.int64)
    high = (np.array([0, 1 << 20, 5, (1 << 20) + 3, 7, (1 << 21) - 1], dtype=np.int64)) << 40
    keys = dur | np.repeat(high, gcount)
    shape = (len(gcount), 1, sketch.WIDTH)
    want = sketch._fill(np.full(shape, np.nan), dur.copy(), gfirst, gcount)
    got = sketch._fill(np.full(shape, np.nan), keys, gfirst, gcount, high=high)
    assert np.array_equal(want, got, equal_nan=True)
    assert got[5, 0, sketch.TOTAL] == float(dur[24:].sum())

"""``kbase.store.codec.kernel_blobs``: a baseline's kernel table in four blobs. Every leaderboard value comes back
to the bit (NULL as NaN, odd values too: the predictions are only a compression, never a rounding); per-
iteration ns and sketch quantiles within their stated mantissa error, launch counts exactly, microsecond
quantiles (Kineto's) still whole microseconds and nanosecond ones never all whole microseconds (the
comparison reads the timer's resolution off them); the same table always the same bytes; and a diff of
stored baselines decides what the diff of the captures decides."""

from __future__ import annotations

import numpy as np
import pytest

from kbase.analysis.sketch import CHUNKS, COUNT, QUANTILES, TOTAL
from kbase.store.codec.kernel_blobs import (
    BOARD_COLUMNS,
    LEVEL_COLUMNS,
    KernelTable,
    LevelRows,
    decode,
    encode,
    sample_rows,
)
from kbase.store.codec.mantissa import (
    LOSSLESS_BITS,
    QUANTILE_BITS,
    SAMPLE_BITS,
    mantissa_codes,
    mantissa_value,
    mantissa_values,
)
from kbase.store.codec.packed import Packed


def _table(rng, k: int = 300, keys: int = 20, us: bool = False) -> KernelTable:
    """A leaderboard-like table: whole-ns totals, derived columns as ``build_leaderboard`` derives them,
    samples with 0.1-5% noise, sketches of skewed launch durations (whole µs when ``us``)."""
    count = rng.integers(1, 50_000, k)
    avg = rng.lognormal(10, 2, k)
    total = np.sort(np.rint(count * avg).astype(np.int64))[::-1]
    units, window = keys * 8, int(total.sum() * 1.2)
    share = total / window
    t = KernelTable(name_id=rng.permutation(5 * k)[:k].astype(np.int64), count=count, total_ns=total,
                    avg_ns=total / count, per_iter_ns=total / units, share_window=share,
                    gpus=np.full(k, 8, dtype=np.int64), median_ns=np.rint(2 * avg) / 2,
                    min_ns=(avg * 0.8).astype(np.int64), max_ns=(avg * 1.7).astype(np.int64), std_ns=avg * rng.random(k),
                    count_per_iter=count / units, share_kernel=total / total.sum(), amdahl_ceiling=1 / (1 - share + 0.0),
                    fragmented=rng.random(k) < 0.1)
    ns = (total / keys)[:, None] * (1 + rng.uniform(0.001, 0.05, k)[:, None] * rng.standard_normal((k, keys)))
    t.iter_ns, t.iter_count = np.rint(np.maximum(ns, 0)), np.repeat((count // keys)[:, None], keys, axis=1) * 1.0
    t.iter_count[:, ::7] = 0  # iterations without a launch of a kernel
    t.iter_ns[t.iter_count == 0] = 0
    q = np.sort(avg[:, None, None] * rng.lognormal(0, 0.3, (k, CHUNKS, QUANTILES)), axis=2)
    q = np.rint(q / 1000) * 1000 if us else np.rint(q)
    sk = np.concatenate([q, np.zeros((k, CHUNKS, 2))], axis=2)
    n = count[:, None]
    sk[:, :, COUNT] = np.diff(-((-np.arange(CHUNKS + 1)[None, :] * n) // CHUNKS), axis=1)
    sk[:, :, TOTAL] = np.rint(sk[:, :, COUNT] * q.mean(axis=2) * rng.uniform(0.98, 1.02, (k, CHUNKS)))
    sk[sk[:, :, COUNT] == 0, :QUANTILES] = np.nan  # an empty chunk
    sk[::11] = np.nan  # kernels without a sketch
    t.sketches = sk
    return t


def _bits(a: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(a), np.nan, a).view(np.int64) if a.dtype == np.float64 else a


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_round_trip_keeps_every_value_within_its_stated_error(seed):
    rng = np.random.default_rng(seed)
    t = _table(rng, us=seed == 3)
    # odd values a store may hold: NULL levels, an unexpected mean, a median that is no half-integer
    t.per_iter_ns[5] = t.share_window[6] = t.share_kernel[7] = t.amdahl_ceiling[8] = np.nan
    t.avg_ns[9] *= 1 + 1e-15
    if seed == 2:
        t.median_ns[3] = 1234.25
    blobs = encode(t)
    assert encode(t) == blobs  # same table, same bytes
    t2 = KernelTable(**{**t.__dict__, "name_id": t.name_id[::-1].copy()})
    assert encode(t2) == blobs  # the store's ids are not in the blobs
    d = decode(blobs, t.name_id.tolist())
    for c in (*LEVEL_COLUMNS, *BOARD_COLUMNS):
        assert getattr(d, c).dtype == getattr(t, c).dtype or c == "fragmented", c
        np.testing.assert_array_equal(_bits(getattr(d, c)), _bits(getattr(t, c)), err_msg=c)
    np.testing.assert_array_equal(d.iter_count, t.iter_count)
    exact = t.iter_ns < 2 ** (SAMPLE_BITS + 1)
    np.testing.assert_array_equal(d.iter_ns[exact], t.iter_ns[exact])
    assert (np.abs(d.iter_ns - t.iter_ns) <= t.iter_ns * 2.0 ** -(SAMPLE_BITS + 1)).all()
    q0, q1 = t.sketches[:, :, :QUANTILES], d.sketches[:, :, :QUANTILES]
    np.testing.assert_array_equal(np.isnan(q0), np.isnan(q1))
    ok = np.isfinite(q0)
    unit = 1000.0 if seed == 3 else 1.0
    assert (np.abs(q1[ok] - q0[ok]) <= q0[ok] * 2.0 ** -(QUANTILE_BITS + 1) + 1e-9).all()
    assert (q1[ok] == q0[ok]).sum() >= (q0[ok] < unit * 2 ** (QUANTILE_BITS + 1)).sum()  # small ones: exact
    if unit == 1000.0:
        assert not np.mod(q1[ok], 1000.0).any()  # still whole microseconds
    np.testing.assert_array_equal(np.nan_to_num(d.sketches[:, :, COUNT]), np.nan_to_num(t.sketches[:, :, COUNT]))
    tot0, tot1 = np.nan_to_num(t.sketches[:, :, TOTAL]), np.nan_to_num(d.sketches[:, :, TOTAL])
    assert (np.abs(tot1 - tot0) <= tot0 * 2.0 ** -(SAMPLE_BITS + 1) + 0.5).all()
    # the plain-Python readers (kbase show / history) give the very same values
    rows = LevelRows(Packed(blobs.levels), Packed(blobs.board))
    for c in (*LEVEL_COLUMNS[1:], *BOARD_COLUMNS):
        np.testing.assert_array_equal(_bits(np.array(rows.column(c), dtype=getattr(d, c).dtype)), _bits(getattr(d, c)))
    for i in (0, 5, 9, len(t) - 1):
        count, total, avg, per_iter, share = rows.history_row(i)
        assert (count, total) == (t.count[i], t.total_ns[i])
        np.testing.assert_array_equal(_bits(np.array([avg, per_iter, share])),
                                      _bits(np.array([t.avg_ns[i], t.per_iter_ns[i], t.share_window[i]])))
    assert blobs.samples is not None
    ns, cnt = sample_rows(blobs.samples)
    np.testing.assert_array_equal(np.array(ns), d.iter_ns)
    np.testing.assert_array_equal(np.array(cnt), d.iter_count)


def test_mantissa_codes():
    rng = np.random.default_rng(0)
    v = np.concatenate([np.arange(5000.0), np.rint(rng.lognormal(15, 4, 20000)), [2.0**40, 2.0**53]])  # whole ns
    for bits in (8, 10, LOSSLESS_BITS):
        codes = mantissa_codes(v, bits)
        back = mantissa_values(codes, bits)
        assert (np.diff(codes[np.argsort(v, kind="stable")]) >= 0).all()  # monotone: order never reverses
        assert (np.abs(back - v) <= v * 2.0 ** -(bits + 1)).all()
        small = v < 2 ** (bits + 1)
        np.testing.assert_array_equal(back[small], np.rint(v[small]))
        assert [mantissa_value(int(c), bits) for c in codes[::997]] == back[::997].tolist()
        np.testing.assert_array_equal(mantissa_codes(back, bits), codes)  # idempotent: re-encoding keeps them
    f32 = rng.lognormal(15, 4, 5000).astype(np.float32).astype(np.float64)
    f32 = np.rint(f32)
    np.testing.assert_array_equal(mantissa_values(mantissa_codes(f32, LOSSLESS_BITS), LOSSLESS_BITS), f32)


def test_nanosecond_quantiles_never_turn_into_microseconds():
    """Quantiles of a ns timer that the mantissa would round to whole µs are kept exactly: the comparison
    takes a baseline whose quantiles are all whole µs for a µs timer (``side._resolution``)."""
    t = _table(np.random.default_rng(4), k=3)
    t.sketches[:, :, :QUANTILES] = 1_024_000 + np.arange(QUANTILES)  # rounded to 8 bits: 1,024,000 each
    d = decode(encode(t), t.name_id.tolist())
    q = d.sketches[:, :, :QUANTILES]
    np.testing.assert_array_equal(q[np.isfinite(q)], t.sketches[:, :, :QUANTILES][np.isfinite(q)])


def test_a_table_without_samples_or_sketches():
    t = _table(np.random.default_rng(5), k=10)
    t.iter_ns = t.iter_count = t.sketches = None
    b = encode(t)
    assert b.samples is None and b.sketches is None
    d = decode(b, t.name_id.tolist())
    assert d.iter_ns is None and d.sketches is None and d.total_ns.tolist() == t.total_ns.tolist()
    empty = _table(np.random.default_rng(6), k=0)
    assert len(decode(encode(empty), [])) == 0


def test_level_matrix_of_many_blobs_equals_each_decoded():
    """``kbase steps`` decodes the levels of thousands of baselines in batches (blobs stored alike at once):
    the matrix equals one built from each blob decoded on its own, whatever mix of kernel counts, NULL levels
    and levels that are not total / d_iter (stored in a residual) the baselines hold."""
    from kbase.store.codec.id_lists import id_list
    from kbase.store.codec.kernel_blobs import FORMAT
    from kbase.store.read.blob_reads import level_matrix

    rng = np.random.default_rng(9)
    rows, tables = [], {}
    for bid in range(1, 41):
        t = _table(rng, k=int(rng.choice([5, 5, 5, 8, 30])))
        t.name_id = rng.choice(60, size=len(t), replace=False).astype(np.int64)
        if bid % 7 == 0:
            t.per_iter_ns[1] = np.nan  # NULL: a level of 0
        if bid % 11 == 0:
            t.per_iter_ns[0] *= 1 + 1e-12  # not total / d_iter: kept in the residual
        tables[bid] = t
        rows.append((bid, FORMAT, id_list(t.name_id.tolist()), encode(t).levels))
    want_ids = sorted({int(i) for t in tables.values() for i in t.name_id})
    ids = list(range(3, 41)) + [99]  # some baselines asked for, one that has no blob
    got_ids, got = level_matrix(rows, ids)
    order = np.argsort(got_ids)  # (rows in the order names were met)
    got_ids, got = got_ids[order], got[order]
    assert got_ids.tolist() == [i for i in want_ids if any(i in tables[b].name_id for b in ids if b in tables)]
    want = np.full(got.shape, np.nan)
    for j, bid in enumerate(ids):
        if bid in tables:
            t = decode(encode(tables[bid]), tables[bid].name_id.tolist(), samples=False, sketches=False)
            want[np.searchsorted(got_ids, t.name_id), j] = np.nan_to_num(t.per_iter_ns, nan=0.0)
    np.testing.assert_array_equal(got, want)


def test_row_medians_are_numpys_to_the_bit():
    """The blobs' medians (``mantissa.row_medians``, which spares a snapshot numpy.ma's import) equal
    ``np.median`` / ``np.nanmedian`` exactly: the blobs a snapshot writes did not change."""
    import numpy as np

    from kbase.store.codec.mantissa import row_medians

    rng = np.random.default_rng(0)
    for _ in range(500):
        k, n = int(rng.integers(1, 6)), int(rng.integers(1, 9))
        v = rng.integers(0, 1000, (k, n)).astype(np.float64) * rng.choice([1, 0.37, 1e9])
        assert (row_medians(v) == np.median(v, axis=1)).all()
        has = rng.random((k, n)) < 0.6
        has[:, 0] = True
        assert (row_medians(v, has) == np.nanmedian(np.where(has, v, np.nan), axis=1)).all()
        c = rng.integers(0, 50, (k, n))
        assert (row_medians(c) == np.median(c, axis=1)).all()


def test_derivable_columns_are_not_stored_unless_they_do_not_derive():
    """A leaderboard kbase built stores launches and totals only: the mean, time per iteration and the shares
    are computed on read; a column that does not derive (a NULL, another writer's rounding) is stored whole."""
    t = _table(np.random.default_rng(7), k=50)
    blobs = encode(t)
    assert Packed(blobs.levels).names == ["count", "total_ns"]
    assert not {"count_per_iter", "share_kernel", "amdahl_ceiling"} & set(Packed(blobs.board).names)
    t.share_window[3] = np.nan
    odd = encode(t)
    assert Packed(odd.levels).names == ["count", "total_ns", "share_window"]
    assert "amdahl_ceiling" in Packed(odd.board).names  # (its share is NULL: the ceiling no longer derives)
    d = decode(odd, t.name_id.tolist())
    np.testing.assert_array_equal(_bits(d.share_window), _bits(t.share_window))
    np.testing.assert_array_equal(_bits(d.amdahl_ceiling), _bits(t.amdahl_ceiling))


def test_format_1_tables_convert_to_format_2_with_every_value():
    """Migration 0014 and old export files: a format-1 table (name ids and residuals in the blobs) converts to
    format 2 with every column, sample and sketch reading back as before, and the ids by row beside it."""
    from kbase.store.codec import format1

    for seed in (1, 2, 3):
        t = _table(np.random.default_rng(seed), us=seed == 3)
        t.per_iter_ns[5] = t.avg_ns[9] = np.nan
        old = format1.encode(t)
        assert "name_id" in Packed(old.levels).names
        new, ops, ids, op_order = format1.convert(old.levels, old.board, old.samples, old.sketches, None, {})
        assert ids == t.name_id.tolist() and ops is None and op_order == []
        assert new.samples == old.samples and new.sketches == old.sketches
        a, b = format1.decode(old), decode(new, ids)
        for c in (*LEVEL_COLUMNS, *BOARD_COLUMNS):
            np.testing.assert_array_equal(_bits(getattr(a, c)), _bits(getattr(b, c)), err_msg=c)
        assert new == encode(b)  # what a snapshot of the same table writes


def test_sketches_coded_on_a_second_thread_are_the_same_bytes(monkeypatch):
    """``encode`` codes a large sketches blob on a second thread while a core is idle: the blobs are those of the
    one-thread path, byte for byte (and a table below the threshold takes the one-thread path)."""
    import kbase.store.codec.kernel_blobs as kernel_blobs

    t = _table(np.random.default_rng(7), k=400, keys=12)
    monkeypatch.setenv("KBASE_READ_THREADS", "1")
    alone = encode(t)
    monkeypatch.setenv("KBASE_READ_THREADS", "2")
    used: list[int] = []
    real = kernel_blobs.encode_levels

    def spy(table):
        import threading

        used.append(threading.active_count())
        return real(table)

    monkeypatch.setattr(kernel_blobs, "encode_levels", spy)
    monkeypatch.setattr(kernel_blobs, "PARALLEL_SKETCH_VALUES", 1)
    assert encode(t) == alone
    monkeypatch.setattr(kernel_blobs, "PARALLEL_SKETCH_VALUES", t.sketches.size + 1)
    assert encode(t) == alone
    assert used[0] > used[1]  # the first encode ran beside its sketching thread, the second alone

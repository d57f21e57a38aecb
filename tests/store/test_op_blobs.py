"""The ``ops`` blob (``store.op_blobs``): a kernel's only pair is its row and op alone, a kernel split over
several ops stores all its pairs but the largest, which reads back as the remainder; launches and totals
exact, per-iteration ns within the 10-bit codes' error; the history read (``op_totals``, no numpy) gives the
same totals as the full decode."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kbase.analysis.sparse import SparseRows
from kbase.store.codec.mantissa import SAMPLE_BITS, mantissa_codes
from kbase.store.codec.op_blobs import decode_ops, encode_ops, op_totals
from kbase.store.codec.packed import Packed


def _case(seed: int = 0):
    rng = np.random.default_rng(seed)
    kernels, keys = 6, 7
    k_ns = np.rint(rng.uniform(1e3, 1e7, (kernels, 1)) * (1 + 0.02 * rng.standard_normal((kernels, keys))))
    k_ns = k_ns.astype(np.float32).astype(np.float64)  # as the kernel table holds them
    k_count = np.full(kernels, 40, dtype=np.int64)
    k_total = k_ns.sum(axis=1)
    rows, ops, counts, totals, samples = [], [], [], [], []
    split = {1: [11, 12, 13], 4: [12, 14]}  # kernel row -> its ops; the others: one op each (0 for kernel 5: none)
    for r in range(kernels):
        op_list = split.get(r, [10 + r if r < 5 else 0])
        parts = np.rint(k_ns[r] * np.linspace(1, 2, len(op_list))[:, None] / np.linspace(1, 2, len(op_list)).sum())
        parts[-1] = k_ns[r] - parts[:-1].sum(axis=0)
        c = [k_count[r] // len(op_list)] * len(op_list)
        c[-1] = k_count[r] - sum(c[:-1])
        for o, ns, n in zip(op_list, parts, c):
            rows.append(r), ops.append(o), counts.append(n), totals.append(float(ns.sum())), samples.append(ns)
    pairs = SimpleNamespace(count=np.array(counts), total_ns=np.array(totals),
                            iter_ns=SparseRows.from_dense(np.array(samples)))
    table = SimpleNamespace(count=k_count, total_ns=k_total, iter_ns=k_ns)
    return pairs, np.array(rows), np.array(ops), table


def test_pairs_read_back_and_only_split_kernels_cost_samples():
    pairs, rows, ops, table = _case()
    blob = encode_ops(pairs, rows, ops, table.count, table.total_ns, table.iter_ns)
    kind = Packed(blob).ints("explicit")
    assert kind.count(0) == 4 and kind.count(2) == 2 and kind.count(1) == 3  # 3 + 2 pairs split, one rest each
    got = decode_ops(blob, table)
    want = {(r, o): (c, t, ns) for r, o, c, t, ns in zip(rows, ops, pairs.count, pairs.total_ns,
                                                         pairs.iter_ns.dense())}
    assert len(got.row) == len(want)
    for r, o, c, t, ns in zip(got.row.tolist(), got.op_id.tolist(), got.count, got.total_ns, got.iter_ns.dense()):
        wc, wt, wns = want[(r, o)]
        assert (int(c), float(t)) == (int(wc), float(wt))
        # 10-bit codes: <= 2^-11 of the value; a remainder carries its kernel's error too
        np.testing.assert_allclose(ns, wns, rtol=0, atol=2.0**-10 * float(table.iter_ns[r].max()) + 0.5)
    levels = dict(((r, o), t) for (o, t), r in zip(op_totals(blob, table.total_ns.astype(np.int64).tolist()),
                                                 got.row.tolist()))
    assert levels == {(r, o): int(t) for r, o, t in zip(got.row.tolist(), got.op_id.tolist(), got.total_ns)}


def test_a_split_that_does_not_sum_to_its_kernel_is_stored_whole():
    pairs, rows, ops, table = _case(1)
    pairs.count = pairs.count.copy()
    pairs.count[rows == 4] += 1  # its pairs no longer sum to the kernel's launches
    blob = encode_ops(pairs, rows, ops, table.count, table.total_ns, table.iter_ns)
    kind = Packed(blob).ints("explicit")
    assert kind.count(2) == 1 and kind.count(1) == 4
    got = decode_ops(blob, table)
    assert got.count[got.row == 4].tolist() == pairs.count[rows == 4].tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_sparse_layout_reads_back_what_the_dense_one_does(monkeypatch, seed):
    """Past ``DENSE_CELLS`` explicit cells the samples are stored for the iterations each pair ran in (layout
    2); the same pairs read back identically from either layout, and below the bound the blob is the dense
    layout an earlier kbase wrote (layout 1)."""
    import kbase.store.codec.op_blobs as op_blobs

    pairs, rows, ops, table = _case(seed)
    dense_ns = pairs.iter_ns.dense()
    dense_ns[::2, ::3] = 0.0  # pairs that skip some iterations: the cells the sparse layout leaves out
    pairs.iter_ns = SparseRows.from_dense(dense_ns)
    dense = encode_ops(pairs, rows, ops, table.count, table.total_ns, table.iter_ns)
    monkeypatch.setattr(op_blobs, "DENSE_CELLS", 0)
    sparse = encode_ops(pairs, rows, ops, table.count, table.total_ns, table.iter_ns)
    assert Packed(dense).meta["layout"] == 1 and Packed(sparse).meta["layout"] == 2
    assert "ns_col" in Packed(sparse).names and "ns_col" not in Packed(dense).names
    a, b = decode_ops(dense, table), decode_ops(sparse, table)
    for field in ("row", "op_id", "count", "total_ns"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    np.testing.assert_array_equal(a.iter_ns.dense(), b.iter_ns.dense())
    explicit = np.array(Packed(sparse).ints("explicit")) == 1
    ran = (mantissa_codes(dense_ns[np.lexsort((ops, rows))][explicit], SAMPLE_BITS) > 0).sum()
    assert sum(Packed(sparse).ints("ns_cells")) == ran < explicit.sum() * dense_ns.shape[1]


def test_a_sparse_blob_that_lies_is_unreadable_not_a_crash():
    """A sample column outside the iterations, cell counts that disagree with the cells, or a kernel's only
    pair named many times (its kernel-table row would be read, densely, once per naming): ``ValueError`` (the
    store read turns it into one line naming the baseline), never a decode that grows with the lie."""
    import kbase.store.codec.op_blobs as op_blobs
    from kbase.store.codec.packing import pack

    pairs, rows, ops, table = _case(0)
    old, op_blobs.DENSE_CELLS = op_blobs.DENSE_CELLS, 0
    try:
        blob = encode_ops(pairs, rows, ops, table.count, table.total_ns, table.iter_ns)
    finally:
        op_blobs.DENSE_CELLS = old
    p = Packed(blob)
    cols = {n: (p.array(n), p.options(n)) for n in p.names}
    kind = cols["explicit"][0]
    own_row = int(cols["row"][0][np.flatnonzero(kind == 0)[0]])
    cases = (("ns_col", lambda v: v + 100, "outside the iterations"),
             ("ns_cells", lambda v: v * 0 - 1, "cell counts disagree"),
             # a kernel's only pair named again and again: its row would be read as many times
             ("row", lambda v: np.where(kind == 0, own_row, v), "disagree with their kinds"))
    for name, bad, words in cases:
        edited = dict(cols)
        edited[name] = (bad(cols[name][0]), cols[name][1])
        with pytest.raises(ValueError, match=words):
            decode_ops(pack(p.rows, edited, p.meta), table)

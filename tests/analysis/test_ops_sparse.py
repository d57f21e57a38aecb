"""The split of kernel time by op costs memory in proportion to the (op, kernel, iteration) cells that occur, not
to ops x iterations (issue 39): a trace shape whose dense (pairs x iterations) matrix would take terabytes —
many ops, many iterations, each op in a few of them — is attributed, stored and diffed within a stated memory
bound, with the same numbers as a plain aggregation of its launches (a dict over the launches, no numpy).

Earlier kbase capped the dense matrix at 2^26 cells and left such a capture without its split by op."""

from __future__ import annotations

import tracemalloc
from collections import defaultdict
from types import SimpleNamespace

import numpy as np
import pytest

from kbase.analysis.ops import OpColumns, op_board, op_pairs
from kbase.analysis.sparse import SparseRows

MiB = 1 << 20


def _launches(n_ops: int, n_iters: int, per_op: int, n_kernels: int, seed: int = 0):
    """Every op launched in ``per_op`` random iterations (a random kernel each time, whole-ns durations), and
    launches of no op (-1) besides: (op code, kernel code, ns, iteration key) per launch, iteration keys
    starting at 100."""
    rng = np.random.default_rng(seed)
    n = n_ops * per_op
    op = np.repeat(np.arange(n_ops, dtype=np.int32), per_op)
    op[rng.random(n) < 0.01] = -1
    kernel = rng.integers(0, n_kernels, n).astype(np.int64)
    dur = rng.integers(1_000, 50_000, n).astype(np.float64)
    iteration = 100 + rng.integers(0, n_iters, n).astype(np.int64)
    iteration[rng.random(n) < 0.01] = -1  # outside the window's iterations: no sample
    return op, kernel, dur, iteration


def _plain(op, kernel, dur, iteration):
    """The plain aggregation: per (op, kernel) launches and ns, per (op, kernel, iteration) ns."""
    count: dict = defaultdict(int)
    total: dict = defaultdict(float)
    cells: dict = defaultdict(float)
    for o, k, d, i in zip(op.tolist(), kernel.tolist(), dur.tolist(), iteration.tolist()):
        count[(o, k)] += 1
        total[(o, k)] += d
        if i >= 0:
            cells[(o, k, i)] += d
    return count, total, cells


def _ops(n_ops: int) -> OpColumns:
    names = np.array([f"aten::op{i:07d}" for i in range(n_ops)], dtype=object)
    return OpColumns(code=np.empty(0, np.int32), names=names, bare=names)


def _pairs(n_ops, n_iters, per_op, n_kernels, seed=0):
    op, kernel, dur, iteration = _launches(n_ops, n_iters, per_op, n_kernels, seed)
    names = np.array([f"kernel_{k}" for k in range(n_kernels)], dtype=object)
    keys = list(range(100, 100 + n_iters))
    return (op, kernel, dur, iteration), (_ops(n_ops), kernel, op, dur, iteration, keys, names)


def _same_as_plain(pairs, launches, keys) -> None:
    count, total, cells = _plain(*launches)
    got_pairs = {(int(o), int(str(k).rsplit("_", 1)[1])): i
                 for i, (o, k) in enumerate(zip(pairs.op.tolist(), pairs.kernel.tolist()))}
    assert set(got_pairs) == set(count)
    for key, i in got_pairs.items():
        assert int(pairs.count[i]) == count[key] and float(pairs.total_ns[i]) == total[key], key
    s = pairs.iter_ns
    got_cells = {(int(pairs.op[r]), int(str(pairs.kernel[r]).rsplit("_", 1)[1]), keys[c]): v
                 for r, c, v in zip(s.row.tolist(), s.col.tolist(), s.value.tolist())}
    assert got_cells == dict(cells)


@pytest.mark.slow  # ~10 s: the plain aggregation is a Python loop over 200,000 launches
def test_many_ops_over_many_iterations_cost_their_launches_not_the_dense_matrix():
    """100,000 ops over 100,000 iterations, each in 2 (about 200,000 pairs): the dense (pairs, iterations)
    matrix would be ~150 GiB (earlier kbase: over its 2^26-cell cap, left out). Attributed within 48 MiB
    traced (measured: ~22 MiB; the launches' own columns are ~6 MiB), the same numbers as the plain
    aggregation."""
    n_ops, n_iters = 100_000, 100_000
    launches, args = _pairs(n_ops, n_iters, per_op=2, n_kernels=4)
    tracemalloc.start()
    try:
        pairs = op_pairs(*args)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    dense_bytes = len(pairs) * n_iters * 8
    assert dense_bytes > 100 << 30, dense_bytes  # the shape asked for over 100 GiB dense
    assert peak < 48 * MiB, f"{peak / MiB:.0f} MiB traced"
    assert pairs.iter_ns.shape == (len(pairs), n_iters) and pairs.iter_ns.nnz <= len(launches[0])
    _same_as_plain(pairs, launches, args[5])
    # the leaderboard by op adds up to every launch
    summary = SimpleNamespace(iterations=n_iters, gpus=1, aligned=True, window_gpu_ns=float(launches[2].sum()) * 2,
                              total_kernel_ns=float(launches[2].sum()))
    board = op_board(pairs, summary, {})
    assert sum(r["total_ns"] for r in board) == int(launches[2].sum())
    assert sum(r["count"] for r in board) == len(launches[0])


@pytest.mark.parametrize("seed", [0, 1])
def test_small_shapes_equal_the_plain_aggregation_and_the_dense_matrix(seed):
    """Shapes small enough for the dense matrix: the sparse cells are its nonzero cells, exactly."""
    launches, args = _pairs(300, 40, per_op=25, n_kernels=7, seed=seed)
    pairs = op_pairs(*args)
    _same_as_plain(pairs, launches, args[5])
    op, kernel, dur, iteration = launches
    dense = np.zeros(pairs.iter_ns.shape)
    index = {(int(o), str(k)): i for i, (o, k) in enumerate(zip(pairs.op.tolist(), pairs.kernel.tolist()))}
    for o, k, d, i in zip(op.tolist(), kernel.tolist(), dur.tolist(), iteration.tolist()):
        if i >= 0:
            dense[index[(o, f"kernel_{k}")], i - 100] += d
    np.testing.assert_array_equal(pairs.iter_ns.dense(), dense)


@pytest.mark.slow  # ~10 s: the diff's statistics read 80M cells, a block at a time
def test_the_store_and_the_diff_hold_a_sparse_split_in_bounded_memory():
    """10,000 ops over 4,000 iterations (the dense matrix: ~800 MiB, over earlier kbase's 2^26-cell cap): the ``ops`` blob stores the cells
    that occur (layout 2), reads back the same pairs, and the diff by op pools and judges them with its
    statistics read a bounded block at a time; an unchanged capture against itself changes no op."""
    from kbase.comparison.side import _pooled_ops
    from kbase.store.codec.mantissa import SAMPLE_BITS, mantissa_codes, mantissa_values
    from kbase.store.codec.op_blobs import decode_ops, encode_ops
    from kbase.store.codec.packed import Packed

    n_ops, n_iters, n_kernels = 12_000, 5_000, 3
    launches, args = _pairs(n_ops, n_iters, per_op=2, n_kernels=n_kernels, seed=3)
    pairs = op_pairs(*args)
    op, kernel, dur, iteration = launches
    # the kernel table the pairs belong to (kernels x iterations: small), float32 as stored
    k_count = np.bincount(kernel, minlength=n_kernels)
    k_total = np.bincount(kernel, weights=dur, minlength=n_kernels)
    k_ns = np.zeros((n_kernels, n_iters))
    inside = iteration >= 0
    np.add.at(k_ns, (kernel[inside], iteration[inside] - 100), dur[inside])
    k_ns = k_ns.astype(np.float32).astype(np.float64)
    table = SimpleNamespace(count=k_count, total_ns=k_total, iter_ns=k_ns)
    rows = np.array([int(str(k).rsplit("_", 1)[1]) for k in pairs.kernel.tolist()], dtype=np.int64)
    op_ids = pairs.op.astype(np.int64) + 1
    tracemalloc.start()
    try:
        blob = encode_ops(pairs, rows, op_ids, table.count, table.total_ns, table.iter_ns)
        stored = decode_ops(blob, table)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert Packed(blob).meta["layout"] == 2 and peak < 32 * MiB, f"{peak / MiB:.0f} MiB traced"  # measured ~10
    assert len(pairs) * n_iters > 1 << 26
    # the same pairs, exact launches and totals; samples as the 10-bit codes say (a remainder pair within its
    # kernel's error)
    got = {(int(r), int(o)): i for i, (r, o) in enumerate(zip(stored.row.tolist(), stored.op_id.tolist()))}
    want = {(int(r), int(o)): i for i, (r, o) in enumerate(zip(rows.tolist(), op_ids.tolist()))}
    assert got.keys() == want.keys()
    order = np.array([want[k] for k in got], dtype=np.int64)
    np.testing.assert_array_equal(stored.count, pairs.count[order])
    np.testing.assert_array_equal(stored.total_ns, np.rint(pairs.total_ns[order]))
    back, sent = stored.iter_ns.dense(), pairs.iter_ns.take(order)
    coded = mantissa_values(mantissa_codes(sent.value, SAMPLE_BITS), SAMPLE_BITS)
    explicit = np.array(Packed(blob).ints("explicit"))[np.argsort(np.lexsort((op_ids, rows)))][order] == 1
    ex_cells = explicit[sent.row]
    np.testing.assert_array_equal(back[sent.row[ex_cells], sent.col[ex_cells]], coded[ex_cells])
    assert stored.iter_ns.nnz <= pairs.iter_ns.nnz + n_kernels * n_iters

    # the diff's side: the op samples pooled over two captures, sparse; an identical capture changes no op
    from kbase.analysis.summary import LeaderboardSummary
    from kbase.comparison.ops import _sample_noise

    summary = LeaderboardSummary.from_dict({"gpus": 1, "aligned": True, "iterations": n_iters,
                                            "iteration_keys": args[5]})
    cap = SimpleNamespace(ops=pairs, summary=summary)
    tracemalloc.start()
    try:
        side = _pooled_ops([cap, cap])
        both = SimpleNamespace(sample_capture=np.repeat([0, 1], n_iters), pools_captures=True, unit_wall_ns=1.0)
        index = {k: i for i, k in enumerate(side.keys.tolist())}
        within, between, _ = _sample_noise(side.keys, side, side, index, index, both, both)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * MiB, f"{peak / MiB:.0f} MiB traced"  # dense: 640 MiB for the two captures
    assert side.samples.shape == (n_ops, 2 * n_iters)
    per_op = np.zeros(n_ops)
    np.add.at(per_op, op[(op >= 0) & inside], dur[(op >= 0) & inside])
    np.testing.assert_array_equal(side.samples.row_sums(), 2 * per_op)
    # a capture's level: its launches of the op inside the window's iterations, per iteration (as a kernel's)
    np.testing.assert_allclose(side.levels[:, 0], per_op / n_iters, rtol=1e-12)
    assert all(w is None or w.rel == 0.0 for w in within) and np.nanmax(between) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sparse_rows_equal_their_dense_operations_bit_for_bit(seed):
    """What the comparison does with the samples, on sparse rows and on the dense matrix they replace: the same
    floats, bit for bit (sums in the same order), for reordering with empty rows, grouping (``np.add.at``), moving
    columns, joining side by side, row sums (numpy's pairwise sum) and bounded blocks."""
    rng = np.random.default_rng(seed)
    dense = rng.random((40, 300)) * 1e6 * (rng.random((40, 300)) < 0.1)
    s = SparseRows.from_dense(dense)
    assert s.nnz == np.count_nonzero(dense)
    rows = rng.integers(-1, 40, 25)
    want = np.where(rows[:, None] >= 0, dense[np.maximum(rows, 0)], 0.0)
    np.testing.assert_array_equal(s.take(rows).dense(), want)
    code = rng.integers(0, 7, 40)
    grouped = np.zeros((7, 300))
    np.add.at(grouped, code, dense)
    assert (s.grouped(code, 7).dense() == grouped).all()
    where = rng.permutation(np.r_[np.arange(200), np.full(100, -1)])
    moved = np.zeros((40, 200))
    for j, w in enumerate(where.tolist()):
        if w >= 0:
            moved[:, w] = dense[:, j]
    np.testing.assert_array_equal(s.with_columns(where, 200).dense(), moved)
    np.testing.assert_array_equal(SparseRows.hstack([s, s.divided(3.0)]).dense(), np.hstack([dense, dense / 3.0]))
    assert (s.row_sums() == dense.sum(axis=1)).all()
    blocks = list(s.blocks(cells=1000))
    assert max(b.size for _, _, b in blocks) <= 1000 and np.vstack([b for _, _, b in blocks]).tolist() == dense.tolist()
    # cells given in any order, one cell several times: summed in the order given
    r, c = rng.integers(0, 40, 5000), rng.integers(0, 300, 5000)
    v = rng.random(5000)
    summed = np.zeros((40, 300))
    np.add.at(summed, (r, c), v)
    for shape in ((40, 300), (4000, 3000)):  # a table over the cells, and a sort
        got = SparseRows.from_cells(r, c, v, shape)
        assert (got.dense()[:40, :300] == summed).all() and (np.diff(got.row * shape[1] + got.col) > 0).all()
    with pytest.raises(ValueError):
        SparseRows.from_cells(np.array([40]), np.array([0]), np.array([1.0]), (40, 300))

"""Each baseline's kernel time by op (``analysis.ops.OpPairs``) as the store keeps it: one packed-columns blob
(``packed``), ``baseline_kernels.ops``, beside the kernel table's four (docs/store-format.md).

A kernel may serve several ops (elementwise kernels do), so the split is by (kernel, op) pair. Most kernels
serve one op, and then the pair's launches, time and per-iteration samples *are* the kernel's: such a pair is
stored as its kernel's row and its op alone (a few bits), and reads its numbers back from the kernel table.
The others (``explicit``) carry their own launches, total ns and per-iteration ns, the samples as mantissa
codes of ``SAMPLE_BITS`` like the kernel table's (``kernel_blobs``).

Columns, one row per pair in (kernel row, op) order:

- ``row``: the kernel's row in the kernel table (rank order), delta-coded;
- ``op``: the op's position in the baseline's op list, from 1 (0: launched by no op). The list is the
  baseline's distinct op keys in sorted order: an export file carries it (``op_names``), the store keeps each
  position's ``op_name`` id beside the blob (``baseline_kernels.op_ids``), so the blob is the same bytes in
  every store (format 2; format 1 held store ids here);
- ``explicit``: 0 when the pair's numbers are its kernel's (its only pair), 1 when they are stored below, 2
  when they are its kernel's less its other pairs' (the largest pair of a kernel whose pairs sum to it: one
  pair a kernel fewer to store);
- ``count``, ``total_ns``: of the explicit pairs, in order;
- ``ns_median``, ``ns``: their per-iteration ns as mantissa codes, each against the pair's median code of the
  iterations it ran in (layout 1, ``DENSE``: every iteration, one it did not run in the code 0, stored as minus
  that median; layout 2, ``SPARSE``: only the iterations it ran in);
- ``ns_cells``, ``ns_col`` (layout 2): per explicit pair the number of iterations it ran in, and each one's
  column (delta-coded).

Layout 1 is written while the explicit pairs x iterations are at most ``DENSE_CELLS`` (every baseline an earlier
kbase could store, byte for byte), layout 2 past it: the blob, its encoding and its decoding (to
``analysis.sparse.SparseRows``) cost the (pair, iteration) cells that occur, never pairs x iterations.

Meta: ``layout`` (which columns mean what; a reader refuses another in one line), ``keys`` (iteration keys of
the samples, ``baseline.iteration_keys``' order), ``bits``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbase.store.codec.mantissa import SAMPLE_BITS, mantissa_codes, mantissa_values
from kbase.store.codec.packed import Packed
from kbase.store.codec.packing import pack

DENSE, SPARSE = 1, 2  # the ``ops`` blob's layouts: samples of every iteration, or of those a pair ran in
LAYOUTS = (DENSE, SPARSE)
LAYOUT = DENSE  # what kbase wrote before the sparse layout (kept for every blob it could write)
# the explicit pairs' samples (pairs x iterations) written dense up to this many cells: every baseline an
# earlier kbase could store (its op split was capped at 2^26 pair-iteration cells, nearly all of them
# implicit) is written byte for byte as it wrote it; past it, the iterations each pair ran in only
DENSE_CELLS = 1 << 22

if TYPE_CHECKING:
    import numpy as np

    from kbase.analysis.op_pairs import OpPairs
    from kbase.analysis.sparse import SparseRows
    from kbase.store.codec.kernel_blobs import KernelTable


@dataclass
class StoredOps:
    """A baseline's (kernel, op) pairs as stored: the kernel's row in the kernel table, the op's ``op_name`` id
    (0: no op; as decoded, its position in the op list), launches, total ns and (pairs, keys) ns per iteration
    key (sparse: ``analysis.sparse``)."""

    row: np.ndarray
    op_id: np.ndarray
    count: np.ndarray
    total_ns: np.ndarray
    iter_ns: SparseRows


def encode_ops(pairs: OpPairs, rows: np.ndarray, op_ids: np.ndarray, count: np.ndarray, total_ns: np.ndarray,
               iter_ns: np.ndarray | None) -> bytes:
    """The ``ops`` blob of ``pairs``: ``rows``, ``op_ids`` per pair (the kernel's row, the op's position, 0 for none);
    ``count``, ``total_ns``, ``iter_ns``: the kernel table's columns (by row), which a kernel's only pair
    shares. Memory: the pairs' stored cells, and dense rows only of what the kernel table holds dense."""
    import numpy as np

    order = np.lexsort((op_ids, rows))
    row, op = np.asarray(rows, dtype=np.int64)[order], np.asarray(op_ids, dtype=np.int64)[order]
    p_count = np.asarray(pairs.count, dtype=np.int64)[order]
    p_total = np.rint(np.asarray(pairs.total_ns, dtype=np.float64)[order]).astype(np.int64)
    p_ns = pairs.iter_ns.take(order)
    n_keys = p_ns.shape[1]
    pairs_of = np.bincount(row, minlength=int(row.max()) + 1 if len(row) else 0)
    k_count = np.asarray(count, dtype=np.int64)[row]
    k_total = np.rint(np.asarray(total_ns, dtype=np.float64)[row]).astype(np.int64)
    same = (pairs_of[row] == 1) & (p_count == k_count) & (p_total == k_total)
    if n_keys:
        if iter_ns is None or iter_ns.shape[1] != n_keys:
            same[:] = False
        else:  # a kernel's only pair (one per kernel: at most the kernel table's rows, dense)
            # (the kernel table holds its samples as float32 first: ``codec.kernel_table``)
            cand = np.flatnonzero(same)
            same[cand] = (np.asarray(iter_ns, dtype=np.float64)[row[cand]]
                          == p_ns.take(cand).dense().astype(np.float32)).all(axis=1)
    kind = np.where(same, 0, 1)
    _mark_rests(kind, row, p_count, p_total, p_ns, k_count, k_total, iter_ns, n_keys)
    explicit = kind == 1
    ex = p_ns.take(np.flatnonzero(explicit))
    e = len(ex)
    columns = {"row": (row, {"delta": True}), "op": (op, {}), "explicit": (kind.astype(np.int64), {}),
               "count": (p_count[explicit], {}), "total_ns": (p_total[explicit], {})}
    if e * n_keys <= DENSE_CELLS:
        codes = mantissa_codes(ex.dense(), SAMPLE_BITS) if n_keys else np.zeros((e, 0), np.int64)
        med = _median_code(codes)
        columns |= {"ns_median": (med, {}), "ns": ((codes - med[:, None]).ravel(), {})}
        return pack(len(row), columns, {"layout": DENSE, "keys": n_keys, "bits": SAMPLE_BITS})
    codes = mantissa_codes(ex.value, SAMPLE_BITS)
    ran = codes > 0  # a code of 0 is an iteration the pair did not run in, as in the dense layout
    cell_row, cell_col, codes = ex.row[ran], ex.col[ran], codes[ran]
    med = _row_median(cell_row, codes, e)
    columns |= {"ns_median": (med, {}), "ns_cells": (np.bincount(cell_row, minlength=e), {}),
                "ns_col": (cell_col, {"delta": True}), "ns": (codes - med[cell_row], {})}
    return pack(len(row), columns, {"layout": SPARSE, "keys": n_keys, "bits": SAMPLE_BITS})


def _mark_rests(kind: np.ndarray, row: np.ndarray, count: np.ndarray, total: np.ndarray, ns: SparseRows,
                k_count: np.ndarray, k_total: np.ndarray, k_ns: np.ndarray | None, n_keys: int) -> None:
    """Mark (2) the largest pair of each kernel with several whose launches and total sum exactly to the
    kernel's, and whose samples sum to its samples (float32, as stored): it is read back as the remainder.
    ``row``: sorted (a kernel's pairs are adjacent)."""
    import numpy as np

    rows = row[kind == 1]  # (sorted, as ``row`` is; distinct by hand: np.unique would import numpy.ma)
    rows = rows[np.r_[True, rows[1:] != rows[:-1]]] if len(rows) else rows
    for r in rows.tolist():
        lo, hi = np.searchsorted(row, [r, r + 1]).tolist()
        at = np.arange(lo, hi)
        if len(at) < 2 or count[at].sum() != k_count[at[0]] or total[at].sum() != k_total[at[0]]:
            continue
        if n_keys:
            if k_ns is None:
                continue
            summed = ns.take(at).grouped(np.zeros(len(at), dtype=np.int64), 1).row_dense(0)
            if not np.allclose(summed, k_ns[r], rtol=1e-6, atol=1.0):
                continue
        kind[at[np.argmax(total[at])]] = 2


def _median_code(codes: np.ndarray) -> np.ndarray:
    """Each row's median code over the iterations it ran in (0 for a row that ran in none)."""
    import numpy as np

    out = np.zeros(len(codes), dtype=np.int64)
    if codes.size:
        masked = np.where(codes > 0, codes.astype(np.float64), np.nan)
        live = (codes > 0).any(axis=1)
        out[live] = np.rint(np.nanmedian(masked[live], axis=1)).astype(np.int64)
    return out


def _row_median(row: np.ndarray, codes: np.ndarray, n: int) -> np.ndarray:
    """``_median_code`` of cells: each of ``n`` rows' median code over its cells (``row`` sorted; 0: none)."""
    import numpy as np

    out = np.zeros(n, dtype=np.int64)
    if not len(codes):
        return out
    order = np.lexsort((codes, row))
    ranked = codes[order].astype(np.float64)
    size = np.bincount(row, minlength=n)
    start = np.concatenate([[0], np.cumsum(size)[:-1]])
    live = np.flatnonzero(size)
    mid_lo, mid_hi = start[live] + (size[live] - 1) // 2, start[live] + size[live] // 2
    out[live] = np.rint((ranked[mid_lo] + ranked[mid_hi]) / 2).astype(np.int64)
    return out


def decode_ops(blob: bytes | Packed, table: KernelTable) -> StoredOps:
    """The pairs of an ``ops`` blob, the implicit ones' numbers taken from their kernel's row of ``table``
    (decoded with its samples)."""
    import numpy as np

    from kbase.analysis.sparse import SparseRows

    p = blob if isinstance(blob, Packed) else Packed(blob)
    n, keys, bits = p.rows, int(p.meta["keys"]), int(p.meta["bits"])
    layout = p.meta.get("layout")
    row, op = p.array("row"), p.array("op")
    kind = p.array("explicit")
    explicit, rest, own = kind == 1, kind == 2, kind == 0
    if len(row) != n or len(op) != n or len(kind) != n or not np.isin(kind, (0, 1, 2)).all():
        raise ValueError("its pair columns disagree")
    if n and (int(row.min()) < 0 or int(row.max()) >= len(table.count)):
        raise ValueError("a pair names a kernel row the table does not have")
    if keys and table.iter_ns is not None and np.shape(table.iter_ns)[1] != keys:
        raise ValueError(f"its samples are of {keys} iterations, the kernel table's of {np.shape(table.iter_ns)[1]}")
    # a pair that is its kernel's (0) is that kernel's only one, a remainder (2) one of a kernel's several: what
    # they read from the kernel table is then at most the table once (a blob that says otherwise is no blob
    # kbase wrote, and would ask for its rows as many times as it names them)
    pairs_of = np.bincount(row, minlength=len(table.count))
    if (pairs_of[row[own]] != 1).any() or (np.bincount(row[rest], minlength=len(table.count)) > 1).any():
        raise ValueError("its pairs disagree with their kinds")
    ex_idx, own_idx, rest_idx = np.flatnonzero(explicit), np.flatnonzero(own), np.flatnonzero(rest)
    e = len(ex_idx)
    count = np.asarray(table.count, dtype=np.int64)[row]
    total = np.asarray(table.total_ns, dtype=np.float64)[row]
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # per-pair cells: (pair, column, ns)
    has_table = bool(keys) and table.iter_ns is not None
    if has_table and len(own_idx):
        own_ns = SparseRows.from_dense(np.asarray(table.iter_ns)[row[own_idx]])
        parts.append((own_idx[own_ns.row], own_ns.col, own_ns.value))
    if e:
        count[explicit] = p.array("count", e)
        total[explicit] = p.array("total_ns", e)
        if keys:
            ex = _explicit_samples(p, layout, e, keys, bits)
            parts.append((ex_idx[ex.row], ex.col, ex.value))
    if len(rest_idx):  # the kernel's less its other pairs
        # each kernel has at most one remainder (checked above): sorted, they are distinct (np.unique would import
        # numpy.ma, ~12 ms of every stored diff and gate)
        kernels = np.sort(row[rest_idx])
        at = np.full(len(table.count), -1, dtype=np.int64)
        at[kernels] = np.arange(len(kernels))
        others = np.flatnonzero(~rest & (at[row] >= 0))
        less_count = np.zeros(len(kernels), dtype=np.int64)
        np.add.at(less_count, at[row[others]], count[others])
        less_total = np.zeros(len(kernels))
        np.add.at(less_total, at[row[others]], total[others])
        mine = at[row[rest_idx]]
        count[rest_idx] -= less_count[mine]
        total[rest_idx] -= less_total[mine]
        if has_table:
            so_far = _cells(parts, n, keys)
            less = so_far.take(others).grouped(at[row[others]], len(kernels)).dense()
            left = SparseRows.from_dense(np.maximum(np.asarray(table.iter_ns)[row[rest_idx]] - less[mine], 0.0))
            parts.append((rest_idx[left.row], left.col, left.value))
    return StoredOps(row=row, op_id=op, count=count, total_ns=total, iter_ns=_cells(parts, n, keys))


def _cells(parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], n: int, keys: int) -> SparseRows:
    """The (n, keys) matrix of the (pair, column, ns) cells of ``parts``."""
    import numpy as np

    from kbase.analysis.sparse import SparseRows

    if not parts:
        return SparseRows.empty(n, keys)
    row, col, value = (np.concatenate(c) for c in zip(*parts))
    return SparseRows.from_cells(row, col, value, (n, keys))


def _explicit_samples(p: Packed, layout: object, e: int, keys: int, bits: int) -> SparseRows:
    """The explicit pairs' samples of either layout, as (e, keys) sparse rows."""
    import numpy as np

    from kbase.analysis.sparse import SparseRows

    med = p.array("ns_median", e)
    if layout == DENSE:
        codes = med[:, None] + p.array("ns", e * keys).reshape(e, keys)
        return SparseRows.from_dense(mantissa_values(codes, bits))
    cells = p.array("ns_cells", e)
    if len(cells) != e or (cells < 0).any():
        raise ValueError("its sample cell counts disagree")
    m = int(cells.sum())
    cell_row = np.repeat(np.arange(e, dtype=np.int64), cells)
    col = p.array("ns_col", m)
    if len(col) != m or (m and (int(col.min()) < 0 or int(col.max()) >= keys)):
        raise ValueError("a sample lies outside the iterations")
    values = mantissa_values(med[cell_row] + p.array("ns", m), bits)
    return SparseRows.from_cells(cell_row, col, values, (e, keys))


def op_totals(blob: bytes | Packed, kernel_total: list[int]) -> list[tuple[int, int]]:
    """(op position, total ns) of each pair of an ``ops`` blob, without numpy (history noise reads one per baseline):
    an implicit pair's total is its kernel's (``kernel_total``, the levels' ``total_ns`` by row)."""
    p = blob if isinstance(blob, Packed) else Packed(blob)
    rows, ops, kind = p.ints("row"), p.ints("op"), p.ints("explicit")
    stored = iter(p.ints("total_ns", sum(1 for k in kind if k == 1)))
    totals = [next(stored) if k == 1 else kernel_total[r] if k == 0 else 0 for r, k in zip(rows, kind)]
    others: dict[int, int] = {}
    for r, k, t in zip(rows, kind, totals):
        if k != 2:
            others[r] = others.get(r, 0) + t
    totals = [kernel_total[r] - others.get(r, 0) if k == 2 else t for r, k, t in zip(rows, kind, totals)]
    return list(zip(ops, totals))


# ------------------------------------------------------------------------------------------ the reads


def stored_ops(baseline_id: int, fmt: int, blob: object, op_ids: object, table: KernelTable) -> StoredOps:
    """An ``op_blobs`` row (baseline id, format, op ids, ops) decoded against the baseline's kernel table, each
    pair's op as its ``op_name`` id: a format this kbase reads, an intact blob, or one line naming the baseline
    (``StoreError``)."""
    import numpy as np

    from kbase.store.codec.checked import packed

    p = packed(baseline_id, fmt, blob)
    _check_layout(baseline_id, p)
    try:
        stored = decode_ops(p, table)
        stored.op_id = np.asarray(_op_ids(op_ids, stored.op_id.tolist()), dtype=np.int64)
        return stored
    except (KeyError, ValueError, IndexError) as exc:
        raise _unreadable(baseline_id, exc) from None


def _op_ids(blob: object, positions: list[int]) -> list[int]:
    """Each op position's ``op_name`` id (0 stays 0) by the baseline's ``op_ids`` list."""
    from kbase.store.codec.id_lists import ids_of

    ids = ids_of(bytes(blob) if isinstance(blob, bytes | bytearray | memoryview) else None)
    if any(not 0 <= i <= len(ids) for i in positions):
        raise ValueError("an op position past its op list")
    return [ids[i - 1] if i else 0 for i in positions]


def op_level_rows(rows: list[tuple]) -> list[tuple[int, int, int]]:
    """(baseline_id, op id, total ns) of each pair with an op, from ``op_level_blobs`` rows (baseline_id, format,
    levels, op ids, ops), without numpy."""
    from kbase.store.codec.checked import packed

    out = []
    for bid, fmt, levels, op_ids, blob in rows:
        totals = packed(bid, fmt, levels).ints("total_ns")
        p = packed(bid, fmt, blob)
        _check_layout(bid, p)
        try:
            pairs = op_totals(p, totals)
            ids = _op_ids(op_ids, [op for op, _ in pairs])
            out += [(bid, op, total) for op, (_, total) in zip(ids, pairs) if op]
        except (KeyError, ValueError, IndexError) as exc:
            raise _unreadable(bid, exc) from None
    return out


def _check_layout(baseline_id: object, p: Packed) -> None:
    from kbase.errors import StoreError

    layout = p.meta.get("layout")
    if layout not in LAYOUTS:
        raise StoreError(f"store: baseline @{baseline_id} holds op data of layout {layout}, which this kbase does "
                         f"not read (it reads layouts {', '.join(map(str, LAYOUTS))}); upgrade kbase")


def _unreadable(baseline_id: object, exc: Exception) -> Exception:
    from kbase.errors import StoreError

    return StoreError(f"store: baseline @{baseline_id}: op data unreadable ({exc})")

"""Each baseline's kernel time by op (``analysis.ops.OpPairs``) as the store keeps it: one packed-columns blob
(``packed``), ``baseline_kernels.ops``, beside the kernel table's four (docs/store-format.md).

A kernel may serve several ops (elementwise kernels do), so the split is by (kernel, op) pair. Most kernels
serve one op, and then the pair's launches, time and per-iteration samples *are* the kernel's: such a pair is
stored as its kernel's row and its op alone (a few bits), and reads its numbers back from the kernel table.
The others (``explicit``) carry their own launches, total ns and per-iteration ns, the samples as mantissa
codes of ``SAMPLE_BITS`` like the kernel table's (``kernel_blobs``).

Columns, one row per pair in (kernel row, op) order:

- ``row``: the kernel's row in the kernel table (rank order), delta-coded;
- ``op``: the op's ``op_name.id`` (0: launched by no op);
- ``explicit``: 0 when the pair's numbers are its kernel's (its only pair), 1 when they are stored below, 2
  when they are its kernel's less its other pairs' (the largest pair of a kernel whose pairs sum to it: one
  pair a kernel fewer to store);
- ``count``, ``total_ns``: of the explicit pairs, in order;
- ``ns_median``, ``ns``: their per-iteration ns as mantissa codes, each against the pair's median code of the
  iterations it ran in (an iteration it did not run in: the code 0, stored as minus that median).

Meta: ``layout`` (``LAYOUT``: which columns mean what; a reader refuses another in one line), ``keys``
(iteration keys of the samples, ``baseline.iteration_keys``' order), ``bits``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbase.store.mantissa import SAMPLE_BITS, mantissa_codes, mantissa_values
from kbase.store.packed import Packed, pack

LAYOUT = 1  # the ``ops`` blob's columns as this module writes them

if TYPE_CHECKING:
    import numpy as np

    from kbase.analysis.ops import OpPairs
    from kbase.store.kernel_blobs import KernelTable


@dataclass
class StoredOps:
    """A baseline's (kernel, op) pairs as stored: the kernel's row in the kernel table, the op's ``op_name`` id
    (0: no op), launches, total ns and (pairs, keys) ns per iteration key."""

    row: np.ndarray
    op_id: np.ndarray
    count: np.ndarray
    total_ns: np.ndarray
    iter_ns: np.ndarray


def encode_ops(pairs: OpPairs, rows: np.ndarray, op_ids: np.ndarray, count: np.ndarray, total_ns: np.ndarray,
               iter_ns: np.ndarray | None) -> bytes:
    """The ``ops`` blob of ``pairs``: ``rows``, ``op_ids`` per pair (the kernel's row, the op's id, 0 for none);
    ``count``, ``total_ns``, ``iter_ns``: the kernel table's columns (by row), which a kernel's only pair
    shares."""
    import numpy as np

    order = np.lexsort((op_ids, rows))
    row, op = np.asarray(rows, dtype=np.int64)[order], np.asarray(op_ids, dtype=np.int64)[order]
    p_count = np.asarray(pairs.count, dtype=np.int64)[order]
    p_total = np.rint(np.asarray(pairs.total_ns, dtype=np.float64)[order]).astype(np.int64)
    p_ns = np.asarray(pairs.iter_ns, dtype=np.float64)[order]
    n_keys = p_ns.shape[1] if p_ns.ndim == 2 else 0
    pairs_of = np.bincount(row, minlength=int(row.max()) + 1 if len(row) else 0)
    k_count = np.asarray(count, dtype=np.int64)[row]
    k_total = np.rint(np.asarray(total_ns, dtype=np.float64)[row]).astype(np.int64)
    same = (pairs_of[row] == 1) & (p_count == k_count) & (p_total == k_total)
    if n_keys:
        if iter_ns is None or iter_ns.shape[1] != n_keys:
            same[:] = False
        else:
            # (the kernel table holds its samples as float32 first: ``codec.kernel_table``)
            same &= (np.asarray(iter_ns, dtype=np.float64)[row] == p_ns.astype(np.float32)).all(axis=1)
    kind = np.where(same, 0, 1)
    _mark_rests(kind, row, p_count, p_total, p_ns, k_count, k_total, iter_ns, n_keys)
    explicit = kind == 1
    codes = mantissa_codes(p_ns[explicit], SAMPLE_BITS) if n_keys else np.zeros((int(explicit.sum()), 0), np.int64)
    med = _median_code(codes)
    columns = {"row": (row, {"delta": True}), "op": (op, {}), "explicit": (kind.astype(np.int64), {}),
               "count": (p_count[explicit], {}), "total_ns": (p_total[explicit], {}),
               "ns_median": (med, {}), "ns": ((codes - med[:, None]).ravel(), {})}
    return pack(len(row), columns, {"layout": LAYOUT, "keys": n_keys, "bits": SAMPLE_BITS})


def _mark_rests(kind: np.ndarray, row: np.ndarray, count: np.ndarray, total: np.ndarray, ns: np.ndarray,
                k_count: np.ndarray, k_total: np.ndarray, k_ns: np.ndarray | None, n_keys: int) -> None:
    """Mark (2) the largest pair of each kernel with several whose launches and total sum exactly to the
    kernel's, and whose samples sum to its samples (float32, as stored): it is read back as the remainder."""
    import numpy as np

    rows = np.sort(row[kind == 1])
    rows = rows[np.r_[True, rows[1:] != rows[:-1]]] if len(rows) else rows  # (np.unique would import numpy.ma)
    by_row = np.argsort(row, kind="stable")  # each kernel's pairs as a slice (not a scan of every pair per kernel)
    starts = np.searchsorted(row[by_row], rows, side="left").tolist()
    ends = np.searchsorted(row[by_row], rows, side="right").tolist()
    for r, lo, hi in zip(rows.tolist(), starts, ends):
        at = by_row[lo:hi]
        if len(at) < 2 or count[at].sum() != k_count[at[0]] or total[at].sum() != k_total[at[0]]:
            continue
        if n_keys and (k_ns is None or not np.allclose(ns[at].sum(axis=0), k_ns[r], rtol=1e-6, atol=1.0)):
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


def decode_ops(blob: bytes | Packed, table: KernelTable) -> StoredOps:
    """The pairs of an ``ops`` blob, the implicit ones' numbers taken from their kernel's row of ``table``
    (decoded with its samples)."""
    import numpy as np

    p = blob if isinstance(blob, Packed) else Packed(blob)
    n, keys, bits = p.rows, int(p.meta["keys"]), int(p.meta["bits"])
    row, op = p.array("row"), p.array("op")
    kind = p.array("explicit")
    explicit, rest = kind == 1, kind == 2
    e = int(explicit.sum())
    count = np.asarray(table.count, dtype=np.int64)[row]
    total = np.asarray(table.total_ns, dtype=np.float64)[row]
    ns = np.zeros((n, keys))
    own = kind == 0
    if keys and table.iter_ns is not None and own.any():
        ns[own] = table.iter_ns[row[own]]
    if e:
        count[explicit] = p.array("count", e)
        total[explicit] = p.array("total_ns", e)
        if keys:
            codes = p.array("ns_median", e)[:, None] + p.array("ns", e * keys).reshape(e, keys)
            ns[explicit] = mantissa_values(codes, bits)
    if rest.any():  # the kernel's less its other pairs (summed per kernel row in one pass)
        others, nk = ~rest, len(table.count)
        other_count = np.zeros(nk, dtype=np.int64)
        np.add.at(other_count, row[others], count[others])
        other_total = np.bincount(row[others], weights=total[others], minlength=nk)
        at = row[rest]
        count[rest] -= other_count[at]
        total[rest] -= other_total[at]
        if keys and table.iter_ns is not None:
            other_ns = np.zeros((nk, keys))
            np.add.at(other_ns, row[others], ns[others])
            ns[rest] = np.maximum(table.iter_ns[at] - other_ns[at], 0.0)
    return StoredOps(row=row, op_id=op, count=count, total_ns=total, iter_ns=ns)


def op_totals(blob: bytes | Packed, kernel_total: list[int]) -> list[tuple[int, int]]:
    """(op id, total ns) of each pair of an ``ops`` blob, without numpy (history noise reads one per baseline):
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


def stored_ops(baseline_id: int, fmt: int, blob: object, table: KernelTable) -> StoredOps:
    """An ``op_blobs`` row (baseline id, format, ops) decoded against the baseline's kernel table: a format this
    kbase reads, an intact blob, or one line naming the baseline (``StoreError``)."""
    from kbase.store.blob_reads import packed

    p = packed(baseline_id, fmt, blob)
    _check_layout(baseline_id, p)
    try:
        return decode_ops(p, table)
    except (KeyError, ValueError, IndexError) as exc:
        raise _unreadable(baseline_id, exc) from None


def op_level_rows(rows: list[tuple]) -> list[tuple[int, int, int]]:
    """(baseline_id, op id, total ns) of each pair with an op, from ``op_level_blobs`` rows (baseline_id, format,
    levels, ops), without numpy."""
    from kbase.store.blob_reads import packed

    out = []
    for bid, fmt, levels, blob in rows:
        totals = packed(bid, fmt, levels).ints("total_ns")
        p = packed(bid, fmt, blob)
        _check_layout(bid, p)
        try:
            out += [(bid, op, total) for op, total in op_totals(p, totals) if op]
        except (KeyError, ValueError, IndexError) as exc:
            raise _unreadable(bid, exc) from None
    return out


def _check_layout(baseline_id: object, p: Packed) -> None:
    from kbase.errors import StoreError

    layout = p.meta.get("layout")
    if layout != LAYOUT:
        raise StoreError(f"store: baseline @{baseline_id} holds op data of layout {layout}, which this kbase does "
                         f"not read (it reads layout {LAYOUT}); upgrade kbase")


def _unreadable(baseline_id: object, exc: Exception) -> Exception:
    from kbase.errors import StoreError

    return StoreError(f"store: baseline @{baseline_id}: op data unreadable ({exc})")

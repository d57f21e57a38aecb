"""The store's kernel tables (``baseline_kernels``' blobs, ``kernel_blobs``) shaped into what each read of
``reader.StoreReader`` returns. The rows come from either executor (SQLAlchemy or sqlite3) alike; the
history and leaderboard shapes decode without numpy (``kbase history`` and ``show`` load none), the bulk
ones (kernel tables for a diff, the level matrix of ``steps``, the report's series) with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbase.errors import StoreError
from kbase.store.kernel_blobs import FORMAT, Blobs, LevelRows
from kbase.store.packed import Packed, PackedError

if TYPE_CHECKING:
    import numpy as np

    from kbase.store.kernel_blobs import KernelTable


def _blob(value: Any) -> Any:
    """A stored blob as bytes (PostgreSQL's driver gives a memoryview), None as None."""
    return value if isinstance(value, bytes) or value is None else bytes(value)


def packed(baseline_id: Any, fmt: int, blob: Any) -> Packed:
    """One blob of a stored kernel table, checked: a format this kbase reads and an intact header."""
    if fmt != FORMAT:
        raise StoreError(f"store: baseline @{baseline_id} holds kernel data of format {fmt}, which this kbase "
                         f"does not read (it reads format {FORMAT}); upgrade kbase")
    try:
        return Packed(_blob(blob))
    except PackedError as exc:
        raise StoreError(f"store: baseline @{baseline_id}: kernel data unreadable ({exc})") from None


def _decode_error(baseline_id: Any, exc: Exception) -> StoreError:
    return StoreError(f"store: baseline @{baseline_id}: kernel data unreadable ({exc})")


def kernel_tables(rows: list[tuple], *, samples: bool = True, sketches: bool = True) -> dict[int, KernelTable]:
    """baseline id -> its kernel table, from ``kernel_blobs`` rows (numpy)."""
    from kbase.store.kernel_blobs import decode

    out = {}
    for baseline_id, fmt, levels, board, sample_blob, sketch_blob in rows:
        packed(baseline_id, fmt, levels)
        try:
            out[baseline_id] = decode(Blobs(_blob(levels), _blob(board), _blob(sample_blob), _blob(sketch_blob)),
                                      samples=samples, sketches=sketches)
        except (PackedError, KeyError, ValueError) as exc:
            raise _decode_error(baseline_id, exc) from None
    return out


def _none(v: float) -> float | None:
    return None if v != v else v


def history_rows(rows: list[tuple], name_id: int | None, when) -> list[dict[str, Any]]:
    """One kernel's rows (id, commit, created_at, workload, branch, count, total_ns, avg_ns, per_iter_ns,
    share_window; NULL as None) from ``kernel_history`` rows (baseline columns, format, levels), oldest
    first; baselines without the kernel left out. ``when``: the executor's datetime reader."""
    out: list[dict[str, Any]] = []
    if name_id is None:
        return out
    for bid, commit, created_at, workload, branch, fmt, levels in rows:
        p = packed(bid, fmt, levels)
        i = p.index("name_id", name_id)
        if i is None:
            continue
        count, total, avg, per_iter, share = LevelRows(p).history_row(i)
        out.append({"id": bid, "commit": commit, "created_at": when(created_at), "workload": workload,
                    "branch": branch, "count": count, "total_ns": total, "avg_ns": _none(avg),
                    "per_iter_ns": _none(per_iter), "share_window": _none(share)})
    return out


def board(baseline_id: Any, fmt: int, levels: Any, board_blob: Any) -> LevelRows:
    """One baseline's leaderboard columns (``LevelRows`` over its levels and board; no numpy)."""
    return LevelRows(packed(baseline_id, fmt, levels), packed(baseline_id, fmt, board_blob))


def level_pairs(rows: list[tuple]) -> list[tuple[int, float | None]]:
    """(name_id, per_iter_ns) of every kernel of ``level_blobs`` rows."""
    out: list[tuple[int, float | None]] = []
    for bid, fmt, levels in rows:
        lv = LevelRows(packed(bid, fmt, levels))
        out += [(n, _none(v)) for n, v in zip(lv.column("name_id"), lv.column("per_iter_ns"))]
    return out


def level_matrix(rows: list[tuple], baseline_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(name ids, name ids x baselines matrix of time per iteration per GPU) from ``level_blobs`` rows: NaN where
    a kernel did not run, 0 where its level is NULL (a baseline without iteration markers). One numpy
    decode per baseline, then one scatter per baseline into a matrix that grows with new names."""
    import numpy as np

    from kbase.store.kernel_blobs import level_arrays

    col = {b: j for j, b in enumerate(baseline_ids)}
    row_of = np.full(0, -1, dtype=np.int64)  # name id -> matrix row
    ids: list[int] = []
    out = np.full((0, len(baseline_ids)), np.nan)
    for bid, fmt, levels in rows:
        j = col.get(bid)
        if j is None:
            continue
        p = packed(bid, fmt, levels)
        try:
            name_id, per_iter = level_arrays(p)
        except (PackedError, KeyError, ValueError) as exc:
            raise _decode_error(bid, exc) from None
        if not len(name_id):
            continue
        top = int(name_id.max())
        if top >= len(row_of):
            row_of = np.concatenate([row_of, np.full(top + 1 - len(row_of), -1, dtype=np.int64)])
        new = np.unique(name_id[row_of[name_id] < 0])
        if len(new):
            row_of[new] = np.arange(len(ids), len(ids) + len(new))
            ids += new.tolist()
            if len(ids) > len(out):
                grown = np.full((max(len(ids), 2 * len(out)), len(baseline_ids)), np.nan)
                grown[: len(out)] = out
                out = grown
        out[row_of[name_id], j] = np.nan_to_num(per_iter, nan=0.0)
    return np.asarray(ids, dtype=np.int64), out[: len(ids)]


def series_rows(rows: list[tuple], name_ids: list[int]) -> tuple[dict[str, np.ndarray], list[np.ndarray | None]]:
    """The kernels ``name_ids`` in ``kernel_series`` rows, as columns (``baseline_id``, ``name_id``, ``count``,
    ``total_ns``, ``gpu_count``: one entry per kernel and baseline) and each entry's ns per iteration key
    summed over GPUs (float64; None without samples). Numpy per baseline: the report reads thousands."""
    import numpy as np

    from kbase.store.sample_blobs import decode_samples

    wanted = np.asarray(sorted(set(name_ids)), dtype=np.int64)
    cols: dict[str, list] = {"baseline_id": [], "name_id": [], "count": [], "total_ns": [], "gpu_count": []}
    samples: list[np.ndarray | None] = []
    for bid, gpu_count, fmt, levels, sample_blob in rows:
        p = packed(bid, fmt, levels)
        try:
            ids = p.array("name_id")
            at = np.flatnonzero(np.isin(ids, wanted))
            if not len(at):
                continue
            ns = None
            if sample_blob is not None:
                packed(bid, fmt, sample_blob)  # the format check
                ns = decode_samples(_blob(sample_blob), at.tolist())[0]  # those kernels' rows alone
            for key, values in (("name_id", ids[at]), ("count", p.array("count")[at]),
                                ("total_ns", p.array("total_ns")[at])):
                cols[key].append(values)
        except (PackedError, KeyError, ValueError) as exc:
            raise _decode_error(bid, exc) from None
        cols["baseline_id"].append(np.full(len(at), bid, dtype=np.int64))
        cols["gpu_count"].append(np.full(len(at), gpu_count, dtype=np.int64))
        samples += [None] * len(at) if ns is None else list(ns)
    return {k: np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for k, v in cols.items()}, samples

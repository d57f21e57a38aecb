"""The store's kernel tables (``baseline_kernels``' blobs, ``kernel_blobs``) shaped into what each read of
``reader.StoreReader`` returns (its rows come from sqlite3 or psycopg2 alike). The history and leaderboard
shapes decode without numpy (``kbase history`` and ``show`` load none), the bulk ones (kernel tables for a
diff, the level matrix of ``steps``, the report's series) with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbase.errors import StoreError
from kbase.store.codec.checked import as_bytes as _blob
from kbase.store.codec.checked import packed
from kbase.store.codec.id_lists import ids_of, position_of
from kbase.store.codec.packed import Packed, PackedError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    import numpy as np

    from kbase.analysis.board import LeaderboardRows
    from kbase.store.codec.codec import Names
    from kbase.store.codec.kernel_blobs import KernelTable, LevelRows
    from kbase.store.schema.records import BaselineRecord


def _decode_error(baseline_id: Any, exc: Exception) -> StoreError:
    return StoreError(f"store: baseline @{baseline_id}: kernel data unreadable ({exc})")


def kernel_tables(rows: list[tuple], *, samples: bool = True, sketches: bool = True) -> dict[int, KernelTable]:
    """baseline id -> its kernel table, from ``kernel_blobs`` rows (numpy)."""
    from kbase.store.codec.kernel_blobs import Blobs, decode

    out = {}
    for baseline_id, fmt, kernel_ids, levels, board, sample_blob, sketch_blob in rows:
        packed(baseline_id, fmt, levels)
        try:
            out[baseline_id] = decode(Blobs(_blob(levels), _blob(board), _blob(sample_blob), _blob(sketch_blob)),
                                      ids_of(_blob(kernel_ids)), samples=samples, sketches=sketches)
        except (PackedError, KeyError, ValueError) as exc:
            raise _decode_error(baseline_id, exc) from None
    return out


def _none(v: float) -> float | None:
    return None if v != v else v


HISTORY_BATCH = 256  # rows of ``kernel_history`` fetched at a time by ``batched``


def batched(cursor: Any, size: int = HISTORY_BATCH) -> Iterator[tuple]:
    """An executed cursor's rows, fetched ``size`` at a time: each batch's blobs are freed before the next is
    read, and their memory taken again (a 10,000-baseline history holds 27 MB of blobs: fetched at once, the
    fresh pages' faults cost ~7,000 more page faults, ~10 ms)."""
    while True:
        batch = cursor.fetchmany(size)
        if not batch:
            return
        yield from batch


def history_rows(rows: Iterable[tuple], name_id: int | None, when: Callable[[Any], Any]) -> list[dict[str, Any]]:
    """One kernel's rows (id, commit, created_at, workload, branch, commit_date (as stored), count, total_ns,
    avg_ns, per_iter_ns, share_window, and the setup: fingerprint, aligned, gpu_models, gpu_count, window_spec;
    NULL as None) from ``kernel_history`` rows (baseline columns, format, levels), oldest first; baselines
    without the kernel left out. ``when``: the executor's datetime reader.

    Thousands of blobs: each is read for one row, two values from its stored bytes and the header's divisors
    (``history_levels.LevelsReader``, no per-blob object; a blob of another layout, or damaged:
    ``kernel_blobs.history_row`` over its ``Packed`` header, which reads or refuses it)."""
    from kbase.store.codec.history_levels import LevelsReader
    from kbase.store.codec.kernel_format import FORMAT

    out: list[dict[str, Any]] = []
    if name_id is None:
        return out
    append = out.append
    fast = LevelsReader().read  # the blobs every writer produces; None: the general decoder reads or refuses it
    for bid, commit, created_at, workload, branch, commit_date, fingerprint, aligned, models, gpus, spec, fmt, \
            kernel_ids, levels in rows:
        i = position_of(kernel_ids if type(kernel_ids) is bytes else _blob(kernel_ids), name_id)
        if i is None:
            continue
        try:
            # (PostgreSQL's driver may give a memoryview: the reader takes bytes)
            found = fast(levels if type(levels) is bytes else _blob(levels), i) if fmt == FORMAT else None
            # (``checked.packed`` refuses another format, as here; its unreadable-blob error is ``_decode_error``'s)
            if found is None:
                from kbase.store.codec.kernel_blobs import history_row  # (its imports: only when needed)

                found = history_row(Packed(levels) if fmt == FORMAT else packed(bid, fmt, levels), i)
            count, total, avg, per_iter, share = found
        except (PackedError, IndexError) as exc:
            raise _decode_error(bid, exc) from None
        append({"id": bid, "commit": commit, "created_at": when(created_at), "workload": workload,
                "branch": branch, "commit_date": None if commit_date is None else when(commit_date),
                "count": count, "total_ns": total, "avg_ns": avg if avg == avg else None,  # (NaN as None)
                "per_iter_ns": per_iter if per_iter == per_iter else None,
                "share_window": share if share == share else None, "fingerprint": fingerprint,
                "aligned": bool(aligned), "gpu_models": models, "gpu_count": gpus, "window_spec": spec})
    return out


def board(baseline_id: Any, fmt: int, levels: Any, board_blob: Any) -> LevelRows:
    """One baseline's leaderboard columns (``LevelRows`` over its levels and board; no numpy)."""
    from kbase.store.codec.kernel_blobs import LevelRows

    return LevelRows(packed(baseline_id, fmt, levels), packed(baseline_id, fmt, board_blob))


def level_pairs(rows: list[tuple]) -> list[tuple[int, float | None]]:
    """(name_id, per_iter_ns) of every kernel of ``level_blobs`` rows."""
    from kbase.store.codec.kernel_blobs import LevelRows

    out: list[tuple[int, float | None]] = []
    for bid, fmt, kernel_ids, levels in rows:
        lv = LevelRows(packed(bid, fmt, levels))
        out += [(n, _none(v)) for n, v in zip(ids_of(_blob(kernel_ids)), lv.column("per_iter_ns"))]
    return out


LEVEL_BATCH = 256  # blobs decoded together by ``level_matrix``: few numpy calls, a few MiB at a time


def level_matrix(rows: list[tuple], baseline_ids: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(name ids, name ids x baselines matrix of time per iteration per GPU) from ``level_blobs`` rows: NaN where
    a kernel did not run, 0 where its level is NULL (a baseline without iteration markers).

    ``kbase steps`` reads 50,000 of these: each blob is parsed and decompressed in turn, and the numbers of
    ``LEVEL_BATCH`` blobs that store their columns alike (the same widths and number of kernels: almost
    always) are decoded by numpy at once, instead of a dozen small numpy calls per blob (~3 s at 50,000)."""
    import numpy as np

    from kbase.store.codec.kernel_blobs import per_iter_array

    col = {b: j for j, b in enumerate(baseline_ids)}
    matrix = _LevelMatrix(len(baseline_ids))
    pending: dict[tuple[int, int, int], list[tuple[int, float, bytes, bytes]]] = {}
    for bid, fmt, kernel_ids, levels in rows:
        j = col.get(bid)
        if j is None:
            continue
        p = packed(bid, fmt, levels)
        try:
            if not p.rows:
                continue
            ids_blob = _blob(kernel_ids)
            if len(ids_blob) != 1 + ids_blob[0] * p.rows:
                raise ValueError(f"{(len(ids_blob) - 1) // max(ids_blob[0], 1)} kernel ids for {p.rows} rows")
            if "per_iter_ns" in p:  # a level that is not total / d_iter: this blob on its own
                ids = np.asarray(ids_of(ids_blob), dtype=np.int64)
                matrix.put(np.array([j]), ids[None, :], per_iter_array(p)[None, :])
                continue
            kn, names = ids_blob[0], ids_blob[1:]
            kt, _, totals = p._planes("total_ns")
        except (PackedError, KeyError, ValueError) as exc:
            raise _decode_error(bid, exc) from None
        d = p.meta.get("d_iter")
        batch = pending.setdefault((kn, kt, p.rows), [])
        batch.append((j, np.nan if d is None else d, names, totals))
        if len(batch) >= LEVEL_BATCH:
            matrix.put_batch(*pending.pop((kn, kt, p.rows)), key=(kn, kt, p.rows))
    for key, batch in pending.items():
        matrix.put_batch(*batch, key=key)
    return matrix.result()


class _LevelMatrix:
    """The names x baselines matrix of ``level_matrix``, growing a row per new name id."""

    def __init__(self, n_baselines: int) -> None:
        import numpy as np

        self.row_of = np.full(0, -1, dtype=np.int64)  # name id -> row
        self.ids: list[int] = []
        self.out = np.full((0, n_baselines), np.nan)

    def put_batch(self, *found: tuple[int, float, bytes, bytes], key: tuple[int, int, int]) -> None:
        import numpy as np

        kn, kt, k = key
        divisors = np.array([f[1] for f in found])
        ids = np.frombuffer(b"".join(f[2] for f in found), dtype=f"<u{kn}").reshape(len(found), k).astype(np.int64)
        self.put(np.array([f[0] for f in found]), ids, _batch(kt, k, [f[3] for f in found]) / divisors[:, None])

    def put(self, cols: np.ndarray, ids: np.ndarray, per_iter: np.ndarray) -> None:
        """Levels ``per_iter`` (m, k) of names ``ids`` (m, k) in matrix columns ``cols`` (m,)."""
        import numpy as np

        top = int(ids.max()) if ids.size else -1
        if top >= len(self.row_of):
            self.row_of = np.concatenate([self.row_of, np.full(top + 1 - len(self.row_of), -1, dtype=np.int64)])
        rows = self.row_of[ids]
        if (rows < 0).any():  # names not seen before (rare after the first baselines)
            new = np.unique(ids[rows < 0])
            self.row_of[new] = np.arange(len(self.ids), len(self.ids) + len(new))
            self.ids += new.tolist()
            if len(self.ids) > len(self.out):
                grown = np.full((max(len(self.ids), 2 * len(self.out)), self.out.shape[1]), np.nan)
                grown[: len(self.out)] = self.out
                self.out = grown
            rows = self.row_of[ids]
        self.out[rows, cols[:, None]] = np.where(np.isnan(per_iter), 0.0, per_iter)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        return np.asarray(self.ids, dtype=np.int64), self.out[: len(self.ids)]


def _batch(kind: int, k: int, planes: list[bytes]) -> np.ndarray:
    """(blobs, k) values of one integer column of ``k`` rows stored alike in every blob (``Packed`` kinds)."""
    import numpy as np

    from kbase.store.codec.packed import DELTA, FLOAT, WIDTH_MASK, ZIGZAG

    width = kind & WIDTH_MASK
    if not width:
        return np.zeros((len(planes), k), dtype=np.int64)
    if kind & (DELTA | FLOAT):
        raise PackedError("a levels column stored with a delta or as float")
    b = np.frombuffer(b"".join(planes), dtype=np.uint8).reshape(len(planes), width, k)
    u = np.ascontiguousarray(b.transpose(0, 2, 1)).view(f"<u{width}")[..., 0].astype(np.uint64)
    if kind & ZIGZAG:
        return (u >> np.uint64(1)).view(np.int64) ^ -(u & np.uint64(1)).view(np.int64)
    return u.view(np.int64)


def series_rows(rows: list[tuple], name_ids: list[int]) -> tuple[dict[str, np.ndarray], list[np.ndarray | None]]:
    """The kernels ``name_ids`` in ``kernel_series`` rows, as columns (``baseline_id``, ``name_id``, ``count``,
    ``total_ns``, ``gpu_count``: one entry per kernel and baseline) and each entry's ns per iteration key
    summed over GPUs (float64; None without samples). Numpy per baseline: the report reads thousands."""
    import numpy as np

    from kbase.store.codec.sample_blobs import decode_samples

    wanted = np.asarray(sorted(set(name_ids)), dtype=np.int64)
    cols: dict[str, list] = {"baseline_id": [], "name_id": [], "count": [], "total_ns": [], "gpu_count": []}
    samples: list[np.ndarray | None] = []
    for bid, gpu_count, fmt, kernel_ids, levels, sample_blob in rows:
        p = packed(bid, fmt, levels)
        try:
            ids = np.asarray(ids_of(_blob(kernel_ids)), dtype=np.int64)
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


def run_levels(rows: list[tuple], baseline_ids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(name ids, sorted; names x baselines matrix of each kernel's total ns in the capture; the same of its
    launches) from ``level_blobs`` rows, NaN where a kernel did not run: a baseline's levels as one run of its
    program (history noise per run, ``comparison.history``). Summed over GPUs, as stored."""
    import numpy as np

    col = {b: j for j, b in enumerate(baseline_ids)}
    parts = []
    for bid, fmt, kernel_ids, levels in rows:
        j = col.get(bid)
        if j is None:
            continue
        p = packed(bid, fmt, levels)
        try:
            if p.rows:
                parts.append((j, np.asarray(ids_of(_blob(kernel_ids)), dtype=np.int64), p.array("total_ns", p.rows),
                              p.array("count", p.rows)))
        except (PackedError, KeyError, ValueError) as exc:
            raise _decode_error(bid, exc) from None
    ids = np.unique(np.concatenate([x[1] for x in parts])) if parts else np.zeros(0, dtype=np.int64)
    totals, counts = np.full((len(ids), len(baseline_ids)), np.nan), np.full((len(ids), len(baseline_ids)), np.nan)
    for j, names, total, count in parts:
        at = np.searchsorted(ids, names)
        totals[at, j], counts[at, j] = total, count
    return ids, totals, counts


def stored_samples(baseline_id: Any, fmt: int, blob: Any, names: list[str],
                   keys: list[int]) -> dict[str, dict[int, float]]:
    """{name: {iteration: ns}} of the iterations with launches, from a ``samples`` blob (rows named ``names``)."""
    from kbase.store.codec.kernel_blobs import sample_rows

    out: dict[str, dict[int, float]] = {}
    packed(baseline_id, fmt, blob)
    ns_m, cnt_m = sample_rows(bytes(blob))
    for name, ns, cnt in zip(names, ns_m, cnt_m):
        per = {keys[j]: ns[j] for j in range(min(len(keys), len(ns))) if cnt[j] > 0}
        if per:
            out.setdefault(name, {}).update(per)
    return out


def leaderboard_rows(b: BaselineRecord, found: tuple | None, names_of: Callable[[Iterable[int]], Names]
                     ) -> LeaderboardRows:
    """Baseline ``b``'s leaderboard as rows (``StoreReader.leaderboard``) from its ``board_blobs`` row (format,
    levels, board, samples, kernel_ids; None: no kernel table) and ``names_of`` (name id -> its texts)."""
    import json

    from kbase.analysis.board import LeaderboardRows, bounds_from_samples
    from kbase.analysis.columns import row_fields
    from kbase.analysis.summary import LeaderboardSummary
    from kbase.store.schema.records import Unreadable

    columns = row_fields()  # (read now: a column declared since import is listed too)

    rows: list[dict[str, Any]] = []
    lb = board(b.id, *found[:3]) if found else None
    if lb is not None and lb.rows:
        assert found is not None
        kernel_ids = ids_of(_blob(found[4]))
        if len(kernel_ids) != lb.rows:
            raise StoreError(f"store: baseline @{b.id}: kernel data unreadable ({len(kernel_ids)} kernel ids for "
                             f"{lb.rows} rows)")
        names = names_of(kernel_ids)
        cols = {c: lb.column(c) for c in columns if c not in ("name", "short_name", "family", "category", "tc")}
        inf = float("inf")
        cols["amdahl_ceiling"] = [inf if v != v else v for v in cols["amdahl_ceiling"]]
        for i, n in enumerate(kernel_ids):
            name, short, category, tc, family = names[n]
            values = {"name": name, "short_name": short, "family": family, "category": category, "tc": tc}
            rows.append({c: values[c] if c in values else cols[c][i] for c in columns})
    try:
        summary: dict[str, Any] = json.loads(b.summary_json)
        keys = [int(k) for k in json.loads(b.iteration_keys)]
    except (ValueError, TypeError):
        raise Unreadable("summary or iteration keys are not JSON") from None
    notes = summary.pop("notes", [])
    lb_summary = LeaderboardSummary.from_dict(summary)

    def bounds() -> dict[str, tuple[float, float]]:  # (after the read: the samples' bytes are at hand)
        if not found or found[3] is None:
            return {}
        return bounds_from_samples(stored_samples(b.id, found[0], found[3], [r["name"] for r in rows], keys),
                                   lb_summary)

    return LeaderboardRows(columns=list(columns), rows=rows, summary=lb_summary, notes=notes, bounds=bounds)

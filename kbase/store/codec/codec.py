"""The leaderboard <-> store codec: how a Leaderboard is laid out in the store and read back.

- a baseline row (``Baseline``): the summary's scalars, the window, the source and the commit;
- its kernel table (``BaselineKernels``, ``kernel_blobs``): every leaderboard column, the per-iteration
  samples (ns and launches per iteration key, summed over GPUs) in the key order of
  ``Baseline.iteration_keys``, and each kernel's launch sketch (``analysis.sketch``);
- kernel names once each (``KernelName``), keyed by the sha1 of the full demangled name.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kbase.jsonable import clean
from kbase.store.schema.records import BASELINE_FIELDS, BaselineRecord, baseline_record
from kbase.store.schema.schema_names import name_hash  # noqa: F401 - re-exported (its home before)

if TYPE_CHECKING:
    import numpy as np

    from kbase.analysis.capture import Capture
    from kbase.analysis.leaderboard import Leaderboard
    from kbase.analysis.op_pairs import OpPairs
    from kbase.analysis.summary import LeaderboardSummary
    from kbase.gitrepo import CommitInfo
    from kbase.readers.source import SourceInfo
    from kbase.store.codec.kernel_blobs import KernelTable, StoredTable
    from kbase.store.codec.op_blobs import StoredOps


def _hostname() -> str:
    import socket  # here: only a write names its host, and socket costs a stored diff or gate ~3 ms to import

    return socket.gethostname()


def fingerprint(gpu_models: str, gpu_count: int, workload: str, window_spec: str) -> str:
    """Comparability key: two baselines compare only when this matches."""
    import hashlib  # here: a read needs no fingerprint, and hashlib costs a stored diff or gate ~3 ms to import

    return hashlib.sha256(f"{gpu_models}|{gpu_count}|{workload}|{window_spec}".encode()).hexdigest()[:32]


# numpy and pandas load inside the functions that use them: ``kbase list``/``history``/``db`` import this
# module (through ``queries``) and need neither.

# name id -> (name, short name, category, tc, family): ``reader.names_by_id``'s rows by id
Names = dict[int, tuple[str, str, str, str, str]]


def _sample_matrices(names: np.ndarray, iteration: np.ndarray, total_ns: np.ndarray, count: np.ndarray,
                     keys: list[int]) -> tuple[list, np.ndarray, np.ndarray]:
    """Per-iteration samples (one per name and iteration) as two (names x keys) float64 matrices: ns and
    launches, the names in order of first appearance. One fancy assignment: a Python loop over a groupby
    cost ~1 s per snapshot at 2,000 kernels x 100 iterations. Duplicate (name, iteration) rows: the last wins."""
    import numpy as np

    position: dict[str, int] = {}
    codes = np.fromiter((position.setdefault(n, len(position)) for n in names.tolist()), dtype=np.int64,
                        count=len(names))
    it = np.asarray(iteration, dtype=np.int64)
    karr = np.asarray(keys, dtype=np.int64)
    if len(set(keys)) == len(karr):
        order = np.argsort(karr, kind="stable")
        idx = np.searchsorted(karr, it, sorter=order)
        idx = order[np.minimum(idx, len(karr) - 1)]
        bad = karr[idx] != it
        if bad.any():
            raise KeyError(int(it[np.flatnonzero(bad)[0]]))
    else:  # repeated keys (never written by kbase): the last position of each, as a dict would give
        pos = {k: i for i, k in enumerate(keys)}
        idx = np.array([pos[int(k)] for k in it], dtype=np.int64)
    ns = np.zeros((len(position), len(keys)), dtype=np.float64)
    cnt = np.zeros((len(position), len(keys)), dtype=np.float64)
    ns[codes, idx] = np.asarray(total_ns, dtype=np.float64)
    cnt[codes, idx] = np.asarray(count, dtype=np.float64)
    return list(position), ns, cnt


def kernel_naming(lb: Leaderboard) -> list[tuple[str, str, str, str, str]]:
    """(name, family, short name, category, tc) of each kernel of ``lb`` (``queries.name_ids``)."""
    return list(zip(*(lb.column(c).tolist() for c in ("name", "family", "short_name", "category", "tc"))))


def kernel_table(lb: Leaderboard, keys: list[int]) -> KernelTable:
    """The stored kernel table of a leaderboard, in leaderboard order (rank 1 = largest total; ``name_id``: the
    row): every column, the samples in key order of ``keys`` (float32 first, as 0008 stored them: a capture
    stored then and migrated, or stored now, gives the same blobs) and the launch sketches."""
    import numpy as np

    from kbase.analysis.sketch import CHUNKS, WIDTH
    from kbase.store.codec.kernel_blobs import KernelTable
    from kbase.store.codec.kernel_columns import declared, dtype_of

    names = lb.column("name").tolist()
    n = len(names)

    def num(c: str, dtype: Any = np.float64) -> np.ndarray:
        return np.asarray(lb.column(c), dtype=dtype)

    amdahl = num("amdahl_ceiling")
    t = KernelTable(name_id=np.arange(n, dtype=np.int64), count=num("count", np.int64),
                    total_ns=num("total_ns", np.int64), avg_ns=num("avg_ns"), per_iter_ns=num("per_iter_ns"),
                    share_window=num("share_window"), gpus=num("gpus", np.int64), median_ns=num("median_ns"),
                    min_ns=num("min_ns", np.int64), max_ns=num("max_ns", np.int64), std_ns=num("std_ns"),
                    count_per_iter=num("count_per_iter"), share_kernel=num("share_kernel"),
                    amdahl_ceiling=np.where(np.isfinite(amdahl), amdahl, np.nan), fragmented=num("fragmented", bool),
                    extra={s.name: num(s.name, dtype_of(s.name)) if s.name in lb.columns else np.full(n, np.nan)
                           for s in declared()})
    if keys:
        t.iter_ns, t.iter_count = np.zeros((n, len(keys))), np.zeros((n, len(keys)))
        s_names = lb.sample_column("name")
        if len(s_names):
            sample_names, ns, cnt = _sample_matrices(s_names, lb.sample_column("iteration"),
                                                     lb.sample_column("total_ns"), lb.sample_column("count"), keys)
            row = {x: i for i, x in enumerate(names)}
            at = np.array([row.get(x, -1) for x in sample_names], dtype=np.int64)
            keep = at >= 0
            t.iter_ns[at[keep]] = ns[keep].astype(np.float32)
            t.iter_count[at[keep]] = cnt[keep].astype(np.float32)
    if lb.sketches:
        t.sketches = np.full((n, CHUNKS, WIDTH), np.nan)
        for i, x in enumerate(names):
            if x in lb.sketches:
                t.sketches[i] = np.asarray(lb.sketches[x], dtype=np.float32)
    return t


def stored_table(lb: Leaderboard, keys: list[int]) -> StoredTable:
    """A leaderboard's kernel data as the store and an export keep it (``kernel_blobs.StoredTable``): its
    blobs, its kernels' names by row and its op list (the kernel time by op: ``ops``, None without)."""
    from kbase.store.codec.kernel_blobs import StoredTable, encode

    t = kernel_table(lb, keys)
    ops, op_names = None, []
    if lb.ops is not None:
        op_names = sorted(set(zip(lb.ops.names.tolist(), lb.ops.bare.tolist())))
        ops = _ops_blob(lb, t, {key: i + 1 for i, (key, _) in enumerate(op_names)})
    return StoredTable(encode(t), ops, kernel_naming(lb), op_names)


def _ops_blob(lb: Leaderboard, t: KernelTable, position: dict[str, int]) -> bytes:
    """The ``ops`` blob of ``lb.ops`` against its kernel table ``t`` (rows in leaderboard order; ``position``:
    op key -> its position in the op list)."""
    import numpy as np

    from kbase.store.codec.op_blobs import encode_ops

    assert lb.ops is not None
    pairs = lb.ops
    row_of = {x: i for i, x in enumerate(lb.column("name").tolist())}
    rows = np.array([row_of[k] for k in pairs.kernel.tolist()], dtype=np.int64)
    names = pairs.names.tolist()
    ops = np.array([0 if c < 0 else position[names[c]] for c in pairs.op.tolist()], dtype=np.int64)
    return encode_ops(pairs, rows, ops, t.count, t.total_ns, t.iter_ns)


def baseline_row(lb: Leaderboard, *, workload: str, commit: CommitInfo, source: SourceInfo, window_spec: str,
                 tags: list[str] | None = None, note: str = "", kind: str = "snapshot") -> BaselineRecord:
    """The ``baseline`` row (not yet saved: no id) of a leaderboard taken at ``commit``, as its record."""
    values = baseline_values(lb, workload=workload, commit=commit, source=source, window_spec=window_spec, tags=tags,
                             note=note, kind=kind)
    return baseline_record(tuple(values.get(f) for f in BASELINE_FIELDS))


def baseline_values(lb: Leaderboard, *, workload: str, commit: CommitInfo, source: SourceInfo, window_spec: str,
                    tags: list[str] | None = None, note: str = "", kind: str = "snapshot") -> dict[str, Any]:
    """The columns of ``baseline_row`` (all but ``id``) as a dict: what the driver writes (``writer``) without
    SQLModel."""
    from datetime import UTC, datetime

    from kbase.version import __version__

    s = lb.summary
    models = ",".join(s.gpu_models)
    keys = [int(k) for k in s.iteration_keys]
    step_ns, idle_ns = budget_columns(s.budget)
    return dict(
        created_at=datetime.now(UTC),
        capture_copy=0,
        workload=workload,
        kind=kind,
        commit=commit.hash,
        commit_date=commit.date,
        branch=commit.branch,
        detached=commit.detached,
        dirty=commit.dirty,
        source_name=source.name,
        source_sha256=source.sha256,
        source_size=source.size,
        source_format=source.format,
        source_mtime_ns=source.mtime_ns,
        source_probe=source.probe,
        exporter_version=s.exporter,
        gpu_models=models,
        gpu_count=int(s.gpus),
        host=_hostname(),
        window_spec=window_spec,
        window_desc=s.window,
        marker=s.marker or "",
        aligned=bool(s.aligned),
        warmup_skipped=int(s.warmup_skipped),
        iterations_used=int(s.iterations),
        iteration_keys=json.dumps(keys),
        window_ns=int(s.window_ns),
        window_gpu_ns=int(s.window_gpu_ns),
        total_kernel_ns=int(s.total_kernel_ns),
        compute_ns=int(s.compute_ns),
        communication_ns=int(s.communication_ns),
        memory_ns=int(s.memory_ns),
        step_wall_ns=s.step_wall_ns,
        fingerprint=fingerprint(models, int(s.gpus), workload, window_spec),
        summary_json=json.dumps(clean({**clean(s), "notes": lb.notes}), allow_nan=False),
        kbase_version=__version__,
        tags=json.dumps(sorted(set(tags or []))),
        note=note,
        step_ns=step_ns,
        idle_ns=idle_ns,
        capture_span=s.capture_span,
    )


def budget_columns(budget: dict | None) -> tuple[float | None, float | None]:
    """``Baseline.step_ns`` / ``idle_ns`` from a stored budget (``analysis.budget``)."""
    if not budget:
        return None, None
    from kbase.analysis.budget import budget_from_stored

    b = budget_from_stored(budget)
    steps = b.step_samples()
    return (sum(steps) / len(steps) if steps else None), b.per_unit(b.total.idle_ns)


def stored_summary(b: BaselineRecord) -> tuple[LeaderboardSummary, list[str]]:
    """Baseline ``b``'s leaderboard summary and notes, from its ``summary_json``."""
    from kbase.analysis.summary import LeaderboardSummary

    summary: dict[str, Any] = json.loads(b.summary_json)
    notes = summary.pop("notes", [])
    return LeaderboardSummary.from_dict(summary), notes


def stored_sketches(names: list[str], t: KernelTable) -> dict[str, np.ndarray]:
    """name -> launch sketch of the kernels that have one (none for baselines stored before 0005)."""
    import numpy as np

    from kbase.analysis.sketch import COUNT, QUANTILES

    if t.sketches is None:
        return {}
    sk = t.sketches
    has = np.isfinite(sk[:, :, :QUANTILES]).any(axis=(1, 2)) | (sk[:, :, COUNT] > 0).any(axis=1)
    return {name: sk[i] for i, name in enumerate(names) if has[i]}


def _texts(t: KernelTable, names: Names) -> dict[str, np.ndarray]:
    """name, short_name, category, tc, family of each kernel of ``t`` (object arrays)."""
    import numpy as np

    out = {}
    rows = [names[i] for i in t.name_id.tolist()]
    for j, c in enumerate(("name", "short_name", "category", "tc", "family")):
        col = np.empty(len(rows), dtype=object)
        col[:] = [r[j] for r in rows]
        out[c] = col
    return out


def _samples(t: KernelTable, stored_keys: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(ns, launches) per kernel and stored key, zeros where none were stored."""
    import numpy as np

    if t.iter_ns is None or t.iter_count is None:
        return np.zeros((len(t), len(stored_keys))), np.zeros((len(t), len(stored_keys)))
    return t.iter_ns, t.iter_count


def capture_from_table(b: BaselineRecord, t: KernelTable, names: Names,
                       ops: OpPairs | None = None) -> Capture:
    """Baseline ``b``'s kernel table as the comparison's ``Capture``, without pandas: what
    ``capture.capture_of_leaderboard`` gives of the leaderboard that was stored, straight from the columns."""
    import numpy as np

    from kbase.analysis.capture import CAPTURE_TEXT, Capture

    s, _ = stored_summary(b)
    text = _texts(t, names)
    stored_keys, keys = json.loads(b.iteration_keys), [int(k) for k in s.iteration_keys]
    ns, cnt = _samples(t, stored_keys)
    out = _in_key_order(np.where(cnt > 0, ns, 0).astype(np.float64), stored_keys, keys)
    if ops is not None and stored_keys != keys:
        at = {k: j for j, k in enumerate(keys)}
        ops.iter_ns = ops.iter_ns.with_columns(np.array([at.get(k, -1) for k in stored_keys], dtype=np.int64),
                                               len(keys))
    return Capture(summary=s, names=text["name"], text={c: text[c] for c in CAPTURE_TEXT},
                   gpus=t.gpus.astype(np.int64), count=t.count.astype(float), total_ns=t.total_ns.astype(float),
                   avg_ns=t.avg_ns, std_ns=t.std_ns, iter_ns=out, sketches=stored_sketches(text["name"].tolist(), t),
                   ops=ops)


def _in_key_order(out: np.ndarray, stored_keys: list[int], keys: list[int]) -> np.ndarray:
    """A (rows, stored keys) sample matrix with its columns in the order of ``keys`` (0 for a key not stored)."""
    import numpy as np

    if stored_keys == keys:
        return out
    where = {k: j for j, k in enumerate(stored_keys)}
    mapped = np.zeros((len(out), len(keys)))
    for j, k in enumerate(keys):
        if k in where:
            mapped[:, j] = out[:, where[k]]
    return mapped


def op_pairs_of(stored: StoredOps, kernel_names: list[str], op_names: dict[int, tuple[str, str]]) -> OpPairs:
    """A baseline's stored kernel time by op (``op_blobs.decode_ops``) as a leaderboard's ``OpPairs``:
    ``kernel_names`` by kernel-table row, ``op_names`` op id -> (op key, op without scope); samples in the
    stored key order."""
    import numpy as np

    from kbase.analysis.op_pairs import OpPairs

    used = sorted({op_names[i] for i in stored.op_id.tolist() if i})
    code = {key: j for j, (key, _) in enumerate(used)}
    kernel = np.empty(len(stored.row), dtype=object)
    kernel[:] = [kernel_names[r] for r in stored.row.tolist()]
    return OpPairs(names=np.array([k for k, _ in used], dtype=object),
                   bare=np.array([b for _, b in used], dtype=object),
                   op=np.array([code[op_names[i][0]] if i else -1 for i in stored.op_id.tolist()], dtype=np.int32),
                   kernel=kernel, count=np.asarray(stored.count, dtype=np.int64),
                   total_ns=np.asarray(stored.total_ns, dtype=np.float64), iter_ns=stored.iter_ns)

"""The leaderboard <-> rows codec: how a Leaderboard is laid out in the store and read back.

- a baseline row (``Baseline``): the summary's scalars, the window, the source and the commit;
- kernel rows (``BaselineKernel``): every leaderboard column, plus the per-iteration samples packed as
  little-endian float32 arrays (ns and launches per iteration key, summed over GPUs) in the key order
  of ``Baseline.iteration_keys``, and each kernel's launch sketch (``comparison.sketch``, 576 bytes);
- kernel names once each (``KernelName``), keyed by the sha1 of the full demangled name;
- each kernel's launches and time by the op that launched it (``BaselineKernelOp``, op keys once each in
  ``OpName``), with per-iteration samples packed as the kernel rows' are.
"""

from __future__ import annotations

import hashlib
import json
import socket
from typing import TYPE_CHECKING, Any

from kbase.jsonable import clean
from kbase.store.schema_names import name_hash  # noqa: F401 - re-exported (its home before)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from kbase.analysis.capture import Capture
    from kbase.analysis.leaderboard import Leaderboard
    from kbase.analysis.ops import OpPairs
    from kbase.analysis.summary import LeaderboardSummary
    from kbase.gitrepo import CommitInfo
    from kbase.readers.source import SourceInfo
    from kbase.store.models import Baseline
    from kbase.store.records import BaselineRecord


def fingerprint(gpu_models: str, gpu_count: int, workload: str, window_spec: str) -> str:
    """Comparability key: two baselines compare only when this matches."""
    return hashlib.sha256(f"{gpu_models}|{gpu_count}|{workload}|{window_spec}".encode()).hexdigest()[:32]


# numpy and pandas load inside the functions that use them: ``kbase list``/``history``/``db`` import this
# module (through ``queries``) and need neither.


def _pack(values: np.ndarray) -> bytes:
    import numpy as np

    return np.asarray(values, dtype="<f4").tobytes()


def unpack(blob: bytes | None) -> np.ndarray:
    import numpy as np

    if not blob:
        return np.empty(0, dtype=np.float32)
    return np.frombuffer(blob, dtype="<f4")


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


def kernel_rows(baseline_id: int, lb: Leaderboard, name_ids: dict[str, int], keys: list[int]) -> list[dict]:
    """The ``BaselineKernel`` rows of a leaderboard, in leaderboard order (rank 1 = largest total)."""
    import math

    import numpy as np

    from kbase.analysis import sketch

    s_names = lb.sample_column("name")
    packed: dict[str, tuple[bytes, bytes]] = {}
    if keys and len(s_names):
        names, ns, cnt = _sample_matrices(s_names, lb.sample_column("iteration"), lb.sample_column("total_ns"),
                                          lb.sample_column("count"), keys)
        ns32, cnt32 = ns.astype("<f4"), cnt.astype("<f4")
        packed = {name: (ns32[i].tobytes(), cnt32[i].tobytes()) for i, name in enumerate(names)}
    empty = _pack(np.zeros(len(keys))) if keys else None
    rows = []
    nan = float("nan")

    def isna(v: Any) -> bool:
        return v is None or (isinstance(v, float) and math.isnan(v))

    for rank, (name, gpus, count, total, avg, median, lo, hi, std, per_iter, cpi, share_w, share_k, amdahl,
               frag) in enumerate(zip(*(lb.column(c).tolist() for c in _ROW_COLS)), 1):
        samples = packed.get(name)
        rows.append(
            {
                "baseline_id": baseline_id,
                "name_id": name_ids[name],
                "rank": rank,
                "gpus": int(gpus),
                "count": int(count),
                "total_ns": int(total),
                "avg_ns": float(avg),
                "median_ns": float(median),
                "min_ns": int(lo),
                "max_ns": int(hi),
                "std_ns": float(std),
                "per_iter_ns": None if isna(per_iter) else float(per_iter),
                "count_per_iter": None if isna(cpi) else float(cpi),
                "share_window": None if isna(share_w) else float(share_w),
                "share_kernel": None if isna(share_k) else float(share_k),
                "amdahl_ceiling": None if amdahl in (nan, float("inf")) else float(amdahl),
                "fragmented": bool(frag),
                "iter_ns": samples[0] if samples is not None else empty,
                "iter_count": samples[1] if samples is not None else empty,
                "launch_sketch": sketch.pack(lb.sketches[name]) if name in lb.sketches else None,
            }
        )
    return rows


def op_rows(baseline_id: int, ops: OpPairs, name_ids: dict[str, int], op_ids: dict[str, int]) -> list[dict]:
    """The ``BaselineKernelOp`` rows of a leaderboard's (op, kernel) pairs (``op_id`` None: no op)."""
    names = ops.names.tolist()
    return [{"baseline_id": baseline_id, "name_id": name_ids[kernel], "op_id": None if op < 0 else op_ids[names[op]],
             "count": int(count), "total_ns": int(round(total)),
             "iter_ns": _pack(ops.iter_ns[i]) if ops.iter_ns.shape[1] else None}
            for i, (kernel, op, count, total) in enumerate(zip(ops.kernel.tolist(), ops.op.tolist(),
                                                               ops.count.tolist(), ops.total_ns.tolist()))]


def op_pairs_from_rows(rows: list[tuple], n_keys: int) -> OpPairs | None:
    """Stored (op, kernel) rows (``reader.op_rows``: kernel name, op key, op, count, total_ns, iter_ns) as a
    leaderboard's ``OpPairs``; None without any (a baseline stored without op information)."""
    import numpy as np

    from kbase.analysis.ops import OpPairs

    if not rows:
        return None
    keys = sorted({(r[1], r[2]) for r in rows if r[1] is not None})
    code = {k: i for i, (k, _) in enumerate(keys)}
    ns, _ = sample_matrices([r[5] for r in rows], [r[5] for r in rows], n_keys)
    kernel = np.empty(len(rows), dtype=object)
    kernel[:] = [r[0] for r in rows]
    return OpPairs(names=np.array([k for k, _ in keys], dtype=object),
                   bare=np.array([b for _, b in keys], dtype=object),
                   op=np.array([-1 if r[1] is None else code[r[1]] for r in rows], dtype=np.int32), kernel=kernel,
                   count=np.array([r[3] for r in rows], dtype=np.int64),
                   total_ns=np.array([r[4] for r in rows], dtype=np.float64), iter_ns=ns.astype(np.float64))


_ROW_COLS = ("name", "gpus", "count", "total_ns", "avg_ns", "median_ns", "min_ns", "max_ns", "std_ns", "per_iter_ns",
             "count_per_iter", "share_window", "share_kernel", "amdahl_ceiling", "fragmented")


def baseline_row(lb: Leaderboard, *, workload: str, commit: CommitInfo, source: SourceInfo, window_spec: str,
                 tags: list[str] | None = None, note: str = "") -> Baseline:
    """The ``Baseline`` row (not yet saved) of a leaderboard taken at ``commit``."""
    from kbase.store.models import Baseline  # here: reading a stored leaderboard needs no SQLModel
    from kbase.version import __version__

    s = lb.summary
    models = ",".join(s.gpu_models)
    keys = [int(k) for k in s.iteration_keys]
    return Baseline(
        workload=workload,
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
        host=socket.gethostname(),
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
    )


def leaderboard_from_rows(b: Baseline | BaselineRecord, k: pd.DataFrame) -> Leaderboard:
    """The stored Leaderboard of baseline ``b`` (a model or its ``fast_read`` record: only its summary and
    iteration keys are read) from its kernel rows ``k`` (joined with their names)."""
    from kbase.analysis.leaderboard import COLUMNS, Leaderboard

    summary, notes = stored_summary(b)
    table = k.assign(
        amdahl_ceiling=k["amdahl_ceiling"].fillna(float("inf")),
        per_iter_ns=k["per_iter_ns"].astype(float),
        count_per_iter=k["count_per_iter"].astype(float),
    )[COLUMNS].reset_index(drop=True)
    keys = json.loads(b.iteration_keys)
    # baselines stored before migration 0005 have no sketches: compared without them
    sketches = stored_sketches(k["name"].tolist(), k["launch_sketch"].tolist()) if "launch_sketch" in k else {}
    return Leaderboard(table=table, summary=summary, samples=unpack_samples(k, keys), notes=notes, sketches=sketches)


def stored_summary(b: Baseline | BaselineRecord) -> tuple[LeaderboardSummary, list[str]]:
    """Baseline ``b``'s leaderboard summary and notes, from its ``summary_json``."""
    from kbase.analysis.summary import LeaderboardSummary

    summary: dict[str, Any] = json.loads(b.summary_json)
    notes = summary.pop("notes", [])
    return LeaderboardSummary.from_dict(summary), notes


def stored_sketches(names: list[str], blobs: list[Any]) -> dict[str, np.ndarray]:
    """name -> launch sketch of the kernel rows that hold a readable one."""
    from kbase.analysis import sketch

    out: dict[str, np.ndarray] = {}
    for name, blob in zip(names, blobs):
        sk = sketch.unpack(blob)
        if sk is not None:
            out[name] = sk
    return out


def capture_from_rows(b: Baseline | BaselineRecord, rows: list[tuple], op_rows: list[tuple] | None = None) -> Capture:
    """Baseline ``b``'s kernel rows (``reader.kernel_rows``: ``frames.KERNEL_COLUMNS`` order) as the
    comparison's ``Capture``, without pandas: what ``leaderboard_from_rows`` then
    ``capture.capture_of_leaderboard`` give, as arrays straight from the tuples and the sample blobs; ``op_rows``
    (``reader.op_rows`` without the baseline id): its kernels' time by op."""
    import numpy as np

    from kbase.analysis.capture import CAPTURE_TEXT, Capture
    from kbase.store.frames import KERNEL_COLUMNS

    col = {c: i for i, c in enumerate(KERNEL_COLUMNS)}
    s, _ = stored_summary(b)

    def column(name: str, dtype: Any = object) -> np.ndarray:
        i = col[name]
        if dtype is object:
            out = np.empty(len(rows), dtype=object)
            out[:] = [r[i] for r in rows]
            return out
        return np.array([np.nan if r[i] is None else r[i] for r in rows], dtype=dtype)

    names = column("name")
    sketches = stored_sketches(names.tolist(), [r[col["launch_sketch"]] for r in rows])
    stored_keys, keys = json.loads(b.iteration_keys), [int(k) for k in s.iteration_keys]
    ops = op_pairs_from_rows(op_rows or [], len(stored_keys))
    if ops is not None:
        ops.iter_ns = _in_key_order(ops.iter_ns, stored_keys, keys)
    return Capture(summary=s, names=names, text={c: column(c) for c in CAPTURE_TEXT}, gpus=column("gpus", np.int64),
                   count=column("count", float), total_ns=column("total_ns", float), avg_ns=column("avg_ns", float),
                   std_ns=column("std_ns", float), iter_ns=_iteration_matrix(rows, col, stored_keys, keys),
                   sketches=sketches, ops=ops)


def _iteration_matrix(rows: list[tuple], col: dict[str, int], stored_keys: list[int], keys: list[int]) -> np.ndarray:
    """(rows, keys) ns per iteration from the stored blobs (0 where a kernel had no launch), the stored
    key order mapped onto ``keys`` (the summary's)."""
    import numpy as np

    ns, cnt = sample_matrices([r[col["iter_ns"]] for r in rows], [r[col["iter_count"]] for r in rows],
                              len(stored_keys))
    return _in_key_order(np.where(cnt > 0, ns, 0).astype(np.float64), stored_keys, keys)


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


def sample_matrices(ns_blobs: list[Any], cnt_blobs: list[Any], n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """The stored per-iteration samples of kernel rows as two (rows, n_keys) float32 matrices, ns and
    launches, in the stored key order; 0 past a row's stored iterations. One ``np.frombuffer`` when every
    row holds the same number of iterations (what ``save_leaderboard`` writes), else row by row."""
    import numpy as np

    ns_m = np.zeros((len(ns_blobs), n_keys), dtype=np.float32)
    cnt_m = np.zeros((len(ns_blobs), n_keys), dtype=np.float32)
    width = len(ns_blobs[0]) if ns_blobs and isinstance(ns_blobs[0], bytes) else -1
    if width > 0 and all(isinstance(b, bytes) and len(b) == width for b in (*ns_blobs, *cnt_blobs)):
        m = min(width // 4, n_keys)
        ns_m[:, :m] = np.frombuffer(b"".join(ns_blobs), dtype="<f4").reshape(len(ns_blobs), -1)[:, :m]
        cnt_m[:, :m] = np.frombuffer(b"".join(cnt_blobs), dtype="<f4").reshape(len(cnt_blobs), -1)[:, :m]
        return ns_m, cnt_m
    for i, (ns_blob, cnt_blob) in enumerate(zip(ns_blobs, cnt_blobs)):
        ns, cnt = unpack(ns_blob), unpack(cnt_blob)
        m = min(len(ns), n_keys)
        if len(cnt) < m:
            raise IndexError(f"stored launch counts cover {len(cnt)} iterations, times cover {m}")
        ns_m[i, :m], cnt_m[i, :m] = ns[:m], cnt[:m]
    return ns_m, cnt_m


def unpack_samples(k: pd.DataFrame, keys: list[int]) -> pd.DataFrame:
    """(name, iteration, count, total_ns) for every stored iteration with launches, in row then key
    order (``sample_matrices``: no per-sample Python; was ~0.3 s at 2,000 x 100). Names stay Python
    objects: inferring Arrow strings copied every long name once per iteration (~60 ms at 2,000 x 99)."""
    import numpy as np
    import pandas as pd

    cols = ["name", "iteration", "count", "total_ns"]
    karr = np.asarray(keys, dtype=np.int64)
    ns, cnt = sample_matrices(k["iter_ns"].tolist(), k["iter_count"].tolist(), len(karr))
    row, col = np.nonzero(cnt > 0)  # row-major: row then key order
    if not len(row):
        return pd.DataFrame([], columns=cols)
    return pd.DataFrame({
        "name": pd.Series(np.asarray(k["name"].tolist(), dtype=object)[row], dtype=object),
        "iteration": karr[col],
        "count": cnt[row, col].astype(np.int64),
        "total_ns": ns[row, col].astype(np.float64),
    }, columns=cols)

"""Reader for Nsight Systems SQLite exports (``nsys export --type sqlite``), schemas 3.11 to 3.25.

The file is opened through SQLite's read-only, immutable URI mode: no journal, no lock file and
no write can touch the user's export (and it works on read-only media).

What we rely on, present in every schema from 3.11 on:
- ``CUPTI_ACTIVITY_KIND_KERNEL(start, end, deviceId, globalPid, correlationId, demangledName,
  shortName)`` with names as ``StringIds`` ids;
- ``CUPTI_ACTIVITY_KIND_RUNTIME(start, globalTid, correlationId)``: a kernel's launch call is the
  runtime row of the same process with the same correlation id;
- ``NVTX_EVENTS``: push/pop ranges (eventType 59, thread-scoped) and start/end ranges (60,
  process-scoped), named in ``text`` or through ``textId``; the table may be absent entirely.
- ``globalPid``/``globalTid`` carry the process id in bits 24–47.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

import numpy as np
import pandas as pd

from kbase.errors import InputError
from kbase.readers.profile import Profile

NVTX_PUSHPOP = 59
NVTX_STARTEND = 60
PID_SHIFT = 24
PID_MASK = 0xFFFFFF


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open an export so that nothing can be written to it, not even a lock or journal file."""
    uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
    return sqlite3.connect(uri, uri=True, check_same_thread=False)


def _tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}  # table: a literal of ours


def bulk_int_columns(path: Path, table: str, exprs: list[str], progress=None) -> list[np.ndarray]:
    """Large tables: stream integer expressions (never NULL) into int64 arrays through ADBC/Arrow.

    Measured on 1M kernel rows (README, "Reader"): Python's sqlite3 ``fetchmany`` spent 7 s
    building tuples; ADBC moves column batches into Arrow at ~1.2 s, and releases the GIL so the
    kernel and runtime tables are read on two threads at once. Arrays are preallocated from
    ``max(rowid)`` (an O(log n) lookup) so peak memory is the result plus one batch.
    """
    import adbc_driver_sqlite.dbapi as adbc

    uri = f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"
    conn = adbc.connect(uri)
    try:
        cur = conn.cursor()
        cur.execute(f"SELECT max(rowid) FROM {table}")  # table: a literal of ours
        (cap,) = cur.fetchone()
        cap = int(cap or 0) + 1
        out = [np.empty(cap, dtype=np.int64) for _ in exprs]
        cur.execute(f"SELECT {', '.join(exprs)} FROM {table}")
        n = 0
        for batch in cur.fetch_record_batch():
            m = batch.num_rows
            if n + m > len(out[0]):  # rowids were not dense: grow
                out = [np.concatenate([o, np.empty(max(m, len(o) // 2), dtype=np.int64)]) for o in out]
            for i in range(len(exprs)):
                out[i][n : n + m] = batch.column(i).to_numpy(zero_copy_only=False)
            n += m
            if progress is not None:
                progress(m, cap)  # rows read now, of about ``cap`` in all
        cur.close()
        return [o[:n].copy() if n < len(o) // 2 else o[:n] for o in out]
    finally:
        conn.close()


def _strings(conn: sqlite3.Connection, ids: np.ndarray) -> dict[int, str]:
    wanted = {int(i) for i in np.unique(ids)}
    out: dict[int, str] = {}
    for sid, value in conn.execute("SELECT id, value FROM StringIds"):
        if sid in wanted:
            out[sid] = value
    return out


def _meta(conn: sqlite3.Connection, tables: set[str]) -> dict[str, str]:
    # Older exporters name the table EXPORT_META_DATA.
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in tables and {"name", "value"} <= _columns(conn, table):
            return {name: value for name, value in conn.execute(f"SELECT name, value FROM {table}")}
    return {}


def _gpu_models(conn: sqlite3.Connection, tables: set[str]) -> dict[int, str]:
    if "TARGET_INFO_GPU" in tables:
        return {int(i): str(n) for i, n in conn.execute("SELECT id, name FROM TARGET_INFO_GPU") if n}
    if "TARGET_INFO_CUDA_DEVICE" in tables:
        cols = _columns(conn, "TARGET_INFO_CUDA_DEVICE")
        if {"cudaId", "name"} <= cols:
            return {int(i): str(n) for i, n in conn.execute("SELECT cudaId, name FROM TARGET_INFO_CUDA_DEVICE")}
    return {}


def check_export(conn: sqlite3.Connection, path: Path) -> set[str]:
    """Fail with one clear line unless this SQLite file is an nsys export holding kernels."""
    try:
        tables = _tables(conn)
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: not a readable SQLite file ({exc})") from None
    if "CUPTI_ACTIVITY_KIND_KERNEL" not in tables:
        hint = "no CUPTI_ACTIVITY_KIND_KERNEL table"
        if not tables & {"StringIds", "META_DATA_EXPORT", "TARGET_INFO_SESSION_START_TIME"}:
            raise InputError(f"{path}: SQLite file but not an Nsight Systems export ({hint})")
        raise InputError(f"{path}: Nsight Systems export without GPU kernels ({hint}; was CUDA trace on?)")
    if "StringIds" not in tables:
        raise InputError(f"{path}: Nsight Systems export without a StringIds table; kernel names cannot be read")
    return tables


def read_nsys(path: Path, progress=None) -> Profile:
    conn = connect_readonly(path)
    try:
        return _read(conn, path, progress)
    except InputError:
        raise
    except (sqlite3.DatabaseError, OSError) as exc:
        raise InputError(f"{path}: damaged or truncated SQLite export ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - ADBC/Arrow errors while scanning a damaged file
        if type(exc).__module__.startswith(("adbc", "pyarrow")):
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"{path}: damaged or truncated SQLite export ({first})") from None
        raise
    finally:
        conn.close()


def count_kernels(path: Path) -> int:
    """Cheap row count for a progress bar."""
    conn = connect_readonly(path)
    try:
        # max(rowid) is a B-tree descent, not a scan: exact unless rows were deleted
        return int(conn.execute("SELECT max(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] or 0)
    except sqlite3.DatabaseError:
        return 0
    finally:
        conn.close()


KERNEL_EXPRS = [
    "start",
    "end",
    "{pid} << 8 | deviceId",  # one key per (process, device)
    "CASE WHEN correlationId IS NULL THEN -1 ELSE {pid} << 32 | correlationId END",  # launch key
    "demangledName << 32 | shortName",
]
RUNTIME_EXPRS = [
    "CASE WHEN correlationId IS NULL THEN -2 ELSE {pid} << 32 | correlationId END",
    "coalesce(globalTid, -1)",
    "start",
]


def _pid_expr(column: str) -> str:
    return f"(({column} >> {PID_SHIFT}) & {PID_MASK})"


def _read(conn: sqlite3.Connection, path: Path, progress) -> Profile:
    from concurrent.futures import ThreadPoolExecutor

    tables = check_export(conn, path)
    kcols = _columns(conn, "CUPTI_ACTIVITY_KIND_KERNEL")
    kpid = _pid_expr("coalesce(globalPid, 0)") if "globalPid" in kcols else "0"
    kexprs = [e.format(pid=kpid) for e in KERNEL_EXPRS]
    has_runtime = "CUPTI_ACTIVITY_KIND_RUNTIME" in tables
    rexprs = [e.format(pid=_pid_expr("coalesce(globalTid, 0)")) for e in RUNTIME_EXPRS]
    # Two tables, two threads: ADBC releases the GIL while SQLite scans.
    with ThreadPoolExecutor(max_workers=2) as pool:
        kf = pool.submit(bulk_int_columns, path, "CUPTI_ACTIVITY_KIND_KERNEL", kexprs, progress)
        rf = pool.submit(_runtime_sorted, path, rexprs) if has_runtime else None
        start, end, gpu_key, launch_key, name_key = kf.result()
        if len(start) == 0:
            raise InputError(f"{path}: the export's kernel table is empty (no GPU kernels were captured)")
        # Narrow the per-kernel keys to int32 codes while the runtime table is still being read.
        # hash-factorize (no 10M-element sort), then renumber the few pairs in sorted order
        gcodes, gkeys = pd.factorize(gpu_key)
        del gpu_key
        rank = np.argsort(np.argsort(gkeys))
        gpu = rank.astype(np.int32)[gcodes]
        del gcodes
        pairs = np.sort(gkeys)
        codes, uniq_keys = pd.factorize(name_key)
        codes = codes.astype(np.int32)
        del name_key
        runtime = rf.result() if rf is not None else None

    launch_tid, launch_start = _match_launches(launch_key, runtime)
    del launch_key, runtime

    # GPU index: one per (process, device) pair, in a stable order.
    models = _gpu_models(conn, tables)
    gpus = pd.DataFrame(
        {
            "gpu": np.arange(len(pairs), dtype=np.int32),
            "pid": (pairs >> 8).astype(np.int64),
            "device": (pairs & 0xFF).astype(np.int32),
        }
    )
    gpus["model"] = [models.get(int(d), "unknown") for d in gpus["device"]]

    name_ids = uniq_keys >> 32
    short_ids = uniq_keys & 0xFFFFFFFF
    strings = _strings(conn, np.concatenate([name_ids, short_ids]))
    names = [strings.get(int(i), f"<unnamed kernel {int(i)}>") for i in name_ids]
    # Two StringIds can hold the same text (seen across processes); categories must be unique.
    cat = pd.Categorical(names)
    kernels = pd.DataFrame(
        {
            "start": start,
            "end": end,
            "gpu": gpu,
            "name": pd.Categorical.from_codes(cat.codes.astype(np.int32)[codes], categories=cat.categories),
            "launch_tid": launch_tid,
            "launch_start": launch_start,
        },
        copy=False,
    )
    short_names = {n: strings.get(int(sid), "") for n, sid in zip(names, short_ids)}

    ranges = _read_nvtx(conn, tables)
    meta = _meta(conn, tables)
    version = meta.get("EXPORT_PRODUCT_VERSION", "unknown")
    schema = meta.get("EXPORT_SCHEMA_VERSION")
    exporter = f"nsys {version}" + (f" (schema {schema})" if schema else "")
    return Profile(
        source=path,
        format="nsys-sqlite",
        exporter_version=exporter,
        kernels=kernels,
        ranges=ranges,
        gpus=gpus,
        short_names=short_names,
    )


def _runtime_sorted(path: Path, exprs: list[str]) -> list[np.ndarray]:
    """The runtime table's (launch key, thread, start), sorted by key — done on the reader thread
    while the kernel table is still streaming, so the join after it needs no sort."""
    r_key, r_tid, r_start = bulk_int_columns(path, "CUPTI_ACTIVITY_KIND_RUNTIME", exprs)
    # Runtime rows come nearly sorted by (pid, correlationId): the stable sort (timsort) is cheap.
    order = np.argsort(r_key, kind="stable")
    r_key = r_key[order]
    r_tid = r_tid[order]
    r_start = r_start[order]
    return [r_key, r_tid, r_start]


def _match_launches(k_key: np.ndarray, runtime: list[np.ndarray] | None) -> tuple[np.ndarray, np.ndarray]:
    """For each kernel, the thread and CPU start of its runtime launch call (-1 when absent).

    A sorted-key join in numpy: key = pid << 32 | correlationId on both sides; ``runtime`` comes
    sorted by key from :func:`_runtime_sorted`.
    """
    n = len(k_key)
    if runtime is None or len(runtime[0]) == 0:
        return np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    r_key, r_tid, r_start = runtime
    runtime.clear()  # drop the caller's references: they are freed when this returns
    tid_out = np.full(n, -1, dtype=np.int64)
    start_out = np.full(n, -1, dtype=np.int64)
    last = len(r_key) - 1
    for lo in range(0, n, 1 << 20):  # chunked: no full-length temporaries at the reader's peak
        k = k_key[lo : lo + (1 << 20)]
        pos = np.minimum(np.searchsorted(r_key, k), last)
        hit = (r_key[pos] == k) & (k >= 0)
        pos = pos[hit]
        tid_out[lo : lo + len(k)][hit] = r_tid[pos]
        start_out[lo : lo + len(k)][hit] = r_start[pos]
    return tid_out, start_out


def _read_nvtx(conn, tables) -> pd.DataFrame:
    from kbase.readers.profile import empty_ranges

    if "NVTX_EVENTS" not in tables:
        return empty_ranges()
    cols = _columns(conn, "NVTX_EVENTS")
    text = "text" if "text" in cols else "NULL"
    text_id = "textId" if "textId" in cols else "NULL"
    rows = conn.execute(
        f"SELECT e.start, e.end, e.eventType, e.globalTid, coalesce(e.{text}, s.value) "
        f"FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.{text_id} "
        "WHERE e.eventType IN (?, ?)",
        (NVTX_PUSHPOP, NVTX_STARTEND),
    ).fetchall()
    if not rows:
        return empty_ranges()
    df = pd.DataFrame(rows, columns=["start", "end", "type", "tid", "name"])
    df["end"] = df["end"].fillna(-1).astype("int64")
    df["tid"] = df["tid"].fillna(-1).astype("int64")
    # process key: the thread key without its thread bits (as launch_tid >> 24)
    df["pid"] = np.where(df["tid"].to_numpy() >= 0, df["tid"].to_numpy() >> PID_SHIFT, -1)
    # start/end ranges are not bound to a thread: any thread of the process may launch inside them.
    df.loc[df["type"] == NVTX_STARTEND, "tid"] = -1
    df["name"] = df["name"].fillna("").astype(str)
    return df[["start", "end", "tid", "pid", "name"]].reset_index(drop=True)

"""A tiny Nsight-Systems-like export with the real column names (``make_tiny_export``), what it is built
from (``export_ddl``, ``insert_rows``, ``TINY_KERNELS`` and its ids and timings), and the check that two
reads of one export agree (``assert_same_profile``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from helpers.shared import SCHEMA_SOURCE, ro_connect

# Used only when the shared exports are absent: the real column names (nsys 2024–2026 exports) of
# the tables kbase reads, trimmed to the columns it needs plus their NOT NULL neighbours.
FALLBACK_DDL = {
    "StringIds": "CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL)",
    "CUPTI_ACTIVITY_KIND_KERNEL": (
        "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, "
        "deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, "
        "streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER, "
        "demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, "
        "launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, "
        "gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, "
        "blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, "
        "staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, "
        "localMemoryPerThread INTEGER NOT NULL, localMemoryTotal INTEGER NOT NULL, "
        "gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, graphNodeId INTEGER, "
        "sharedMemoryLimitConfig INTEGER)"
    ),
    "CUPTI_ACTIVITY_KIND_RUNTIME": (
        "CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL, "
        "eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, "
        "nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER)"
    ),
    "NVTX_EVENTS": (
        "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, "
        "rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, "
        "endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER, "
        "int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER, "
        "floatValue REAL, jsonTextId INTEGER, jsonText TEXT)"
    ),
    "META_DATA_EXPORT": "CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT)",
}


def export_ddl(tables: list[str]) -> dict[str, str]:
    """CREATE TABLE statements: copied from a real export when shared data is present."""

    if SCHEMA_SOURCE.is_file():
        conn = ro_connect(SCHEMA_SOURCE)
        try:
            real = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall())
        finally:
            conn.close()
        return {t: real.get(t, FALLBACK_DDL[t]) for t in tables}
    return {t: FALLBACK_DDL[t] for t in tables}


def insert_rows(conn: sqlite3.Connection, table: str, rows: list[dict]) -> None:
    """Insert rows giving only some columns; other NOT NULL columns get 0 (or '' for TEXT)."""
    info = conn.execute(f"PRAGMA table_info({table})").fetchall()
    for row in rows:
        values = dict(row)
        for _, col, ctype, notnull, default, _pk in info:
            if col not in values and notnull and default is None:
                values[col] = "" if "TEXT" in (ctype or "").upper() else 0
        cols = list(values)
        conn.execute(
            f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [values[c] for c in cols],
        )


PID = 4242
TID = 4243
GLOBAL_PID = (1 << 48) | (PID << 24)
GLOBAL_TID = GLOBAL_PID | TID
T0 = 1_000_000_000  # 1 s on the capture clock
STEP_NS = 10_000_000
TINY_KERNELS = [
    # (demangled name, short name, duration ns)
    ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn", 2_000_000),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
        "vectorized_elementwise_kernel",
        300_000,
    ),
    (
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        1_000_000,
    ),
]


def make_tiny_export(
    path: Path,
    *,
    steps: int = 4,
    nvtx: bool = True,
    kernels: bool = True,
    string_ids: bool = True,
    runtime: bool = True,
    pad_rows: int = 0,
) -> Path:
    """Write a small export: ``steps`` ProfilerStep#N push/pop ranges on one thread, each launching
    the three ``TINY_KERNELS`` on device 0, plus one kernel launched before the first step and one
    whose launch call is missing (a sliced capture). ``pad_rows`` extra StringIds rows make the file
    span more pages (for truncation tests)."""
    tables = ["META_DATA_EXPORT"]
    if string_ids:
        tables.append("StringIds")
    tables.append("CUPTI_ACTIVITY_KIND_KERNEL")
    if runtime:
        tables.append("CUPTI_ACTIVITY_KIND_RUNTIME")
    if nvtx:
        tables.append("NVTX_EVENTS")
    ddl = export_ddl(tables)
    conn = sqlite3.connect(path)
    try:
        for t in tables:
            conn.execute(ddl[t])
        insert_rows(conn, "META_DATA_EXPORT", [
            {"name": "EXPORT_PRODUCT_VERSION", "value": "2026.2.1.210"},
            {"name": "EXPORT_SCHEMA_VERSION", "value": "3.25.0"},
        ])
        sid = {}
        strings = []
        for i, (name, short, _dur) in enumerate(TINY_KERNELS):
            sid[name] = 10 + 2 * i
            sid[short] = 11 + 2 * i
            strings += [{"id": 10 + 2 * i, "value": name}, {"id": 11 + 2 * i, "value": short}]
        strings.append({"id": 1, "value": "cudaLaunchKernel"})
        strings += [{"id": 1000 + i, "value": f"padding string {i} " + "x" * 200} for i in range(pad_rows)]
        if string_ids:
            insert_rows(conn, "StringIds", strings)
        krows, rrows, nrows = [], [], []
        corr = 100

        def launch(cpu_t: int, name: str, short: str, dur: int, with_runtime: bool = True) -> None:
            nonlocal corr
            corr += 1
            gpu_t = cpu_t + 500_000
            krows.append({
                "start": gpu_t, "end": gpu_t + dur, "deviceId": 0, "contextId": 1, "streamId": 7,
                "correlationId": corr, "globalPid": GLOBAL_PID, "demangledName": sid[name],
                "shortName": sid[short], "gridX": 1, "gridY": 1, "gridZ": 1, "blockX": 128,
                "blockY": 1, "blockZ": 1, "gridId": corr,
            })
            if with_runtime:
                rrows.append({
                    "start": cpu_t, "end": cpu_t + 5_000, "eventClass": 0, "globalTid": GLOBAL_TID,
                    "correlationId": corr, "nameId": 1, "returnValue": 0,
                })

        # before the first step (outside every iteration)
        launch(T0, *TINY_KERNELS[1])
        for s in range(1, steps + 1):
            base = T0 + s * STEP_NS
            nrows.append({"start": base, "end": base + 8_000_000, "eventType": 59,
                          "text": f"ProfilerStep#{s}", "globalTid": GLOBAL_TID})
            for j, (name, short, dur) in enumerate(TINY_KERNELS):
                launch(base + (j + 1) * 1_000_000, name, short, dur)
        # a kernel whose launch call is not in the capture
        launch(T0 + (steps + 1) * STEP_NS, *TINY_KERNELS[1], with_runtime=False)
        if kernels:
            insert_rows(conn, "CUPTI_ACTIVITY_KIND_KERNEL", krows)
        if runtime:
            insert_rows(conn, "CUPTI_ACTIVITY_KIND_RUNTIME", rrows)
        if nvtx:
            insert_rows(conn, "NVTX_EVENTS", nrows)
        conn.commit()
    finally:
        conn.close()
    return path


def assert_same_profile(a, b) -> None:
    """Two reads of one export hold the same kernel columns (values and dtypes), notes and short names."""
    import numpy as np

    for col in ("start", "end", "gpu", "name", "names", "launch_tid", "launch_start"):
        x, y = getattr(a.columns, col), getattr(b.columns, col)
        assert x.dtype == y.dtype and np.array_equal(x, y), col
    assert a.extra == b.extra and a.short_names == b.short_names

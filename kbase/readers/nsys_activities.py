"""The GPU's other work and the host's waits in an Nsight Systems export, for the GPU time budget.

- ``CUPTI_ACTIVITY_KIND_MEMCPY`` / ``CUPTI_ACTIVITY_KIND_MEMSET(start, end, deviceId, globalPid,
  correlationId)``: one row per copy or fill; its launch call is the runtime row of the same process and
  correlation id, as for a kernel (the reader joins both in one lookup).
- ``CUPTI_ACTIVITY_KIND_SYNCHRONIZATION(start, end, globalPid, syncType)``: the host blocked in a
  synchronize call (event, stream or context; ``syncType`` 2, a stream waiting on an event, blocks no host
  thread and is left out).

These tables are small (thousands of rows where kernels run to millions) and plain SQL reads them. Rows with
impossible fields are skipped: the budget is a view of the GPU's time, and a bad copy row must not refuse a
kernel leaderboard.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from kbase.readers.nsys_sql import NULL_PID, PID_MASK, PID_SHIFT, U32, columns_of
from kbase.readers.profile import ACTIVITY_MEMCPY, ACTIVITY_MEMSET, SyncColumns

ACTIVITY_TABLES = {"CUPTI_ACTIVITY_KIND_MEMCPY": ACTIVITY_MEMCPY, "CUPTI_ACTIVITY_KIND_MEMSET": ACTIVITY_MEMSET}
SYNC_TABLE = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
_STREAM_WAIT_EVENT = 2  # ENUM_CUPTI_SYNC_TYPE: no host thread waits


def read_activity_rows(conn: sqlite3.Connection, tables: set[str]) -> tuple[np.ndarray, ...]:
    """(start, end, gpu key, launch key, kind) of every memcpy/memset row: the keys as the kernel reader makes
    them (``pid << 8 | device``, ``pid << 32 | correlationId``; -1 without a correlation id)."""
    parts = []
    for table, kind in ACTIVITY_TABLES.items():
        if table not in tables:
            continue
        cols = columns_of(conn, table)
        if not {"start", "end", "deviceId"} <= cols:
            continue
        pid = (f"coalesce((globalPid >> {PID_SHIFT}) & {PID_MASK}, {NULL_PID})" if "globalPid" in cols else "0")
        launch = (f"CASE WHEN correlationId BETWEEN 0 AND {U32} THEN {pid} << 32 | correlationId ELSE -1 END"
                  if "correlationId" in cols else "-1")
        sql = (f"SELECT start, end, {pid} << 8 | deviceId, {launch} FROM {table} "
               "WHERE typeof(start) = 'integer' AND typeof(end) = 'integer' AND start >= 0 AND end >= start "
               "AND typeof(deviceId) = 'integer' AND deviceId BETWEEN 0 AND 255")
        rows = np.array(conn.execute(sql).fetchall(), dtype=np.int64).reshape(-1, 4)
        parts.append((rows, kind))
    if not parts:
        z = np.zeros(0, dtype=np.int64)
        return z, z.copy(), z.copy(), z.copy(), np.zeros(0, dtype=np.int8)
    rows = np.concatenate([r for r, _ in parts])
    kinds = np.concatenate([np.full(len(r), k, dtype=np.int8) for r, k in parts])
    return rows[:, 0].copy(), rows[:, 1].copy(), rows[:, 2].copy(), rows[:, 3].copy(), kinds


def read_syncs(conn: sqlite3.Connection, tables: set[str]) -> SyncColumns:
    """The host's synchronize calls; ``pid`` as ``launch_tid >> 24`` gives for the thread that launched."""
    if SYNC_TABLE not in tables:
        return SyncColumns.empty()
    cols = columns_of(conn, SYNC_TABLE)
    if not {"start", "end", "globalPid"} <= cols:
        return SyncColumns.empty()
    kind = "syncType" if "syncType" in cols else "deprecatedSyncType" if "deprecatedSyncType" in cols else None
    skip = f" AND coalesce({kind}, -1) != {_STREAM_WAIT_EVENT}" if kind else ""
    sql = (f"SELECT start, end, globalPid >> {PID_SHIFT} FROM {SYNC_TABLE} WHERE typeof(start) = 'integer' "
           f"AND typeof(end) = 'integer' AND typeof(globalPid) = 'integer' AND start >= 0 AND end >= start{skip}")
    rows = np.array(conn.execute(sql).fetchall(), dtype=np.int64).reshape(-1, 3)
    return SyncColumns(start=rows[:, 0].copy(), end=rows[:, 1].copy(), pid=rows[:, 2].copy())

"""The SQL side of the Nsight Systems reader: which tables and columns an export has, the
expressions that stream its kernel and runtime rows, and the small tables read whole (names,
metadata, GPU models, NVTX ranges).

Exports are SQLite files, whose columns take any type in any row: a hostile or damaged export can
hold NULL, text or out-of-range numbers where nsys writes integers. The streaming expressions
therefore always yield integers (Arrow sees one type) and mark a row they cannot trust instead of
letting NULL become NaN and then an absurd int64: a valid kernel row has its start (>= 0) in the
first column; an invalid one has ``-flaws`` there, a bit set per :data:`KERNEL_FLAWS`.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np

from kbase.errors import InputError
from kbase.readers.integrity import MAX_NAME_CHARS, add_note, capped_sql, check_name, clean_text
from kbase.readers.profile import RangeColumns
from kbase.readers.sqlite_columns import Derive

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
KERNEL_REQUIRED = ("start", "end", "deviceId", "demangledName")
NVTX_PUSHPOP = 59
NVTX_STARTEND = 60
PID_SHIFT = 24
PID_MASK = 0xFFFFFF
U32 = 0xFFFFFFFF
# Process part of a key for a row without globalPid: above every real 24-bit pid.
NULL_PID = 1 << 24
# The leaderboard keeps durations in 40 bits (about 18 minutes): a longer kernel is a broken row.
MAX_KERNEL_NS = (1 << 40) - 1

KERNEL_FLAWS: dict[int, str] = {
    1: "without a valid start time",
    2: "without a valid end time",
    4: "ending before they start",
    8: "with a negative start time",
    16: "without a valid device id",
    32: "without a valid name id",
    64: "ending after the capture ended",
    128: "running longer than 18 minutes",
    256: "without a process id",  # set by the reader: only when other rows have one
}


def tables_of(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def columns_of(conn: sqlite3.Connection, table: str) -> set[str]:
    return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}  # table: a literal of ours


class TextDecoder:
    """SQLite text -> str (a ``text_factory``): invalid UTF-8 (a damaged or hostile export) becomes
    U+FFFD instead of an error, and is counted so the reader can say so."""

    def __init__(self) -> None:
        self.replaced = 0

    def __call__(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.replaced += 1
            return raw.decode("utf-8", "replace")


def fetch_texts(conn: sqlite3.Connection, sql: str, params: tuple = ()) -> list:
    """``fetchall`` of a query returning many texts (an export's NVTX ranges: tens of thousands): decoded by
    sqlite3 itself first (strict UTF-8, no Python call per value); only a file with invalid UTF-8 is read
    again through the connection's ``TextDecoder``, which replaces and counts."""
    factory = conn.text_factory
    conn.text_factory = str
    try:
        return conn.execute(sql, params).fetchall()
    except sqlite3.OperationalError as exc:
        if "decode" not in str(exc):
            raise
    finally:
        conn.text_factory = factory
    return conn.execute(sql, params).fetchall()


def check_export(conn: sqlite3.Connection, path: Path) -> set[str]:
    """Fail with one clear line unless this SQLite file is an nsys export holding kernels."""
    try:
        tables = tables_of(conn)
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{path}: not a readable SQLite file ({exc})") from None
    if KERNEL_TABLE not in tables:
        hint = f"no {KERNEL_TABLE} table"
        if not tables & {"StringIds", "META_DATA_EXPORT", "TARGET_INFO_SESSION_START_TIME"}:
            raise InputError(f"{path}: SQLite file but not an Nsight Systems export ({hint})")
        raise InputError(f"{path}: Nsight Systems export without GPU kernels ({hint}; was CUDA trace on?)")
    if "StringIds" not in tables or not {"id", "value"} <= columns_of(conn, "StringIds"):
        raise InputError(f"{path}: Nsight Systems export without a StringIds(id, value) table; "
                         "kernel names cannot be read")
    missing = [c for c in KERNEL_REQUIRED if c not in columns_of(conn, KERNEL_TABLE)]
    if missing:
        raise InputError(f"{path}: {KERNEL_TABLE} has no {', '.join(missing)} column: not an export kbase can read")
    return tables


def capture_end(conn: sqlite3.Connection, tables: set[str]) -> int | None:
    """The session's stop time (ns on the capture clock) when the export records one."""
    if "ANALYSIS_DETAILS" not in tables or "stopTime" not in columns_of(conn, "ANALYSIS_DETAILS"):
        return None
    row = conn.execute("SELECT max(stopTime) FROM ANALYSIS_DETAILS WHERE typeof(stopTime) = 'integer'").fetchone()
    stop = row[0] if row else None
    return stop if isinstance(stop, int) and 0 < stop < 1 << 62 else None


def _is_int(col: str) -> str:
    return f"typeof({col}) = 'integer'"


def _flaw_conditions(kcols: set[str], stop_ns: int | None) -> list[str]:
    """One SQL condition per :data:`KERNEL_FLAWS` bit (bit 256 is decided by the reader)."""
    both = f"{_is_int('start')} AND {_is_int('end')}"
    return [
        f"NOT {_is_int('start')}",
        f"NOT {_is_int('end')}",
        f"{both} AND end < start",
        f"{_is_int('start')} AND start < 0",
        f"NOT ({_is_int('deviceId')} AND deviceId BETWEEN 0 AND 255)",
        f"NOT ({_is_int('demangledName')} AND demangledName BETWEEN 0 AND {U32})",
        f"{both} AND end > {_stop_limit(stop_ns)}" if stop_ns else "0",
        f"{both} AND end - start > {MAX_KERNEL_NS}",
    ]


def _stop_limit(stop_ns: int) -> int:
    # GPU work is flushed a little after the session stops: allow 10% and one second.
    return int(stop_ns + stop_ns // 10 + 1_000_000_000)


def kernel_exprs(kcols: set[str], stop_ns: int | None, strict: bool = False) -> list[str]:
    """start (or -1 for a row not to trust), end, process/device key, launch key, name key.

    Kept to plain comparisons and bit operations: these run on every row of exports with
    millions of kernels (a ``typeof()`` per column would double the read time). A NULL makes the
    validity test NULL, which the CASE treats as false; NULLs left in the other columns belong to
    such rows and are zero-filled by :func:`kbase.readers.sqlite_columns.bulk_int_columns`. Text or
    fractional values (a damaged export) can pass plain comparisons; the reader then reads again
    with ``strict``: validity by ``typeof()`` and every column forced to an integer.
    """
    if strict:
        valid = [f"NOT ({cond})" for cond in _flaw_conditions(kcols, stop_ns)]
    else:
        valid = ["start >= 0", "end >= start", f"end - start <= {MAX_KERNEL_NS}", "deviceId BETWEEN 0 AND 255",
                 f"demangledName BETWEEN 0 AND {U32}"]
        if stop_ns:
            valid.append(f"end <= {_stop_limit(stop_ns)}")
    # A row without globalPid, or with a negative one, gets NULL_PID (or'ed in: bit 63 shifted down
    # to bit 24): no real process, and no runtime row matches it.
    pid = (f"coalesce(((globalPid >> {PID_SHIFT}) & {PID_MASK}) | ((globalPid >> 39) & {NULL_PID}), {NULL_PID})"
           if "globalPid" in kcols else "0")
    launch = "-1"
    if "correlationId" in kcols:
        launch = f"CASE WHEN correlationId BETWEEN 0 AND {U32} THEN {pid} << 32 | correlationId ELSE -1 END"
    short = f"coalesce(shortName & {U32}, {U32})" if "shortName" in kcols else str(U32)
    return [
        f"CASE WHEN {' AND '.join(valid)} THEN start ELSE -1 END",
        "end | 0" if strict else "end",  # bit operations always yield integers (or NULL)
        f"{pid} << 8 | deviceId",  # one key per (process, device)
        launch,
        f"demangledName << 32 | {short}",
    ]


def kernel_raw(kcols: set[str], stop_ns: int | None) -> Derive:
    """:func:`kernel_exprs` (the fast ones) computed in numpy from the plain columns: the columns to read
    and the function from one batch's columns and NULL masks to the five arrays, value for value.
    SQLite semantics kept: a NULL makes a comparison false and an arithmetic result NULL (read as 0);
    shifts are on int64 (left: wrapping, right: arithmetic)."""
    cols = list(KERNEL_REQUIRED) + [c for c in ("globalPid", "correlationId", "shortName") if c in kcols]
    at = {c: i for i, c in enumerate(cols)}
    limit = _stop_limit(stop_ns) if stop_ns else None

    def derive(v: list[np.ndarray], nulls: list[np.ndarray | None]) -> list[np.ndarray]:
        col = {c: v[i] for c, i in at.items()}
        null: dict[str, np.ndarray] = {}  # NULL masks of the columns with a NULL (read as 0 in ``col``)
        for c, i in at.items():
            mask = nulls[i]
            if mask is not None:
                null[c] = mask
        start, end, device, name = (col[c] for c in KERNEL_REQUIRED)
        n = len(start)
        valid = (start >= 0) & (end >= start) & (end - start <= MAX_KERNEL_NS) & (device >= 0) & (device <= 255)
        valid &= (name >= 0) & (name <= U32)
        if limit is not None:
            valid &= end <= limit
        for c in KERNEL_REQUIRED:
            if c in null:
                valid &= ~null[c]
        pid = np.zeros(n, dtype=np.int64)
        if "globalPid" in col:
            pid = ((col["globalPid"] >> PID_SHIFT) & PID_MASK) | ((col["globalPid"] >> 39) & NULL_PID)
            if "globalPid" in null:
                pid[null["globalPid"]] = NULL_PID
        gpu = (pid << 8) | device
        launch = np.full(n, -1, dtype=np.int64)
        if "correlationId" in col:
            corr = col["correlationId"]
            ok = (corr >= 0) & (corr <= U32)
            if "correlationId" in null:
                ok &= ~null["correlationId"]
            launch = np.where(ok, (pid << 32) | corr, -1)
        short = col["shortName"] & U32 if "shortName" in col else np.full(n, U32, dtype=np.int64)
        if "shortName" in null:
            short[null["shortName"]] = U32
        key = (name << 32) | short
        for c, out in (("deviceId", gpu), ("demangledName", key)):  # NULL operand: NULL result, read as 0
            if c in null:
                out[null[c]] = 0
        return [np.where(valid, start, -1), end, gpu, launch, key]

    return cols, derive


def kernel_flaw_counts(conn: sqlite3.Connection, kcols: set[str], stop_ns: int | None) -> dict[int, int]:
    """{flaw bits: rows} over the rows :func:`kernel_exprs` marked invalid (a second scan, run only
    when there are such rows)."""
    conds = _flaw_conditions(kcols, stop_ns)
    exprs = [" | ".join(f"(({c}) << {i})" for i, c in enumerate(conds)), "count(*)"]
    table = KERNEL_TABLE
    return {int(bits): int(n) for bits, n in conn.execute(f"SELECT {', '.join(exprs)} FROM {table} GROUP BY 1")}


def runtime_exprs(rcols: set[str], strict: bool = False) -> list[str] | None:
    """launch key, thread, start of each runtime call; None when the table cannot be joined.
    ``strict``: every column forced to an integer (a damaged export, see :func:`kernel_exprs`)."""
    if not {"correlationId", "start"} <= rcols:
        return None
    # NULL_PID + 1 without globalTid: never equal to a kernel's key, with or without a process.
    pid = f"coalesce((globalTid >> {PID_SHIFT}) & {PID_MASK}, {NULL_PID + 1})" if "globalTid" in rcols else "0"
    tid = "globalTid | 0" if strict else "globalTid"
    start = f"CASE WHEN {_is_int('start')} AND start >= 0 THEN start ELSE -1 END" if strict else "start"
    return [
        f"CASE WHEN correlationId BETWEEN 0 AND {U32} THEN {pid} << 32 | correlationId ELSE -2 END",
        f"coalesce({tid}, -1)" if "globalTid" in rcols else "-1",
        f"coalesce({start}, -1)",
    ]


def runtime_raw(rcols: set[str]) -> Derive:
    """:func:`runtime_exprs` (the fast ones) computed in numpy from the plain columns (see :func:`kernel_raw`)."""
    cols = ["correlationId", "start"] + (["globalTid"] if "globalTid" in rcols else [])

    def derive(v: list[np.ndarray], nulls: list[np.ndarray | None]) -> list[np.ndarray]:
        corr, start = v[0], v[1]
        n = len(corr)
        tid = np.full(n, -1, dtype=np.int64)
        pid = np.zeros(n, dtype=np.int64)
        if len(v) > 2:
            pid = (v[2] >> PID_SHIFT) & PID_MASK
            tid = v[2].copy()
            if nulls[2] is not None:
                pid[nulls[2]] = NULL_PID + 1
                tid[nulls[2]] = -1
        ok = (corr >= 0) & (corr <= U32)
        if nulls[0] is not None:
            ok &= ~nulls[0]
        start = start if nulls[1] is None else np.where(nulls[1], -1, start)
        return [np.where(ok, (pid << 32) | corr, -2), tid, start]

    return cols, derive


def strings(conn: sqlite3.Connection, ids: np.ndarray) -> dict[int, str]:
    """The texts of StringIds ``ids``, looked up by id (an export's table holds every NVTX and API string too:
    ~20k rows in a 2 MB FSDP export, of which a leaderboard needs its kernels' few hundred)."""
    from kbase.readers.sqlite_columns import without_rowid

    wanted = sorted(set(ids.tolist()))
    out: dict[int, str] = {}
    # (rowid order: of two rows with one id the later one wins; a WITHOUT ROWID table's key orders its rows)
    by_rowid = not without_rowid(conn, "StringIds")
    for lo in range(0, len(wanted), 500):  # (SQLite's parameter limit is 999 in old builds)
        part = wanted[lo : lo + 500]
        sql = f"SELECT id, {capped_sql('value')} FROM StringIds WHERE id IN ({', '.join('?' * len(part))})"
        if by_rowid:
            sql += " ORDER BY rowid"
        for sid, value in conn.execute(sql, part):
            if value is not None:
                check_name(value, "kernel name")
                # nsys writes text; a BLOB or number is still the name it holds
                out[sid] = value if isinstance(value, str) else _as_text(value)
    return out


def _as_text(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def meta(conn: sqlite3.Connection, tables: set[str]) -> dict[str, str]:
    # Older exporters name the table EXPORT_META_DATA.
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):
        if table in tables and {"name", "value"} <= columns_of(conn, table):
            # (a value past the cap is left out: the reader uses a few short ones, and is told nothing wrong)
            rows = conn.execute(f"SELECT {capped_sql('name')}, {capped_sql('value')} FROM {table}")
            return {str(name): clean_text(str(value)) for name, value in rows
                    if value is not None and len(str(name)) <= MAX_NAME_CHARS and len(str(value)) <= MAX_NAME_CHARS}
    return {}


def gpu_models(conn: sqlite3.Connection, tables: set[str]) -> dict[int, str]:
    for table, id_col in (("TARGET_INFO_GPU", "id"), ("TARGET_INFO_CUDA_DEVICE", "cudaId")):
        if table in tables and {id_col, "name"} <= columns_of(conn, table):
            sql = (f"SELECT id, {capped_sql('name')} FROM TARGET_INFO_GPU" if id_col == "id"
                   else f"SELECT cudaId, {capped_sql('name')} FROM TARGET_INFO_CUDA_DEVICE")
            return {i: clean_text(str(check_name(n, "GPU name"))) for i, n in conn.execute(sql) if type(i) is int and n}
    return {}


def read_nvtx(conn: sqlite3.Connection, tables: set[str], extra: dict) -> RangeColumns:
    """NVTX push/pop and start/end ranges; ranges with broken timestamps are counted and left out."""
    if "NVTX_EVENTS" not in tables:
        return RangeColumns.empty()
    cols = columns_of(conn, "NVTX_EVENTS")
    if not {"start", "eventType"} <= cols:
        add_note(extra, "NVTX_EVENTS has no start or eventType column: its ranges were ignored")
        return RangeColumns.empty()
    # Exporters name a range in ``text`` or through ``textId`` (StringIds); either may be absent.
    text = "e.text" if "text" in cols else "NULL"
    text_id = "textId" in cols
    table = "NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId" if text_id else "NVTX_EVENTS e"
    end_ok = (f"(e.end IS NULL OR ({_is_int('e.end')} AND e.end >= e.start))" if "end" in cols else "1")
    exprs = [
        f"CASE WHEN {_is_int('e.start')} AND e.start >= 0 AND {end_ok} THEN e.start ELSE -1 END",
        f"CASE WHEN {_is_int('e.end')} THEN e.end ELSE -1 END" if "end" in cols else "-1",
        "e.eventType",
        f"CASE WHEN {_is_int('e.globalTid')} THEN e.globalTid ELSE -1 END" if "globalTid" in cols else "-1",
        capped_sql(f"coalesce({text}, s.value)" if text_id else text),
    ]
    rows = fetch_texts(conn, f"SELECT {', '.join(exprs)} FROM {table} WHERE e.eventType IN (?, ?)",
                       (NVTX_PUSHPOP, NVTX_STARTEND))
    if not rows:
        return RangeColumns.empty()
    start, end, kind, tid = (np.fromiter(col, dtype=np.int64, count=len(rows)) for col in list(zip(*rows))[:4])
    keep = start >= 0
    if not keep.all():
        add_note(extra, f"ignored {int((~keep).sum()):,} of {len(rows):,} NVTX ranges with a missing or invalid "
                        "start/end")
    picked = np.flatnonzero(keep)
    start, end, kind, tid = start[picked], end[picked], kind[picked], tid[picked]
    # process key: the thread key without its thread bits (as launch_tid >> 24)
    pid = np.where(tid >= 0, tid >> PID_SHIFT, -1)
    # start/end ranges are not bound to a thread: any thread of the process may launch inside them.
    tid[kind == NVTX_STARTEND] = -1
    names = _range_names([rows[i][4] for i in picked.tolist()])
    return RangeColumns(start=start, end=end, tid=tid, pid=pid, name=names)


def _range_names(values: list) -> np.ndarray:
    """Names as clean str (object array): NULL -> "", a BLOB or number -> its text; each distinct value
    is cleaned once."""
    def as_text(v) -> str:
        return "" if v is None else clean_text(v if isinstance(v, str) else _as_text(v))

    out = np.empty(len(values), dtype=object)
    distinct = list(dict.fromkeys(values))
    for v in distinct:
        check_name(v, "NVTX range name")
    if all(type(v) is str for v in distinct):
        joined = "".join(distinct)  # one scan in C, not a call per name: plain ASCII names need no cleaning
        if joined.isascii() and "\x00" not in joined:
            out[:] = values
            return out
    mapping = {v: as_text(v) for v in distinct}
    out[:] = [mapping[v] for v in values]
    return out

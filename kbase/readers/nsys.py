"""Reader for Nsight Systems SQLite exports (``nsys export --type sqlite``), schemas 3.11 to 3.25.

The file is opened through SQLite's read-only, immutable URI mode: no journal, no lock file and
no write can touch the user's export (and it works on read-only media). An export with committed
rows still in a ``-wal`` file (or a hot ``-journal``) is read through a private temporary copy
(:mod:`kbase.readers.sqlite_source`). Kernel rows with missing or impossible fields are counted,
excluded and noted, or the file is refused past a threshold (:mod:`kbase.readers.integrity`).

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

import functools
import sqlite3
from pathlib import Path

import numpy as np

from kbase.errors import InputError
from kbase.readers import sqlite_pages
from kbase.readers.integrity import NameTooLong, add_note, clean_names, clean_text, invalid_rows_note
from kbase.readers.nsys_activities import read_activity_rows, read_syncs
from kbase.readers.nsys_capture import capture_facts
from kbase.readers.nsys_launches import LaunchTable, join_launches
from kbase.readers.nsys_sql import (
    KERNEL_FLAWS,
    KERNEL_TABLE,
    NULL_PID,
    RUNTIME_TABLE,
    U32,
    TextDecoder,
    capture_end,
    check_export,
    columns_of,
    gpu_models,
    kernel_exprs,
    kernel_flaw_counts,
    kernel_raw,
    meta,
    read_nvtx,
    runtime_exprs,
    runtime_raw,
    strings,
)
from kbase.readers.profile import ActivityColumns, GpuColumns, KernelColumns, Profile, name_codes
from kbase.readers.sqlite_columns import Derive, NotIntegers, bulk_int_columns, factorize_sorted
from kbase.readers.sqlite_pages import Assist
from kbase.readers.sqlite_source import committed_export, connect_readonly
from kbase.readers.threads import reader_threads

__all__ = ["check_export", "connect_readonly", "read_nsys"]

# When SQLite reads the kernel table (its pages not sure to decode: ``sqlite_columns.bulk_int_columns``), it
# reads this many rowid ranges at once, beside the runtime table: on 2 cores 1M kernels in 0.31 s instead of
# 0.39 s. Decoded pages take one thread per table.
KERNEL_PARTS = 2


def _bulk_or_strict(path: Path, table: str, exprs: list[str], strict_exprs: list[str],
                    progress=None, raw: Derive | None = None, parts: int = 1, pages: bool = True,
                    assist: Assist | None = None) -> list[np.ndarray]:
    """:func:`bulk_int_columns` with the fast expressions (or their ``raw`` numpy twin, from the file's pages
    when ``pages``); again with the strict ones when the table holds text or fractional numbers (only damaged
    exports pay for the second scan)."""
    try:
        return bulk_int_columns(path, table, exprs, progress, raw, parts, pages=pages, assist=assist)
    except NotIntegers:
        return bulk_int_columns(path, table, strict_exprs, parts=parts)


def read_nsys(path: Path, progress=None, label: Path | None = None) -> Profile:
    """Read an export; ``path`` is only ever read (see :mod:`kbase.readers.sqlite_source`).
    Messages and ``profile.source`` name ``label`` (default ``path``): the user's file when
    ``path`` is an export kbase made of it."""
    label = path if label is None else label
    try:
        with committed_export(path) as readable:
            conn = connect_readonly(readable)
            conn.text_factory = TextDecoder()
            try:
                profile = _read(conn, readable, label, progress)
            finally:
                conn.close()
    except InputError:
        raise
    except NotIntegers as exc:
        raise InputError(f"{label}: damaged export: {exc} holds text or fractional numbers "
                         "where nsys writes integers") from None
    except NameTooLong as exc:
        raise InputError(f"{label}: {exc}") from None
    except OSError as exc:
        raise InputError(f"{label}: damaged or truncated SQLite export ({exc})") from None
    except sqlite3.DatabaseError as exc:
        raise InputError(f"{label}: damaged or truncated SQLite export ({exc})") from None
    except Exception as exc:  # ADBC/Arrow errors while scanning a damaged file
        if type(exc).__module__.startswith(("adbc", "pyarrow")):
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"{label}: damaged or truncated SQLite export ({first})") from None
        raise
    profile.source = label
    return profile


def _read(conn: sqlite3.Connection, db: Path, label: Path, progress) -> Profile:
    """Read the export at ``db``; messages name ``label`` (the user's file)."""
    from kbase.readers.threads import Pool

    extra: dict = {}
    tables = check_export(conn, label)
    kcols, stop_ns = columns_of(conn, KERNEL_TABLE), capture_end(conn, tables)
    kexprs = [kernel_exprs(kcols, stop_ns), kernel_exprs(kcols, stop_ns, strict=True)]
    rcols = columns_of(conn, RUNTIME_TABLE) if RUNTIME_TABLE in tables else set()
    rexprs = runtime_exprs(rcols)
    # Two tables on their own threads (numpy and ADBC release the GIL) while a core is idle (``reader_threads``),
    # the kernel table as KERNEL_PARTS rowid ranges if SQLite reads it; else one after the other. The runtime
    # table's thread, once done, helps decode the kernel table's pages; with KBASE_SQLITE_PAGES=0 SQLite reads
    # both tables.
    pages = sqlite_pages.enabled()
    assist = Assist() if pages else None
    threads = reader_threads()
    with Pool(threads) as pool:
        kf = pool.submit(_bulk_or_strict, db, KERNEL_TABLE, kexprs[0], kexprs[1], progress, kernel_raw(kcols, stop_ns),
                         KERNEL_PARTS if threads > 1 else 1, pages, assist)
        strict_rexprs = runtime_exprs(rcols, strict=True)
        rf = (pool.submit(_runtime_index, db, [rexprs, strict_rexprs], runtime_raw(rcols), pages, assist)
              if rexprs and strict_rexprs else None)
        columns = kf.result()
        del kf  # the future holds the list too: gpu_key and name_key must die with it below
        if len(columns[0]) == 0:
            raise InputError(f"{label}: the export's kernel table is empty (no GPU kernels were captured)")
        flaw_counts = functools.partial(kernel_flaw_counts, conn, kcols, stop_ns)
        start, end, gpu_key, launch_key, name_key = _valid_rows(label, columns, flaw_counts, extra)
        columns.clear()
        # Narrow the per-kernel keys to int32 codes while the runtime table is still being read.
        gpu, pairs = factorize_sorted(gpu_key)  # (process, device) pairs in sorted order: the GPU index
        del gpu_key
        codes, name_ids = factorize_sorted(name_key, shift=32)  # demangledName ids
        short_ids = np.zeros(len(name_ids), dtype=np.int64)  # each name's shortName id
        for i in range(0, len(codes), 1 << 20):
            short_ids[codes[i : i + (1 << 20)]] = name_key[i : i + (1 << 20)] & U32
        del name_key
        # memcpy/memset rows (small tables) join their launch calls in the kernels' lookup
        a_start, a_end, a_gpu_key, a_launch, a_kind = read_activity_rows(conn, tables)
        n_kernels = len(launch_key)
        if len(a_launch):
            launch_key = np.concatenate([launch_key, a_launch])
        runtime = rf.result() if rf is not None else None
        # Each kernel's launch call (numpy) on the pool's thread while this one reads the GPUs and names (SQLite).
        joined = pool.submit(join_launches, [launch_key], runtime)
        del launch_key, runtime

        # GPU index: one per (process, device) pair, in a stable order.
        models = gpu_models(conn, tables)
        devices = (pairs & 0xFF).astype(np.int32)
        gpus = GpuColumns(gpu=np.arange(len(pairs), dtype=np.int32), pid=(pairs >> 8).astype(np.int64),
                          device=devices, model=[models.get(int(d), "unknown") for d in devices])

        texts = strings(conn, np.concatenate([name_ids, short_ids]))
        names, n_fixed = clean_names(texts.get(int(i), f"<unnamed kernel {int(i)}>") for i in name_ids)
        if n_fixed:
            add_note(extra, f"{n_fixed} kernel name(s) held characters no output can carry (NUL, lone surrogates): "
                            "shown with U+FFFD")
        # Two StringIds can hold the same text (seen across processes): the names are the distinct texts, sorted.
        distinct, code_of_key = name_codes(names)
        name = code_of_key[codes]
        del codes
        short_names = {n: clean_text(texts.get(int(sid), "")) for n, sid in zip(names, short_ids)}
        ranges = read_nvtx(conn, tables, extra)
        if conn.text_factory.replaced:
            add_note(extra, f"{conn.text_factory.replaced} text value(s) of the export were not valid UTF-8: "
                            "shown with U+FFFD")
        info = meta(conn, tables)
        extra["capture"] = capture_facts(conn, tables)  # how the capture began, its session: ``analysis.span``
        syncs = read_syncs(conn, tables)
        launch_tid, launch_start = joined.result()
        del joined
        activities = _activities(pairs, a_start, a_end, a_gpu_key, a_kind, launch_tid[n_kernels:],
                                 launch_start[n_kernels:])
        launch_tid, launch_start = launch_tid[:n_kernels], launch_start[:n_kernels]
    kernels = KernelColumns(start=start, end=end, gpu=gpu, name=name, names=distinct, launch_tid=launch_tid,
                            launch_start=launch_start)
    version = info.get("EXPORT_PRODUCT_VERSION", "unknown")
    schema = info.get("EXPORT_SCHEMA_VERSION")
    exporter = f"nsys {version}" + (f" (schema {schema})" if schema else "")
    return Profile(
        source=label,
        format="nsys-sqlite",
        exporter_version=exporter,
        columns=kernels,
        range_columns=ranges,
        gpu_columns=gpus,
        short_names=short_names,
        extra=extra,
        activities=activities,
        syncs=syncs,
    )


def _activities(pairs: np.ndarray, start: np.ndarray, end: np.ndarray, gpu_key: np.ndarray, kind: np.ndarray,
                launch_tid: np.ndarray, launch_start: np.ndarray) -> ActivityColumns:
    """The memcpy/memset rows on the profile's GPUs (a (process, device) pair that ran no kernel is no GPU of
    the profile: its copies are left out), by start."""
    if not len(start) or not len(pairs):
        return ActivityColumns.empty()
    pos = np.minimum(np.searchsorted(pairs, gpu_key), len(pairs) - 1)
    keep = pairs[pos] == gpu_key
    order = np.argsort(start[keep], kind="stable")
    return ActivityColumns(start=start[keep][order], end=end[keep][order], gpu=pos[keep][order].astype(np.int32),
                           kind=kind[keep][order], launch_start=launch_start[keep][order].copy(),
                           launch_tid=launch_tid[keep][order].copy())


def _valid_rows(label: Path, columns: list[np.ndarray], flaw_counts, extra: dict) -> list[np.ndarray]:
    """The kernel columns without the rows :func:`kernel_exprs` marked invalid, counted in a note
    (or an error past the threshold). One comparison over all rows; the reasons are counted by a
    second query (``flaw_counts``) only when some row is invalid."""
    start, gpu_key = columns[0], columns[2]
    n_rows = len(start)
    bad = start < 0
    # Rows without a process id would make a phantom GPU of "process 0" — unless no row has one.
    no_pid = gpu_key >= NULL_PID << 8  # (gpu_key >> 8) >= NULL_PID, without an int64 temporary
    n_no_pid = int(np.count_nonzero(no_pid & ~bad))
    if n_no_pid == int(np.count_nonzero(~bad)):
        gpu_key &= 0xFF  # no valid row names its process: one process, as in exports without globalPid
        n_no_pid = 0
    elif n_no_pid:
        bad |= no_pid
    del no_pid
    n_bad = int(np.count_nonzero(bad))
    if n_bad == 0:
        return columns
    reasons: dict[str, int] = {}
    for bits, n in (flaw_counts() if n_bad > n_no_pid else {}).items():
        for bit, why in KERNEL_FLAWS.items():
            if bits & bit:
                reasons[why] = reasons.get(why, 0) + n
    if n_no_pid:
        reasons[KERNEL_FLAWS[256]] = n_no_pid
    note = invalid_rows_note(str(label), "kernel rows", n_bad, n_rows, reasons)
    if note:
        add_note(extra, note)
    keep = ~bad
    return [c[keep] for c in columns]


def _runtime_index(path: Path, exprs: list[list[str]], raw: Derive | None = None, pages: bool = True,
                   assist: Assist | None = None) -> list:
    """The runtime table as [launch index, thread, start]: done on the reader thread while the kernel table
    is still streaming, so the join after it is one lookup per kernel. ``exprs``: the fast and the strict
    expressions. The index is a :class:`LaunchTable` when correlation ids are compact (as CUPTI numbers
    them: a counter per process), else the keys sorted (with the thread and start in that order)."""
    r_key, r_tid, r_start = _bulk_or_strict(path, RUNTIME_TABLE, exprs[0], exprs[1], raw=raw, pages=pages)
    if assist is not None:
        assist.offer()
    table = LaunchTable.build(r_key)
    if table is not None:
        return [table, r_tid, r_start]
    # Runtime rows come nearly sorted by (pid, correlationId): the stable sort (timsort) is cheap.
    order = np.argsort(r_key, kind="stable")
    r_key = r_key[order]
    r_tid = r_tid[order]
    r_start = r_start[order]
    return [r_key, r_tid, r_start]

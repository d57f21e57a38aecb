"""Fixed-work captures: Nsight Systems SQLite exports of programs that do a fixed amount of work and carry no
iteration markers (a solver, a benchmark, a test), for the unit of comparison (``comparison.work``).

One process on one GPU runs the program once: host work before the first launch and after the last (the
whole program is captured), then each kernel's launches interleaved in program order, a launch every
``host_gap_ns`` of host time, optionally a host-only pause in the middle (loading, checkpointing: the GPU
idles). A kernel's per-launch work may change along the run: launch ``k`` of ``n`` lasts ``first_ns`` scaled
geometrically towards ``last_ns`` (Gaussian elimination: each launch works on a smaller matrix than the one
before). A ``slowdown`` may itself trend: ``(first, last)`` factors, interpolated along the launches.

Noise: each launch lognormal with relative sd ``jitter`` (hash of seed, kernel and ordinal), and per capture
a process-level factor per kernel with relative sd ``run_sd`` (clocks, placement: between-process noise).
``slice_ns``: only the launches starting in that much time from the middle of the run are kept (a slice of a
steady state: a ``--delay``/``--duration`` capture of a long job, its session that slice).

The capture (``capture``), as ``readers.nsys_capture`` reads it: ``"program"`` — nsys launched the program and
collected from its start to its exit (``START_TRIGGER`` ``Immediate``, the session from the process's start to
``host_tail_ns`` after its last kernel); ``"range"`` — the program's own ``cudaProfilerStart``/``Stop`` range
(``CudaProfilerApi``); ``"none"`` — no capture settings and no session in the export (an older exporter).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kbase.synth.generate import ExportSpec
from kbase.synth.nsys_schema import SCHEMA, SESSION_SCHEMA, crc, ddl, global_pid, global_tid, write_target_info


@dataclass(frozen=True)
class FixedKernel:
    name: str  # the demangled name
    short_name: str
    launches: int
    first_ns: float  # the first launch's duration
    last_ns: float | None = None  # the last launch's (None: as the first): per-launch work along the run
    jitter: float = 0.02


@dataclass
class FixedWorkSpec:
    kernels: list[FixedKernel]
    seed: int = 0
    slowdown: dict[str, float | tuple[float, float]] = field(default_factory=dict)  # by name; (first, last): a trend
    host_gap_ns: int = 4_000  # host time between launches
    host_lead_ns: int = 200_000_000  # host work before the first launch (start-up: the whole program is captured)
    host_tail_ns: int = 50_000_000
    pause_ns: int = 0  # a host-only pause half-way through the launches (the GPU idles)
    jitter_scale: float = 1.0
    run_sd: float = 0.003  # between-process relative sd per kernel
    slice_ns: int | None = None  # keep only launches starting in this much time around the run's middle
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    capture: str = "program"  # "program", "range" (cudaProfilerStart/Stop), "none" (module doc)


PROCESS_START_NS = 1_500_000_000  # the program's start on the capture clock


def _durations(k: FixedKernel, factor: float | tuple[float, float], seed: int, run_sd: float,
               jitter_scale: float) -> np.ndarray:
    n = k.launches
    pos = np.arange(n) / max(n - 1, 1)
    last = k.first_ns if k.last_ns is None else k.last_ns
    work = k.first_ns * (last / k.first_ns) ** pos
    lo, hi = factor if isinstance(factor, tuple) else (factor, factor)
    rng = np.random.default_rng([seed, crc(k.name)])
    process = float(np.exp(rng.normal(0.0, run_sd)))
    sd = k.jitter * jitter_scale
    noise = np.exp(rng.normal(0.0, sd, n) - sd * sd / 2)
    return np.maximum(1, np.rint(work * (lo + (hi - lo) * pos) * noise * process)).astype(np.int64)


def _program_order(kernels: list[FixedKernel]) -> tuple[np.ndarray, np.ndarray]:
    """(kernel index, its ordinal) of every launch in program order: each kernel's launches spread evenly."""
    which = np.concatenate([np.full(k.launches, i) for i, k in enumerate(kernels)])
    ordinal = np.concatenate([np.arange(k.launches) for k in kernels])
    place = np.concatenate([(np.arange(k.launches) + 0.5) / k.launches for k in kernels])
    order = np.lexsort((which, place))
    return which[order], ordinal[order]


def generate_fixed_work(path: str | os.PathLike, spec: FixedWorkSpec, *, overwrite: bool = False) -> Path:
    """Write the capture at ``path`` (refused when it exists, unless ``overwrite``); returns the path."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} exists (pass overwrite=True to replace it)")
    if not spec.kernels or any(k.launches < 1 or k.first_ns < 1 for k in spec.kernels):
        raise ValueError("kernels need launches >= 1 and first_ns >= 1")
    if spec.capture not in ("program", "range", "none"):
        raise ValueError(f"capture must be program, range or none, not {spec.capture!r}")
    tmp = path.with_name(path.name + ".partial")
    tmp.unlink(missing_ok=True)
    durs = [_durations(k, spec.slowdown.get(k.name, 1.0), spec.seed, spec.run_sd, spec.jitter_scale)
            for k in spec.kernels]
    which, ordinal = _program_order(spec.kernels)
    pid = 1000
    gpid, gtid = global_pid(pid), global_tid(pid, pid)
    strings = {"cudaLaunchKernel_v7000": 1, "python3": 2}
    if spec.capture == "range":  # interned once the program calls it
        strings["cudaProfilerStart_v4000"] = 3
    for k in spec.kernels:
        strings.setdefault(k.name, len(strings) + 1)
        strings.setdefault(k.short_name, len(strings) + 1)
    t = PROCESS_START_NS + spec.host_lead_ns
    gpu_free = t
    krows, rrows = [], []
    half = len(which) // 2
    for j, (i, o) in enumerate(zip(which.tolist(), ordinal.tolist())):
        if j == half and spec.pause_ns:
            t = max(t, gpu_free) + spec.pause_ns
        call_end = t + 5_000
        start = max(call_end + 1_000, gpu_free)
        end = start + int(durs[i][o])
        gpu_free = end
        k = spec.kernels[i]
        corr = 1_438_000 + j
        rrows.append((t, call_end, corr, 1))
        krows.append((start, end, corr, 75_000 + j, 7, strings[k.name], strings[k.short_name], strings[k.name]))
        t = call_end + spec.host_gap_ns
    session = (PROCESS_START_NS, krows[-1][1] + spec.host_tail_ns)
    if spec.slice_ns is not None:
        mid = (krows[0][0] + krows[-1][1]) // 2
        lo, hi = mid - spec.slice_ns // 2, mid + spec.slice_ns // 2
        keep = [lo <= r[0] < hi for r in krows]
        krows = [r for r, k in zip(krows, keep) if k]
        rrows = [r for r, k in zip(rrows, keep) if k]
        session = (lo, hi)
    if spec.capture == "range":  # the program opens its range just before its first launch
        rrows.insert(0, (rrows[0][0] - 20_000, rrows[0][0] - 10_000, 1_437_999, strings["cudaProfilerStart_v4000"]))
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for table in SCHEMA:
            conn.execute(ddl(table))
        if spec.capture != "none":
            _write_session(conn, spec, session)

        def ins(table: str, rows: list[tuple]) -> None:
            conn.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * len(SCHEMA[table]))})", rows)

        ins("StringIds", [(i, s) for s, i in strings.items()])
        write_target_info(conn, ins, ExportSpec(n_gpus=1, gpu_model=spec.gpu_model, seed=spec.seed))
        ins("PROCESSES", [(gpid, pid, "python3")])
        ins("ThreadNames", [(2, 20, gtid)])
        ins("TARGET_INFO_CUDA_STREAM", [(7, 0, 1, pid, 1, 0, 2)])
        conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start,end,correlationId,gridId,streamId,"
                         "demangledName,shortName,mangledName,registersPerThread,gridX,gridY,gridZ,blockX,blockY,"
                         "blockZ,staticSharedMemory,dynamicSharedMemory,sharedMemoryExecuted,clusterX,clusterY,"
                         "clusterZ,deviceId,contextId,greenContextId,globalPid,launchType,cacheConfig,"
                         "localMemoryPerThread,localMemoryTotal,sharedMemoryLimitConfig,clusterSchedulingPolicy,"
                         "maxPotentialClusterSize,maxActiveClusters,tensorSizeMinusOneElements) VALUES "
                         f"(?,?,?,?,?,?,?,?,32,128,1,1,256,1,1,0,0,0,0,0,0,0,1,0,{gpid},1,1,0,0,0,0,0,0,'[]')",
                         krows)
        conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start,end,correlationId,nameId,eventClass,"
                         f"globalTid,returnValue) VALUES (?,?,?,?,0,{gtid},0)", rrows)
        conn.execute("COMMIT")
    finally:
        conn.close()
    os.replace(tmp, path)
    return path


def _write_session(conn: sqlite3.Connection, spec: FixedWorkSpec, session: tuple[int, int]) -> None:
    """``ANALYSIS_DETAILS`` and ``META_DATA_CAPTURE`` as nsys writes them (module doc)."""
    for table in SESSION_SCHEMA:
        conn.execute(ddl(table))
    lo, hi = session
    conn.execute("INSERT INTO ANALYSIS_DETAILS VALUES (?, ?, ?, ?)", (1 << 48, hi - lo, lo, hi))
    delay_ms = (lo - PROCESS_START_NS) // 1_000_000
    settings = [("START_TRIGGER", "CudaProfilerApi" if spec.capture == "range" else "Immediate"),
                ("STOP_TRIGGER", "Delayed"), ("START_DELAY_MS", str(delay_ms)),
                ("RUN_DURATION_MS", str((hi - lo) // 1_000_000)), ("PROCESS_0:HOW_TO_ATTACH", "LaunchAnother"),
                ("PROCESS_0:COMMAND", "python3")]
    conn.executemany("INSERT INTO META_DATA_CAPTURE VALUES (?, ?)", settings)

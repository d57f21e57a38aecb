"""Write synthetic but faithful Nsight Systems SQLite exports (``nsys export --type sqlite``, 3.x).

The tables written copy the column names, types and order of a real 3.25 export (TARGET_INFO_GPU
from 3.13). Every generated file comes with a :class:`GeneratedTruth`: the answer a reader must
find, aggregated while writing (never a list of rows, so 10M-kernel files stay cheap).

Timing model, per process (one per GPU, pid ``1000+rank``, main thread tid == pid): iteration
``k`` is an NVTX range ``[t0, t1)`` on the main thread. Inside it the thread makes, in order, a
``cudaStreamSynchronize`` (waits for the GPU to drain the previous step), an input
``cudaMemcpyAsync`` and the step's kernel launches (~5 µs runtime rows), with a few non-launch
calls between them. Each kernel runs after its launch returns, queued behind the previous work on
its stream (compute stream; NCCL kernels on a second stream that waits for compute). The GPU lags:
kernels of the last launches of a step start and end after ``t1``, so attribution must follow the
launch (pid + correlationId), not GPU time. Correlation ids restart at the same value in every
process, as CUPTI's do: joining on correlationId alone mixes ranks up.

Per-launch kernel durations come from a counter-based hash of (seed, kernel, rank, iteration,
occurrence), so a knob that changes one kernel (``slowdown``, ``extra_launches``, ``rename``...)
leaves every other kernel's durations identical.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from kbase.errors import InputError
from kbase.synth.names import KernelSpec, default_kernel_mix, scaled_kernel_mix
from kbase.synth.nsys_schema import BATCH, SCHEMA, crc, ddl, global_pid, global_tid, write_target_info
from kbase.synth.timing import API_NAMES, MEMCPY_BYTES, Program, mix64, normal_deviates, program, simulate_step

_U64 = np.uint64

__all__ = ["KernelSpec", "ExportSpec", "KernelTruth", "GeneratedTruth", "GeneratedFileExists",
           "generate_export", "default_kernel_mix", "scaled_kernel_mix", "global_pid", "global_tid"]

@dataclass
class ExportSpec:
    """What to generate. Knobs (``slowdown``, ``extra_launches``, ``drop``, ``rename``) name kernels by
    their ``KernelSpec.name`` in ``kernels + add``; ``rename`` changes the demangled name only."""

    n_gpus: int = 2
    iterations: int = 10
    marker: str = "ProfilerStep#{i}"
    first_step: int = 1
    kernels: list[KernelSpec] = field(default_factory=default_kernel_mix)
    seed: int = 0
    nvtx: bool = True  # False: no NVTX rows at all
    nvtx_table: bool = True  # False: no NVTX_EVENTS table (as nsys without NVTX tracing)
    nvtx_text_ids: bool = False  # marker names through textId (registered strings) instead of text
    marker_event_type: int = 59  # 59 push/pop, 60 start/end
    nested_ranges: bool = True  # forward / backward / optimizer.step push/pop ranges inside each step
    # The capture starts 45% into step 0: its range and the rows that began earlier are not
    # exported; kernels launched before the cut but run after it have no runtime row.
    start_mid_iteration: bool = False
    # Per process, the first N launches of the capture lose their runtime row (kernels kept).
    slice_cuts_launches: int = 0
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    schema_version: str = "3.25.0"
    slowdown: dict[str, float] = field(default_factory=dict)
    extra_launches: dict[str, int] = field(default_factory=dict)
    drop: set[str] = field(default_factory=set)
    add: list[KernelSpec] = field(default_factory=list)
    rename: dict[str, str] = field(default_factory=dict)
    host_delay_ns: int = 0  # per step, CPU time after the synchronize before the input copy (a slow input pipeline)


@dataclass
class KernelTruth:
    count: int
    total_ns: int
    min_ns: int
    max_ns: int


@dataclass
class GeneratedTruth:
    """The known answer for a generated file.

    ``kernels``: every kernel row in the file, by demangled name (``names``: index -> name of the
    arrays below; ``markers[k]``: step ``k``'s range text). ``iter_count``/``iter_total``
    (shape ``n_gpus x iterations x len(names)``): kernels whose launch lies in step ``k``'s exported
    range on rank ``rank``. ``ranges[rank][k] = (start, end)`` for each exported range (also
    filled when ``nvtx=False``: the ranges the steps had). ``unattributed``: kernels without a
    runtime row; ``outside_ranges``: kernels with a launch in no exported range.
    """

    path: Path
    n_gpus: int
    names: list[str]
    kernels: dict[str, KernelTruth]
    iter_count: np.ndarray
    iter_total: np.ndarray
    ranges: dict[int, dict[int, tuple[int, int]]]
    markers: dict[int, str]
    unattributed: int
    outside_ranges: int
    n_kernels: int
    n_runtime: int

    def per_iteration(self, rank: int, k: int) -> dict[str, tuple[int, int]]:
        """``{name: (count, total_ns)}`` of the kernels launched in step ``k`` on ``rank``."""
        c, t = self.iter_count[rank, k], self.iter_total[rank, k]
        return {self.names[i]: (int(c[i]), int(t[i])) for i in np.flatnonzero(c)}


def _mangle(name: str) -> str:
    if not name.startswith("void "):
        return name  # extern "C" kernels: mangled == demangled
    qual = name[5:].split("<", 1)[0].split("(", 1)[0].replace("<unnamed>", "_GLOBAL__N__1")
    parts = "".join(f"{len(p)}{p}" for p in qual.split("::"))
    return f"_ZN{parts}EI{crc(name):08x}EEvT_" if "::" in qual else f"_Z{parts}I{crc(name):08x}EvT_"


def _effective_kernels(spec: ExportSpec) -> tuple[list[KernelSpec], list[int]]:
    """Apply the knobs; returns the specs and each one's noise key (from its original name)."""
    specs = list(spec.kernels) + list(spec.add)
    known = {k.name for k in specs}
    for knob in ("slowdown", "extra_launches", "drop", "rename"):
        unknown = set(getattr(spec, knob)) - known
        if unknown:
            raise ValueError(f"{knob} names kernels not in the mix: {sorted(unknown)[:3]}")
    out, keys = [], []
    for k in specs:
        if k.name in spec.drop:
            continue
        keys.append(crc(k.name))
        out.append(replace(k, name=spec.rename.get(k.name, k.name),
                           mean_ns=max(1, int(round(k.mean_ns * spec.slowdown.get(k.name, 1.0)))),
                           launches_per_iter=k.launches_per_iter + spec.extra_launches.get(k.name, 0)))
    if not out:
        raise ValueError("no kernels left to generate")
    return out, keys


def _kernel_attrs(k: KernelSpec) -> tuple:
    """Launch attributes, stable per kernel: (regs, grid xyz, block xyz, static/dyn/executed shmem,
    cluster xyz)."""
    h = crc(k.name)
    big = any(t in k.name for t in ("nvjet", "sm90", "gmma", "flash", "cutlass", "gemm"))
    cluster = (2 if h & 1 else 1, 1, 1) if any(t in k.name for t in ("nvjet", "sm90", "gmma")) else (0, 0, 0)
    regs = 168 if cluster[0] else (32, 40, 56, 64, 96, 128, 255, 80)[h % 8]
    block = (384 if cluster[0] else 128 * (1 + (h >> 3) % 4), 1, 1)
    grid = (1 + (h >> 5) % 1320, 1 + (h >> 16) % 4 if big else 1, 1)
    shm = (0, 98304 + (h >> 9) % 128 * 1024, 233472) if big else ((h >> 9) % 3 * 2048, 0, 32768)
    return (regs, *grid, *block, *shm, *cluster)


def _write(tmp: Path, spec: ExportSpec) -> GeneratedTruth:
    specs, keys = _effective_kernels(spec)
    names = list(dict.fromkeys(k.name for k in specs))
    index = {n: i for i, n in enumerate(names)}
    name_of = np.array([index[k.name] for k in specs], np.int64)
    n_specs, n_names, iters = len(specs), len(names), spec.iterations
    is_nccl = np.array([k.short_name.startswith(("ncclDevKernel", "ncclKernel")) for k in specs])
    uses_ex = np.array([k.name.startswith(("nvjet", "sm90")) for k in specs])
    launches = np.array([k.launches_per_iter for k in specs], np.int64)
    every = np.array([max(1, k.every) for k in specs], np.int64)
    phase = np.array(keys, np.int64) % every
    # each kernel runs in one of the nested ranges (forward 35%, backward 55%, optimizer.step 10% of kernels) by
    # its original name, whatever the seed or a rename: a program's op structure is stable across runs
    step_phase = np.searchsorted([35, 90], np.array(keys, np.int64) % 100, side="right") if spec.nested_ranges else None
    means = np.array([k.mean_ns for k in specs], np.float64)
    jit = np.array([k.jitter for k in specs], np.float64)
    key_u = np.array(keys, np.uint64) * _U64(0x9E3779B97F4A7C15)

    strings: dict[str, int] = {}
    sid = lambda s: strings.setdefault(s, len(strings) + 1)  # noqa: E731
    api_sid = np.array([sid(a) for a in API_NAMES], np.int64)
    thread_sid, autograd_sid = sid("python3"), sid("pt_autograd_0")
    markers = {k: spec.marker.format(i=spec.first_step + k) for k in range(iters)}
    nested = ["forward", "backward", "optimizer.step"]
    text_sid = {t: sid(t) for t in [*markers.values(), *nested]} if spec.nvtx_text_ids else {}
    name_sid = [sid(k.name) for k in specs]
    short_sid = [sid(k.short_name) for k in specs]
    mangled_sid = [sid(_mangle(k.name)) for k in specs]
    attrs = [_kernel_attrs(k) for k in specs]

    conn = sqlite3.connect(tmp, isolation_level=None)
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("BEGIN")
    tables = [t for t in SCHEMA if t != "NVTX_EVENTS" or spec.nvtx_table]
    for table in tables:
        conn.execute(ddl(table))
    ins = lambda t, rows: conn.executemany(  # noqa: E731
        f"INSERT INTO {t} VALUES ({','.join('?' * len(SCHEMA[t]))})", rows)
    ins("StringIds", ((i, s) for s, i in strings.items()))
    write_target_info(conn, ins, spec)

    t_count = np.zeros(n_names, np.int64)
    t_total = np.zeros(n_names, np.int64)
    t_min = np.full(n_names, np.iinfo(np.int64).max)
    t_max = np.zeros(n_names, np.int64)
    iter_count = np.zeros((spec.n_gpus, iters, n_names), np.int64)
    iter_total = np.zeros_like(iter_count)
    ranges: dict[int, dict[int, tuple[int, int]]] = {}
    unattributed = outside = n_kernels = n_runtime = 0
    programs: dict[bytes, Program] = {}
    krows: list[tuple] = []
    rrows: list[tuple] = []
    nvtx_rows: list[tuple] = []
    range_id = 0

    for rank in range(spec.n_gpus):
        pid = 1000 + rank
        gpid, gtid = global_pid(pid), global_tid(pid, pid)
        dev, ctx, streams = rank, rank + 1, (7 + 8 * rank, 10 + 8 * rank)
        ins("PROCESSES", [(gpid, pid, "python3")])
        ins("ThreadNames", [(thread_sid, 20, gtid), (autograd_sid, 20, global_tid(pid, pid + 7))])
        ins("TARGET_INFO_CUDA_STREAM", [(s, 0, 1, pid, ctx, 0, 2) for s in streams])
        tails = [(streams[int(is_nccl[i])], name_sid[i], short_sid[i], mangled_sid[i], *attrs[i])
                 for i in range(n_specs)]
        ksql = ("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start,end,correlationId,gridId,streamId,"
                "demangledName,shortName,mangledName,registersPerThread,gridX,gridY,gridZ,blockX,blockY,blockZ,"
                "staticSharedMemory,dynamicSharedMemory,sharedMemoryExecuted,clusterX,clusterY,clusterZ,"
                "deviceId,contextId,greenContextId,globalPid,launchType,cacheConfig,localMemoryPerThread,"
                "localMemoryTotal,sharedMemoryLimitConfig,clusterSchedulingPolicy,maxPotentialClusterSize,"
                f"maxActiveClusters,tensorSizeMinusOneElements) VALUES ({','.join('?' * 21)},{dev},{ctx},0,"
                f"{gpid},1,1,0,250871808,0,1,0,0,'[]')")
        rsql = ("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start,end,correlationId,nameId,eventClass,"
                f"globalTid,returnValue) VALUES (?,?,?,?,0,{gtid},0)")
        rng = np.random.default_rng([spec.seed, rank, 0xA11])
        t = 1_500_000_000 + int(rng.integers(0, 50_000))
        free = [t, t]
        corr, grid, cut_left = 1_438_000, 75_000, spec.slice_cuts_launches
        ranges[rank] = {}

        for k in range(iters):
            counts = np.where((k + phase) % every == 0, launches, 0)
            prog = programs.get(counts.tobytes())
            if prog is None:
                prog = programs[counts.tobytes()] = program(counts, is_nccl, uses_ex, spec.seed, step_phase)
            base = mix64(np.array([(spec.seed * 0x100000001B3 + rank * 0x10001 + k * 0x3F1) % 2**64],
                                   np.uint64))[0]
            z = normal_deviates((key_u[prog.kspec] ^ base) + prog.ordinal.astype(np.uint64))
            kj = jit[prog.kspec]
            kdur = np.maximum(1, np.rint(means[prog.kspec] * np.exp(kj * z - kj * kj / 2))).astype(np.int64)
            st = simulate_step(prog, kdur, rng, t, free, spec.host_delay_ns)
            t0, t1, cstart, cend, kstart, kend = st.t0, st.t1, st.cstart, st.cend, st.kstart, st.kend
            n_calls, n_k = len(prog.api), len(prog.kspec)
            corr_ids = corr + np.arange(n_calls, dtype=np.int64)
            corr += n_calls
            grid_ids = grid + np.arange(n_k, dtype=np.int64)
            grid += n_k

            # What the capture holds: a late start drops step 0's earlier rows and its range.
            exported = not (spec.start_mid_iteration and k == 0)
            tcap = t0 + (t1 - t0) * 45 // 100 if not exported else t0
            rt_keep = cstart >= tcap
            kkeep = kstart >= tcap
            mkeep = st.mstart >= tcap
            has_rt = rt_keep[prog.kpos] & kkeep
            if cut_left:
                cut = np.flatnonzero(has_rt)[:cut_left]
                has_rt[cut] = False
                rt_keep[prog.kpos[cut]] = False
                cut_left -= len(cut)

            nid = name_of[prog.kspec]
            kn, kd = nid[kkeep], kdur[kkeep]
            t_count += np.bincount(kn, minlength=n_names)
            t_total += np.rint(np.bincount(kn, weights=kd, minlength=n_names)).astype(np.int64)
            np.minimum.at(t_min, kn, kd)
            np.maximum.at(t_max, kn, kd)
            unattributed += int((kkeep & ~has_rt).sum())
            n_kernels += int(kkeep.sum())
            if exported:
                ranges[rank][k] = (t0, t1)
                iter_count[rank, k] += np.bincount(nid[has_rt], minlength=n_names)
                iter_total[rank, k] += np.rint(np.bincount(nid[has_rt], weights=kdur[has_rt],
                                                           minlength=n_names)).astype(np.int64)
            else:
                outside += int(has_rt.sum())

            sel = np.flatnonzero(rt_keep)
            n_runtime += len(sel)
            rrows.extend(zip(cstart[sel].tolist(), cend[sel].tolist(), corr_ids[sel].tolist(),
                             api_sid[prog.api[sel]].tolist()))
            sel = np.flatnonzero(kkeep)
            krows.extend([(a, b, c, g, *tails[s]) for a, b, c, g, s in zip(
                kstart[sel].tolist(), kend[sel].tolist(), corr_ids[prog.kpos[sel]].tolist(),
                grid_ids[sel].tolist(), prog.kspec[sel].tolist())])
            if rt_keep[0]:  # the step's cudaStreamSynchronize, as CUPTI records the host's wait
                ins("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", [(int(cstart[0]), int(cend[0]), dev, ctx, None,
                    streams[0], int(corr_ids[0]), gpid, 3, 3, 0, None)])
            if mkeep:
                ins("CUPTI_ACTIVITY_KIND_MEMCPY", [(st.mstart, st.mend, dev, ctx, 0,
                    streams[0], int(corr_ids[1]), gpid, MEMCPY_BYTES, 1, None, 1, 2, None, None, None, None,
                    None, None, None, 1)])
            if spec.nvtx:
                spans = [(markers[k], t0, t1, spec.marker_event_type)] if exported else []
                if spec.nested_ranges and n_calls > 8:
                    cuts = [2, *prog.phase_start[1:], n_calls]
                    spans += [(nested[j], int(cstart[cuts[j]]) - 300, int(cend[cuts[j + 1] - 1]) + 200, 59)
                              for j in range(3) if cuts[j] < cuts[j + 1] and cstart[cuts[j]] - 300 >= tcap]
                for text, a, b, et in spans:
                    range_id += et == 60
                    nvtx_rows.append((a, b, et, range_id if et == 60 else None, None, None,
                                      None if text_sid else text, gtid, gtid if et == 60 else None,
                                      text_sid.get(text), 0, *([None] * 9)))
            t = t1
            if len(krows) >= BATCH or len(rrows) >= BATCH:
                conn.executemany(ksql, krows)
                conn.executemany(rsql, rrows)
                krows.clear()
                rrows.clear()
        conn.executemany(ksql, krows)
        conn.executemany(rsql, rrows)
        krows.clear()
        rrows.clear()
    if spec.nvtx_table:
        ins("NVTX_EVENTS", nvtx_rows)
    conn.execute("COMMIT")
    conn.close()
    kernels = {n: KernelTruth(int(t_count[i]), int(t_total[i]), int(t_min[i]), int(t_max[i]))
               for i, n in enumerate(names) if t_count[i]}
    return GeneratedTruth(tmp, spec.n_gpus, names, kernels, iter_count, iter_total, ranges, markers,
                          unattributed, outside, n_kernels, n_runtime)


class GeneratedFileExists(InputError, FileExistsError):
    """The output file exists and ``overwrite`` was not given."""


def generate_export(path: str | os.PathLike, spec: ExportSpec | None = None, *, overwrite: bool = False,
                    **overrides) -> GeneratedTruth:
    """Write an nsys-style SQLite export at ``path`` and return what it holds.

    ``overrides`` replace fields of ``spec`` (default :class:`ExportSpec`), e.g.
    ``generate_export(p, n_gpus=8, iterations=3)``. The file is written to a temporary name next to
    ``path`` and renamed at the end; an existing ``path`` is refused unless ``overwrite=True``.
    """
    spec = replace(spec or ExportSpec(), **overrides)
    if spec.n_gpus < 1 or spec.iterations < 1:
        raise ValueError("n_gpus and iterations must be >= 1")
    if spec.marker_event_type not in (59, 60):
        raise ValueError("marker_event_type must be 59 (push/pop) or 60 (start/end)")
    if any(k.launches_per_iter < 0 or k.mean_ns < 1 for k in [*spec.kernels, *spec.add]):
        raise ValueError("kernels need launches_per_iter >= 0 and mean_ns >= 1")
    path = Path(path)
    if path.exists() and not overwrite:
        raise GeneratedFileExists(f"{path} exists (pass overwrite=True to replace it)")
    tmp = path.with_name(path.name + ".partial")
    tmp.unlink(missing_ok=True)
    try:
        truth = _write(tmp, spec)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    truth.path = path
    return truth

"""The generator's timing model: counter-based noise and one training step's CPU calls and GPU
queueing (see :mod:`kbase.synth.generate` for the model in words)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

_U64 = np.uint64


def mix64(x: np.ndarray) -> np.ndarray:
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


def normal_deviates(keys: np.ndarray) -> np.ndarray:
    """Standard normal deviates, one per uint64 key (Box-Muller on two hashed uniforms)."""
    a = mix64(keys)
    b = mix64(a ^ _U64(0x9E3779B97F4A7C15))
    u1 = ((a >> _U64(11)).astype(np.float64) + 0.5) / 2.0**53
    u2 = (b >> _U64(11)).astype(np.float64) / 2.0**53
    return np.clip(np.sqrt(-2.0 * np.log(u1)) * np.cos(2 * np.pi * u2), -4.0, 4.0)


API_NAMES = ["cudaStreamSynchronize_v3020", "cudaMemcpyAsync_v3020", "cudaStreamIsCapturing_v10000",
        "cudaEventRecordWithFlags_v11010", "cudaStreamWaitEvent_v3020", "cudaLaunchKernel_v7000",
        "cudaLaunchKernelExC_v11060"]
API_NS = np.array([2_500, 7_800, 700, 2_100, 1_600, 5_000, 6_200], dtype=np.float64)
SYNC, MEMCPY, CAPT, EVREC, WAIT, LAUNCH, LAUNCHEX = range(7)
MEMCPY_BYTES = 4 << 20


@dataclass
class Program:
    """One step's CPU call sequence (fixed across steps with the same active kernels)."""

    api: np.ndarray      # API index per call
    spec: np.ndarray     # kernel spec per call, -1 if not a launch
    kpos: np.ndarray     # call positions of launches
    kspec: np.ndarray    # spec per launch
    ordinal: np.ndarray  # occurrence of that spec within the step
    nccl: np.ndarray     # per launch: on the NCCL stream
    dep: np.ndarray      # per launch: index of the last compute-stream GPU op before it (-1: none)
    phase_start: list[int] = field(default_factory=list)  # call position where each phase begins (len: none)


def program(counts: np.ndarray, is_nccl: np.ndarray, uses_ex: np.ndarray, seed: int,
            phase: np.ndarray | None = None) -> Program:
    """The step's calls: every active kernel's launches in a random order (per ``seed``); with ``phase`` (a
    phase per kernel spec: forward, backward, optimizer) the launches of each phase come together, in phase
    order, so a kernel runs in the same phase whatever the seed (as a program's op structure does)."""
    rng = np.random.default_rng([seed, int(counts.sum()), 0xC0DE])
    groups = [np.arange(len(counts))] if phase is None else [np.flatnonzero(phase == p) for p in range(3)]
    parts = [rng.permutation(np.repeat(g, counts[g])) for g in groups]
    order = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    bounds = np.cumsum([0] + [len(x) for x in parts]).tolist()  # order position where each phase begins
    phase_start: list[int] = []
    api, spec = [SYNC, MEMCPY], [-1, -1]
    for j, s in enumerate(order.tolist()):
        while phase is not None and len(phase_start) < len(parts) and bounds[len(phase_start)] == j:
            phase_start.append(len(api))
        if j % 64 == 31:
            api.append(CAPT)
            spec.append(-1)
        if is_nccl[s]:  # record an event on the compute stream, make the NCCL stream wait for it
            api += [EVREC, WAIT]
            spec += [-1, -1]
        api.append(LAUNCHEX if uses_ex[s] else LAUNCH)
        spec.append(s)
    api_a, spec_a = np.array(api, np.int64), np.array(spec, np.int64)
    kpos = np.flatnonzero(spec_a >= 0)
    kspec = spec_a[kpos]
    srt = np.argsort(kspec, kind="stable")
    ordinal = np.empty(len(kspec), np.int64)
    starts = np.concatenate([[0], np.cumsum(np.bincount(kspec, minlength=len(counts)))])
    ordinal[srt] = np.arange(len(kspec)) - starts[kspec[srt]]
    nccl = is_nccl[kspec]
    compute_ops = np.cumsum(~nccl)  # memcpy is compute op #0, so launch i's compute index = cumsum
    dep = np.where(nccl, compute_ops, -1)  # index into [memcpy, compute kernels...] of the last one before
    if phase is not None:
        phase_start += [len(api)] * (len(parts) - len(phase_start))
    return Program(api_a, spec_a, kpos, kspec, ordinal, nccl, dep, phase_start)


def queue(ready: np.ndarray, dur: np.ndarray, gap: np.ndarray, free: int) -> np.ndarray:
    """GPU stream FIFO: end_j = max(ready_j, end_{j-1} + gap_j) + dur_j, with end_{-1} = free."""
    s = np.cumsum(gap + dur)
    a = ready + dur - s
    if len(a):
        a[0] = max(a[0], free)
    return s + np.maximum.accumulate(a)


@dataclass
class Step:
    t0: int
    t1: int
    cstart: np.ndarray  # per call (CPU)
    cend: np.ndarray
    kstart: np.ndarray  # per launch (GPU)
    kend: np.ndarray
    mstart: int  # the input memcpy
    mend: int


def simulate_step(prog: Program, kdur: np.ndarray, rng: np.random.Generator, t: int,
                   free: list[int], host_delay_ns: int = 0) -> Step:
    """Time one step after CPU time ``t``; ``free`` (compute, NCCL stream idle times) is updated.
    ``host_delay_ns``: CPU time between the step's synchronize and its input copy (loading the batch on the
    host: the GPU idles meanwhile)."""
    n_calls, n_k = len(prog.api), len(prog.kspec)
    t0 = t + 20_000 + int(rng.integers(0, 60_000))
    cdur = np.maximum(300, API_NS[prog.api] * rng.lognormal(0.0, 0.15, n_calls)).astype(np.int64)
    step = cdur + 800 + rng.exponential(9_000.0, n_calls).astype(np.int64)  # eager Python per op
    c0 = t0 + 4_000 + int(rng.integers(0, 8_000))
    step[0] = max(c0 + cdur[0], max(free) + 1_500)  # the sync returns once both streams drained
    if len(step) > 1:
        step[1] += host_delay_ns
    cend = np.cumsum(step)
    cstart = cend - cdur
    cstart[0] = c0
    t1 = int(cend[-1]) + int(rng.integers(500, 1_500))

    lat = 2_000 + rng.integers(0, 2_000, n_k + 1)  # launch return -> earliest GPU start
    gap = 500 + rng.integers(0, 1_500, n_k + 1)  # idle between back-to-back ops of a stream
    mdur = int(170_000 * (1 + 0.03 * rng.standard_normal()))
    comp, nccl = ~prog.nccl, prog.nccl
    ops = np.r_[0, 1 + np.flatnonzero(comp)]  # memcpy (call 1), then compute-stream launches
    comp_end = queue(np.r_[cend[1], cend[prog.kpos[comp]]] + lat[ops], np.r_[mdur, kdur[comp]], gap[ops],
                      free[0])
    free[0] = int(comp_end[-1])
    kend = np.empty(n_k, np.int64)
    kend[comp] = comp_end[1:]
    if nccl.any():  # NCCL waits for the compute work launched before it (event record + stream wait)
        ready = np.maximum(cend[prog.kpos[nccl]] + lat[1:][nccl], comp_end[prog.dep[nccl]])
        kend[nccl] = queue(ready, kdur[nccl], gap[1:][nccl], free[1])
        free[1] = int(kend[nccl][-1])
    return Step(t0, t1, cstart, cend, kend - kdur, kend, int(comp_end[0]) - mdur, int(comp_end[0]))



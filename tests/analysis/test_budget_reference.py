"""The budget's numpy core (``analysis.budget_sweep``) and ``compute_budget`` held to a plain Python reference
written from the definitions in ``analysis.budget``'s docstring, on generated GPUs: overlapping activities of
different classes, kernels in and out of start order, memcpy/memset merged in (ties with kernels included), gaps
at and across the window's edges, empty GPUs, one launch, windows cutting through activities, times near the
int64 limit.

The reference, per GPU: the activities in start order (a stable sort of the kernels, then the others); per
window, the time each union of classes covers (a merge of the intervals cut to the window), and from those the
blocks by precedence compute > communication > memory; a gap before every activity that starts after
everything before it ended, cut to the GPU's window, its cause read off the next activity's launch call.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kbase.analysis.budget import (
    BLOCKS,
    COMMUNICATION,
    COMPUTE,
    FIELDS,
    GAP_BUCKETS,
    GAP_CAUSES,
    LARGEST_GAPS,
    LAUNCH_GAP_NS,
    MEMORY,
    _iteration_edges,
    compute_budget,
)
from kbase.analysis.budget_sweep import _before, _gaps, _merge, _sweep
from kbase.analysis.spec import WindowSpec
from kbase.analysis.window import select_window
from kbase.readers.profile import ActivityColumns, GpuColumns, KernelColumns, Profile, RangeColumns, SyncColumns

NAMES = ["gemm<float, 128>(int)", "ncclKernel_AllReduce_RING", "Memcpy DtoD [async]", "void k<(anon)>::run[2]()",
         "нейро_κ_kernel", "elementwise"]
CLASSES = np.array([COMPUTE, COMMUNICATION, MEMORY, COMPUTE, COMPUTE, COMPUTE], dtype=np.int8)


# ------------------------------------------------------------------------------------------ the reference


def covered(intervals: list[tuple[int, int]], lo: int, hi: int) -> int:
    """Time the union of ``intervals`` covers inside [lo, hi]: merge them, cut to the window, add up."""
    total, cur = 0, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals):
        if e <= s:
            continue
        if cur is not None and s <= cur[1]:
            cur[1] = max(cur[1], e)
            continue
        if cur is not None:
            total += cur[1] - cur[0]
        cur = [s, e]
    return total + (cur[1] - cur[0] if cur is not None else 0)


def ref_blocks(acts: list[tuple[int, int, int]], lo: int, hi: int) -> dict[str, int]:
    """The blocks of window [lo, hi] of (start, end, class) activities."""

    def of(*classes: int) -> int:
        return covered([(s, e) for s, e, c in acts if c in classes], lo, hi)

    comp, comm, mem = of(COMPUTE), of(COMMUNICATION), of(MEMORY)
    cx, cxm = of(COMPUTE, COMMUNICATION), of(COMPUTE, COMMUNICATION, MEMORY)
    return {"window_ns": hi - lo, "compute_ns": comp, "communication_exposed_ns": cx - comp,
            "communication_overlapped_ns": comm - (cx - comp), "memory_exposed_ns": cxm - cx,
            "memory_overlapped_ns": mem - (cxm - cx), "idle_ns": (hi - lo) - cxm}


def ref_gaps(merged: list[tuple[int, int, int]], lo: int, hi: int, launch: dict[int, tuple[int, int]],
             syncs: list[tuple[int, int, int]]) -> tuple[int, int, list[tuple[int, int, int, str, int]]]:
    """(short count, short ns, [(position after, start, size, cause, position before)]) of the gaps in [lo, hi]
    between ``merged`` (start, end, row) activities in start order; ``launch``: row -> (CPU start, thread)."""
    short_count = short_ns = 0
    long = []
    reach = None
    for k, (s, e, row) in enumerate(merged):
        if reach is not None and s > reach:
            start, size = max(reach, lo), min(s, hi) - max(reach, lo)
            if 0 < size < LAUNCH_GAP_NS:
                short_count, short_ns = short_count + 1, short_ns + size
            elif size >= LAUNCH_GAP_NS:
                at, tid = launch[row]
                cause = "launch"
                if at < 0:
                    cause = "unknown"
                if at >= start:
                    blocked = any(p == tid >> 24 and a <= start <= b for p, a, b in syncs)
                    cause = "sync" if blocked else "host"
                before = max(p for p in range(k) if merged[p][1] == reach)
                long.append((k, start, size, cause, before))
        reach = e if reach is None else max(reach, e)
    return short_count, short_ns, long


# ------------------------------------------------------------------------------------------ generated GPUs


def gen_gpu(rng: np.random.Generator, n: int, n_acts: int, base: int, in_order: bool):
    """One GPU: kernels (start, end, class, launch start, launch thread) and memcpy/memset (start, end, kind,
    launch start, launch thread). Starts collide on purpose (a small grid), durations include 0, some activities
    overlap others of another class, some gaps are long."""
    grid = rng.choice([1_000, 7_000, 40_000], size=n + n_acts)
    starts = rng.permutation(base + np.cumsum(grid * rng.integers(0, 4, size=n + n_acts)))
    if in_order:
        starts[:n].sort()
    dur = rng.choice([0, 500, 5_000, 30_000, 150_000], size=n + n_acts)
    launch = np.where(rng.random(n + n_acts) < 0.15, -1, starts - rng.choice([-20_000, 100, 50_000], size=n + n_acts))
    tid = (rng.integers(1, 3, size=n + n_acts) << 24) + rng.integers(0, 3, size=n + n_acts)
    codes = rng.integers(0, len(NAMES), size=n)
    return (starts[:n], (starts + dur)[:n], codes, launch[:n], tid[:n],
            starts[n:], (starts + dur)[n:], rng.integers(0, 2, size=n_acts), launch[n:], tid[n:])


def merged_reference(g) -> list[tuple[int, int, int, int]]:
    """(start, end, class, row) in start order, ties in row order (kernels, then the others)."""
    ks, ke, codes, _, _, as_, ae = g[:7]
    rows = [(s, e, int(CLASSES[c]), r) for r, (s, e, c) in enumerate(zip(ks.tolist(), ke.tolist(), codes.tolist()))]
    rows += [(s, e, MEMORY, len(ks) + r) for r, (s, e) in enumerate(zip(as_.tolist(), ae.tolist()))]
    return sorted(rows, key=lambda x: x[0])


class _GivenLaunches:
    def __init__(self, starts: np.ndarray, tids: np.ndarray) -> None:
        self.starts, self.tids = starts, tids

    def start(self, rows: np.ndarray) -> np.ndarray:
        return self.starts[rows]

    def tid(self, rows: np.ndarray) -> np.ndarray:
        return self.tids[rows]


CASES = [  # (kernels, memcpy/memset, base time, kernels in start order)
    (0, 0, 0, True), (1, 0, 5, True), (0, 1, 0, True), (0, 3, 0, True), (1, 1, 0, True), (2, 0, 0, False),
    (40, 0, 0, True), (40, 6, 0, True), (40, 6, 0, False), (200, 20, 10**9, True), (200, 20, 10**9, False),
    (120, 10, (1 << 62) - 10**9, True), (120, 10, (1 << 62) - 10**9, False),
]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("n,n_acts,base,in_order", CASES)
def test_sweep_and_gaps_equal_the_reference(n, n_acts, base, in_order, seed):
    rng = np.random.default_rng(seed * 1000 + n + n_acts)
    g = gen_gpu(rng, n, n_acts, base, in_order)
    ks, ke, codes, kl, kt, as_, ae, _, al, at = g
    ref = merged_reference(g)
    s, e, cls, order = _merge(ks, ke, CLASSES.take(codes), as_, ae)
    assert list(zip(s.tolist(), e.tolist(), cls.tolist(), order.rows(np.arange(len(s))).tolist())) == ref
    assert [order.rows(np.array([p]))[0] for p in range(len(s))] == [r for *_, r in ref]
    acts = [(a, b, c) for a, b, c, _ in ref]
    # windows: through activities, before the first, after the last, empty ones
    lo = int(s.min()) if len(s) else base
    hi = int(e.max()) if len(e) else base
    cuts = sorted({lo, hi, *(int(x) for x in rng.integers(lo - 50_000, hi + 50_001, size=5)), lo + 3, hi - 3})
    edges = np.array(cuts + cuts[-1:], dtype=np.int64)
    table, reach, ps = _sweep(s, e, cls, edges)
    want = [ref_blocks(acts, a, b) for a, b in zip(cuts, cuts[1:] + cuts[-1:])]
    assert [dict(zip(FIELDS, col)) for col in table.T.tolist()] == want
    # the gaps over the whole span and over a window that cuts through activities and gaps
    syncs = SyncColumns(start=np.array([lo, lo + 200_000]), end=np.array([lo + 100_000, lo + 900_000]),
                        pid=np.array([1, 2]))
    launch_rows = {r: (int(x), int(t)) for r, (x, t) in enumerate(zip(np.r_[kl, al].tolist(), np.r_[kt, at].tolist()))}
    for w in (edges[[0, -1]], np.array(cuts[1:3] if len(cuts) > 2 else cuts[:2], dtype=np.int64)):
        got = _gaps(s, reach, ps, w, _GivenLaunches(np.r_[kl, al].astype(np.int64), np.r_[kt, at].astype(np.int64)),
                    order, syncs)
        short_count, short_ns, long = ref_gaps([(a, b, r) for a, b, _, r in ref], int(w[0]), int(w[-1]),
                                               launch_rows, list(zip([1, 2], syncs.start.tolist(),
                                                                     syncs.end.tolist())))
        assert (got.short_count, got.short_ns) == (short_count, short_ns)
        assert list(zip(got.nxt.tolist(), got.start.tolist(), got.size.tolist(),
                        [GAP_CAUSES[c] for c in got.cause.tolist()])) == [x[:4] for x in long]
        assert [_before(e, reach, k) for k in got.nxt.tolist()] == [x[4] for x in long]


def test_the_activity_before_a_gap_is_the_last_to_finish_even_far_back():
    """A long kernel over 5,000 short ones, then a gap: the activity before the gap is the long one (found past
    the short look-back), and of two that end together, the later."""
    s = np.r_[0, np.arange(1, 5001) * 10, 0, 200_000].astype(np.int64)
    e = np.r_[100_000, np.arange(1, 5001) * 10 + 5, 100_000, 200_010].astype(np.int64)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    k = int(np.flatnonzero(s == 200_000)[0])
    assert _before(e, reach, k) == int(np.flatnonzero(e == 100_000)[-1]) == 1
    assert _before(e, reach, 3) == 1
    assert _before(e, reach, 1) == 0


# ------------------------------------------------------------------------------------------ compute_budget


def gen_profile(seed: int, n_gpus: int, grouped: bool) -> Profile:
    """A profile of ``n_gpus`` generated GPUs (GPU 1 without kernels when there are 3), rows grouped by GPU as the
    readers write them or interleaved; host ranges around some launches; the step kernel ``step_marker``."""
    rng = np.random.default_rng(seed)
    names = np.array([*NAMES, "step_marker"], dtype=object)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("ks", "ke", "kg", "kn", "kl", "kt", "as", "ae", "ag", "ak",
                                                         "al", "at")}
    for gpu in range(n_gpus):
        n = 0 if (n_gpus == 3 and gpu == 1) else int(rng.integers(1, 150))
        ks, ke, codes, kl, kt, as_, ae, ak, al, at = gen_gpu(rng, n, int(rng.integers(0, 8)), 10**9, seed % 2 == 0)
        codes[:: max(1, n // 5)] = len(NAMES)  # the step kernel
        for key, v in zip(("ks", "ke", "kn", "kl", "kt", "as", "ae", "ak", "al", "at"),
                          (ks, ke, codes, kl, kt, as_, ae, ak, al, at)):
            cols[key].append(v)
        cols["kg"].append(np.full(n, gpu))
        cols["ag"].append(np.full(len(as_), gpu))
    c = {k: np.concatenate(v).astype(np.int64) for k, v in cols.items()}
    perm = np.arange(len(c["ks"])) if grouped else rng.permutation(len(c["ks"]))
    kernels = KernelColumns(start=c["ks"][perm], end=c["ke"][perm], gpu=c["kg"][perm].astype(np.int32),
                            name=c["kn"][perm].astype(np.int32), names=names, launch_tid=c["kt"][perm],
                            launch_start=c["kl"][perm])
    acts = ActivityColumns(start=c["as"], end=c["ae"], gpu=c["ag"].astype(np.int32), kind=c["ak"].astype(np.int8),
                           launch_start=c["al"], launch_tid=c["at"])
    # host ranges: a whole-capture one per thread, short ones around some launches, a process-wide one (tid < 0),
    # one still open (end < 0)
    lo, hi = int(c["kl"].min()), int(c["ke"].max())
    tids = sorted(set(c["kt"].tolist()))
    at = rng.choice(c["kl"][c["kl"] >= 0], size=12) if (c["kl"] >= 0).any() else np.zeros(0, np.int64)
    tid_at = rng.choice(tids, size=len(at)) if tids else np.zeros(0, np.int64)
    r_start = np.r_[np.full(len(tids), lo), at - 1_000, lo + 5, at[:1] + 10]
    r_end = np.r_[np.full(len(tids), hi), at + 2_000, hi, [-1] * len(at[:1])]
    r_tid = np.r_[tids, tid_at, -1, tid_at[:1]]
    ranges = RangeColumns(start=r_start.astype(np.int64), end=r_end.astype(np.int64), tid=r_tid.astype(np.int64),
                          pid=np.r_[np.array(tids, dtype=np.int64) >> 24, tid_at >> 24, 2, tid_at[:1] >> 24],
                          name=np.array([f"op[{i}]<T>" for i in range(len(r_start))], dtype=object))
    gpus = GpuColumns(gpu=np.arange(n_gpus, dtype=np.int32), pid=np.arange(n_gpus, dtype=np.int64),
                      device=np.arange(n_gpus, dtype=np.int32), model=["x"] * n_gpus)
    syncs = SyncColumns(start=np.array([10**9, 10**9 + 300_000]), end=np.array([10**9 + 200_000, 10**9 + 5 * 10**6]),
                        pid=np.array([1, 2]))
    return Profile(source=Path("gen"), format="nsys-sqlite", exporter_version="t", columns=kernels,
                   range_columns=ranges, gpu_columns=gpus, activities=acts, syncs=syncs)


def gpu_rows(profile: Profile, gpu: int) -> tuple[list[tuple[int, int, int, int]], dict, list[str]]:
    """GPU ``gpu``'s (start, end, class, row) in start order, row -> launch call, row -> name."""
    k, a = profile.columns, profile.activities
    ki, ai = np.flatnonzero(k.gpu == gpu), np.flatnonzero(a.gpu == gpu)
    rows = [(int(k.start[i]), int(k.end[i]), int(CLASSES[k.name[i]]) if k.name[i] < len(CLASSES) else COMPUTE, r)
            for r, i in enumerate(ki)]
    rows += [(int(a.start[i]), int(a.end[i]), MEMORY, len(ki) + r) for r, i in enumerate(ai)]
    launch = {r: (int(k.launch_start[i]), int(k.launch_tid[i])) for r, i in enumerate(ki)}
    launch.update({len(ki) + r: (int(a.launch_start[i]), int(a.launch_tid[i])) for r, i in enumerate(ai)})
    names = [str(k.names[k.name[i]]) for i in ki] + ["memset" if a.kind[i] == 1 else "memcpy" for i in ai]
    return sorted(rows, key=lambda x: x[0]), launch, names


def ref_range(profile: Profile, launch: tuple[int, int]) -> str:
    at, tid = launch
    r = profile.range_columns
    hits = [i for i in range(len(r)) if at >= 0 and (r.tid[i] == tid or (r.tid[i] < 0 and r.pid[i] == tid >> 24))
            and r.start[i] <= at and (r.end[i] >= at or r.end[i] < 0)]
    return str(r.name[max(hits, key=lambda i: (r.start[i], -i))]) if hits else ""


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("mode", ["whole", "trim", "iterations"])
@pytest.mark.parametrize("n_gpus,grouped", [(1, True), (3, True), (3, False)])
def test_compute_budget_equals_the_reference(seed, mode, n_gpus, grouped):
    profile = gen_profile(seed, n_gpus, grouped)
    cats = np.r_[CLASSES, COMPUTE].astype(np.int8)
    lo_all, hi_all = int(profile.columns.start.min()), int(profile.columns.end.max())
    spec = {"whole": WindowSpec(), "iterations": WindowSpec(iteration_kernel="step_marker", warmup=1),
            "trim": WindowSpec(trim=((lo_all + 40_000) / 1e9, (hi_all - 40_000) / 1e9))}[mode]
    window = select_window(profile, spec)
    b = compute_budget(window, cats, whole=mode == "whole")
    syncs = list(zip(profile.syncs.pid.tolist(), profile.syncs.start.tolist(), profile.syncs.end.tolist()))
    by_cause = {c: [0, 0] for c in GAP_CAUSES}
    by_size = {label: [0, 0] for _, label in GAP_BUCKETS}
    long_gaps = []
    per_iteration: dict[int, dict[str, int]] = {}
    assert [g.gpu for g in b.gpus] == sorted(set(window.column("gpu").tolist()))
    for gb in b.gpus:
        rows, launch, names = gpu_rows(profile, gb.gpu)
        acts = [(s, e, c) for s, e, c, _ in rows]
        if mode == "iterations":
            ki = np.flatnonzero(profile.columns.gpu == gb.gpu)
            edges = _iteration_edges(window, ki, gb.gpu)[1].tolist()
        elif mode == "trim":
            edges = [window.start_ns, window.end_ns]
        else:
            edges = [min(s for s, *_ in rows), max(e for _, e, *_ in rows)]
        want = [ref_blocks(acts, a, z) for a, z in zip(edges, edges[1:])]
        if mode == "iterations":
            assert [{f: getattr(x, f) for f in FIELDS} for _, x in gb.iterations] == want
            for key, w in zip(window.iteration_keys, want):
                per_iteration[key] = {f: per_iteration.get(key, {}).get(f, 0) + w[f] for f in FIELDS}
        assert {f: getattr(gb.blocks, f) for f in FIELDS} == {f: sum(w[f] for w in want) for f in FIELDS}
        assert sum(getattr(gb.blocks, f) for f in BLOCKS) == gb.blocks.window_ns
        short_count, short_ns, long = ref_gaps([(s, e, r) for s, e, _, r in rows], edges[0], edges[-1], launch,
                                               syncs)
        by_cause["launch"][0] += short_count
        by_cause["launch"][1] += short_ns
        by_size[GAP_BUCKETS[0][1]][0] += short_count
        by_size[GAP_BUCKETS[0][1]][1] += short_ns
        for k, start, size, cause, before in long:
            by_cause[cause][0] += 1
            by_cause[cause][1] += size
            label = next(lab for limit, lab in GAP_BUCKETS if limit is None or size < limit)
            by_size[label][0] += 1
            by_size[label][1] += size
            it = max(i for i, x in enumerate(edges) if x <= start) if mode == "iterations" else None
            after, prior = rows[k][3], rows[before][3]
            long_gaps.append((size, gb.gpu, window.iteration_keys[it] if it is not None else None,
                              start - edges[0], cause, names[prior], names[after],
                              ref_range(profile, launch[prior]), ref_range(profile, launch[after])))
    assert [(key, {f: getattr(x, f) for f in FIELDS}) for key, x in b.iterations] == sorted(per_iteration.items())
    assert b.gaps == {"by_cause": {c: {"count": n, "ns": ns} for c, (n, ns) in by_cause.items()},
                      "by_size": {c: {"count": n, "ns": ns} for c, (n, ns) in by_size.items()}}
    got = [(g.duration_ns, g.gpu, g.iteration, g.start_ns, g.cause, g.before, g.after, g.before_range, g.after_range)
           for g in b.largest_gaps]
    # the largest, longest first (among equal lengths any may be shown: compare the lengths, and each is a gap)
    assert [x[0] for x in got] == sorted((x[0] for x in long_gaps), reverse=True)[:LARGEST_GAPS]
    assert all(x in long_gaps for x in got)

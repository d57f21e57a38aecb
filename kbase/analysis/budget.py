"""The GPU time budget of a window: where every nanosecond of each GPU's window went (docs/budget.md).

Per GPU, a sweep over every activity on every stream of the device (kernels, memcpy, memset) gives each
instant of the window to exactly one block, by precedence **compute > communication > memory > idle**::

    compute + communication_exposed + memory_exposed + idle = window        (integer ns, exactly)

``communication_overlapped`` / ``memory_overlapped`` are the time those ran hidden under a higher block: the
time an Amdahl estimate counts as saved when the compute above it shrinks, but which the step only saves when
it stays hidden. Kernels are classed by ``analysis.classify`` (NCCL and other collectives: communication;
copies and fills: memory; everything else: compute); memcpy/memset are memory.

Windows: with iteration markers, iteration *k*'s window on a GPU runs from the end of the GPU work launched in
iteration *k-1* to the end of the work launched in *k* (its first window starts where the warm-up's work
ended), so the windows tile the GPU's timeline and the idle before a step's first kernel (the GPU waiting for
that step's input) is that step's. Without markers (or with ``whole``) one window per GPU, first activity to
last; a trim window is the trim. The step time is the host's marker range (``step_wall_ns``); where there is
none, the GPU window.

Idle gaps (the complement of all activity in the window) get a likely cause from the activity after them:
``host`` (its launch call started after the GPU went idle: the host issued nothing, e.g. the input pipeline,
Python, the CPU elsewhere), ``sync`` (as host, but the host was blocked in a synchronize call or a blocking
copy when the GPU went idle), ``launch`` (the next work was already launched, or the gap is under
``LAUNCH_GAP_NS``: launch latency between back-to-back kernels or a wait on another stream), ``unknown``
(its launch call is not in the capture).
"""

from __future__ import annotations

import numpy as np

from kbase.analysis.budget_blocks import (  # noqa: F401 - the budget's data, re-exported: its one home to import from
    BLOCK_LABELS,
    BLOCKS,
    COMMUNICATION,
    COMPUTE,
    FIELDS,
    GAP_BUCKETS,
    GAP_CAUSE_TEXT,
    GAP_CAUSES,
    LARGEST_GAPS,
    LAUNCH_GAP_NS,
    MEMORY,
    Blocks,
    Budget,
    Gap,
    GpuBudget,
    budget_from_stored,
    category_codes,
    stored_budget_ok,
)
from kbase.analysis.budget_sweep import _BUCKET_LIMITS, _before, _count, _gaps, _merge, _pick, _rows_by_gpu, _sweep
from kbase.analysis.window import Window, gpu_label
from kbase.enums import WindowMode

_NEVER = np.iinfo(np.int64).min


def compute_budget(window: Window, category_of_code: np.ndarray, whole: bool = False,
                   labels: np.ndarray | None = None) -> Budget:
    """The budget of ``window`` (``whole``: each GPU's whole capture, first activity to last, as HTA's temporal
    breakdown). ``category_of_code``: COMPUTE / COMMUNICATION / MEMORY per kernel name code; ``labels``: a short
    name per code for the gaps shown (default: the full names). The GPUs are swept side by side (numpy releases
    the GIL) while a core is idle (``readers.threads``)."""
    from kbase.readers.threads import Pool, reader_threads

    p = window.profile
    k, a = p.columns, p.activities
    iterations = window.mode == WindowMode.ITERATIONS and not whole
    if window.gpus is not None:  # counted when the window was made
        kept_gpus = list(window.gpus)
    else:
        kept_gpus = sorted(set(np.flatnonzero(np.bincount(window.column("gpu"))).tolist())) if window.n_launches else []
    if window.spec.gpu is not None:
        kept_gpus = [g for g in kept_gpus if g == window.spec.gpu]
    k_rows, a_rows = _rows_by_gpu(k.gpu, len(p.gpu_columns.gpu)), _rows_by_gpu(a.gpu, len(p.gpu_columns.gpu))
    ctx = _Context(window, category_of_code, labels, iterations, whole, _ranks(p),
                   _host_steps(window) if iterations else {})

    def one(g: int) -> _GpuResult:
        return _one_gpu(ctx, g, k_rows(g), a_rows(g))

    threads = min(reader_threads(), len(kept_gpus))
    if threads > 1:
        with Pool(threads) as pool:
            results = pool.map(one, kept_gpus)
    else:
        results = [one(g) for g in kept_gpus]
    gpus = [r.gpu for r in results]
    by_cause = {c: {"count": 0, "ns": 0} for c in GAP_CAUSES}
    by_size = {label: {"count": 0, "ns": 0} for _, label in GAP_BUCKETS}
    candidates: list[_Candidate] = []
    for r in results:
        for table, part in ((by_cause, r.by_cause), (by_size, r.by_size)):
            for name, (count, ns) in part.items():
                table[name]["count"] += count
                table[name]["ns"] += ns
        candidates += r.largest
    candidates.sort(key=lambda x: -x.duration_ns)
    largest = [c.named(p) for c in candidates[:LARGEST_GAPS]]  # names and host ranges only for those shown
    _collective_waits(window, category_of_code, gpus)
    total = Blocks()
    for gb in gpus:
        total.add(gb.blocks)
    n_it = len(window.iteration_keys) if iterations else 0
    desc = window.describe() if not whole else "whole capture per GPU (first activity to last)"
    return Budget(unit="iteration" if iterations else "window", window=desc, n_iterations=n_it, gpus=gpus,
                  total=total, iterations=_summed_iterations(results), gaps={"by_cause": by_cause, "by_size": by_size},
                  largest_gaps=largest)


# (the few internal records below are plain classes: a dataclass costs ~0.5 ms at import, every ``kbase top``)


class _Context:
    __slots__ = ("window", "category_of_code", "labels", "iterations", "whole", "ranks", "steps")

    def __init__(self, window: Window, category_of_code: np.ndarray, labels: np.ndarray | None, iterations: bool,
                 whole: bool, ranks: dict[int, int], steps: dict[tuple[int, int], int]) -> None:
        self.window, self.category_of_code, self.labels = window, category_of_code, labels
        self.iterations, self.whole, self.ranks, self.steps = iterations, whole, ranks, steps


class _Candidate:
    """One of a GPU's largest gaps, named (activity names, host ranges) only if it is among the capture's largest."""

    __slots__ = ("gap", "duration_ns", "before_row", "after_row", "names", "launches")

    def __init__(self, gap: Gap, before_row: int, after_row: int, names: _Names, launches: _Launches) -> None:
        self.gap, self.duration_ns = gap, gap.duration_ns  # (gap: before, after and their ranges empty until named)
        self.before_row, self.after_row, self.names, self.launches = before_row, after_row, names, launches

    def named(self, profile) -> Gap:
        g = self.gap
        g.before, g.after = self.names.name(self.before_row), self.names.name(self.after_row)
        g.before_range = _range_at(profile, self.launches, self.before_row)
        g.after_range = _range_at(profile, self.launches, self.after_row)
        return g


class _GpuResult:
    __slots__ = ("gpu", "table", "by_cause", "by_size", "largest")

    def __init__(self, gpu: GpuBudget, table: np.ndarray, by_cause: dict[str, tuple[int, int]],
                 by_size: dict[str, tuple[int, int]], largest: list[_Candidate]) -> None:
        self.gpu, self.table = gpu, table  # table: ``_sweep``'s, the blocks of each window
        self.by_cause, self.by_size, self.largest = by_cause, by_size, largest  # cause -> (gaps, ns)


def _one_gpu(ctx: _Context, g: int, ki: slice | np.ndarray, ai: slice | np.ndarray) -> _GpuResult:
    """GPU ``g``'s budget (``ki``/``ai``: its kernels' and memcpy/memset rows), its gaps counted, its largest found."""
    window, p = ctx.window, ctx.window.profile
    k, a = p.columns, p.activities
    start, end, cls, order = _merge(k.start[ki], k.end[ki], ctx.category_of_code.take(k.name[ki]), a.start[ai],
                                    a.end[ai])
    launches = _Launches(p, ki, ai)
    if ctx.iterations:
        keys, edges = _iteration_edges(window, ki, g)
    else:
        keys, edges = [], _whole_edges(window, start, end, ctx.whole)
    table, reach, piece_starts = _sweep(start, end, cls, edges)
    blocks = Blocks(*table.sum(axis=1).tolist())
    gb = GpuBudget(gpu=g, rank=ctx.ranks.get(g), label=gpu_label(p, g), blocks=blocks)
    if ctx.iterations:
        pid = int(p.gpu_columns.pid[g]) if g < len(p.gpu_columns.pid) else -1
        total_step = 0
        for key, row in zip(keys, table.T.tolist()):
            b = Blocks(*row)
            b.step_wall_ns = _step_of(ctx.steps, pid, key)
            total_step += b.step_wall_ns or 0
            gb.iterations.append((key, b))
        blocks.step_wall_ns = total_step if any(b.step_wall_ns is not None for _, b in gb.iterations) else None
    gaps = _gaps(start, reach, piece_starts, edges, launches, order, p.syncs)
    # counts and sums by cause and size of the long gaps (about one per iteration); the short ones in bulk
    by_cause = {c: (int(np.count_nonzero(gaps.cause == code)), int(gaps.size[gaps.cause == code].sum()))
                for code, c in enumerate(GAP_CAUSES)}
    bucket = np.searchsorted(_BUCKET_LIMITS, gaps.size, side="right")
    by_size = {label: (int(np.count_nonzero(bucket == i)), int(gaps.size[bucket == i].sum()))
               for i, (_, label) in enumerate(GAP_BUCKETS)}
    short = GAP_BUCKETS[0][1]
    by_cause["launch"] = (by_cause["launch"][0] + gaps.short_count, by_cause["launch"][1] + gaps.short_ns)
    by_size[short] = (by_size[short][0] + gaps.short_count, by_size[short][1] + gaps.short_ns)
    n_big = len(gaps.size)
    top = np.argpartition(-gaps.size, LARGEST_GAPS)[:LARGEST_GAPS] if n_big > LARGEST_GAPS else np.arange(n_big)
    names = _Names(p, ki, a.kind[ai], ctx.labels)
    nxt = gaps.nxt[top]
    after_rows = order.rows(nxt).tolist()
    before_rows = order.rows(np.array([_before(end, reach, k) for k in nxt.tolist()], dtype=np.int64)).tolist()
    largest = []
    for n, i in enumerate(top.tolist()):
        it = int(np.searchsorted(edges, gaps.start[i], side="right")) - 1
        gap = Gap(gpu=g, iteration=keys[it] if keys and 0 <= it < len(keys) else None,
                  start_ns=int(gaps.start[i] - edges[0]), duration_ns=int(gaps.size[i]),
                  cause=GAP_CAUSES[int(gaps.cause[i])], before="", after="")
        largest.append(_Candidate(gap, before_rows[n], after_rows[n], names, launches))
    return _GpuResult(gb, table, by_cause, by_size, largest)


def _summed_iterations(results: list[_GpuResult]) -> list[tuple[int, Blocks]]:
    """Each iteration's blocks summed over the GPUs (every GPU has the window's iterations, in order), the host's
    step time summed over those that have one (None where none has)."""
    with_its = [r for r in results if r.gpu.iterations]
    if not with_its:
        return []
    table = np.sum([r.table for r in with_its], axis=0)
    out = []
    for i, row in enumerate(table.T.tolist()):
        steps = [s for r in with_its if (s := r.gpu.iterations[i][1].step_wall_ns) is not None]
        summed = Blocks(*row)
        summed.step_wall_ns = sum(steps) if steps else None
        out.append((with_its[0].gpu.iterations[i][0], summed))
    return sorted(out, key=lambda x: x[0])


# ------------------------------------------------------------------------------------------ windows


def _iteration_edges(window: Window, ki: slice | np.ndarray, g: int) -> tuple[list[int], np.ndarray]:
    """The chosen iteration keys and the n+1 window edges on GPU ``g`` (``ki``: its kernels' rows)."""
    p = window.profile
    avail = np.asarray(window.available_keys, dtype=np.int64)
    chosen = list(window.iteration_keys)
    it = window.iteration[ki]
    last_end = np.full(len(avail), _NEVER, dtype=np.int64)
    first_start = np.full(len(avail), np.iinfo(np.int64).max, dtype=np.int64)
    if len(it):
        # a step's launches come in runs (launch order): reduce each run, then the few runs per key
        bounds = np.concatenate(([0], np.flatnonzero(it[1:] != it[:-1]) + 1))  # (np.r_: slow for small arrays)
        run_key = it[bounds]
        run_end = np.maximum.reduceat(p.columns.end[ki], bounds)
        run_start = np.minimum.reduceat(p.columns.start[ki], bounds)
        keep = run_key >= 0
        pos = np.searchsorted(avail, run_key[keep])
        np.maximum.at(last_end, pos, run_end[keep])
        np.minimum.at(first_start, pos, run_start[keep])
    at = np.searchsorted(avail, np.asarray(chosen, dtype=np.int64))
    prev = at[0] - 1
    if prev >= 0 and last_end[prev] != _NEVER:
        e0 = int(last_end[prev])
    else:
        got = first_start[at][first_start[at] != np.iinfo(np.int64).max]
        e0 = int(got.min()) if len(got) else 0
    ends = last_end[at]
    edges = np.maximum.accumulate(np.concatenate(([e0], np.where(ends == _NEVER, e0, ends))))
    return chosen, edges


def _whole_edges(window: Window, start: np.ndarray, end: np.ndarray, whole: bool) -> np.ndarray:
    if window.mode == WindowMode.TRIM and not whole:
        return np.array([window.start_ns, window.end_ns], dtype=np.int64)
    if not len(start):
        return np.zeros(2, dtype=np.int64)
    return np.array([int(start.min()), int(end.max())], dtype=np.int64)


def _host_steps(window: Window) -> dict[tuple[int, int], int]:
    """{(process, key): ns} of the host's marker ranges (a key's ranges in one process: first start to last end)."""
    r = window.marker_ranges
    out: dict[tuple[int, int], tuple[int, int]] = {}
    if r is None or not len(r):
        return {}
    for pid, key, s, e in zip(r.ranges.pid.tolist(), r.key.tolist(), r.ranges.start.tolist(), r.ranges.end.tolist()):
        lo, hi = out.get((pid, key), (s, e))
        out[(pid, key)] = (min(lo, s), max(hi, e))
    walls = {k: hi - lo for k, (lo, hi) in out.items()}
    by_key: dict[int, list[int]] = {}
    for (_, key), v in walls.items():
        by_key.setdefault(key, []).append(v)
    walls.update({(_ANY, key): round(sum(v) / len(v)) for key, v in by_key.items()})
    return walls


def _step_of(steps: dict[tuple[int, int], int], pid: int, key: int) -> int | None:
    got = steps.get((pid, key))
    if got is None:  # the GPU's process has no marker (a process key the reader set apart): any process's
        got = steps.get((_ANY, key))
    return got


_ANY = -(1 << 62)  # ``_host_steps``' key for "any process": the mean over the processes with that key


# ------------------------------------------------------------------------------------------ the sweep


class _Names:
    """Names of a GPU's rows (its kernels, then its memcpy/memset), looked up only for the gaps shown."""

    def __init__(self, profile, ki: slice | np.ndarray, akind: np.ndarray, labels: np.ndarray | None) -> None:
        self.profile, self.ki, self.akind, self.labels = profile, ki, akind, labels

    def name(self, row: int) -> str:
        n_kernels = _count(self.ki)
        if row < n_kernels:
            c = self.profile.columns
            code = int(c.name[int(_pick(self.ki, np.array([row]))[0])])
            if self.labels is not None and code < len(self.labels):
                return str(self.labels[code])
            return str(c.names[code])
        return "memset" if int(self.akind[row - n_kernels]) == 1 else "memcpy"


class _Launches:
    """The launch call (CPU start, thread) of a GPU's rows, its kernels then its memcpy/memset, looked up for the
    few rows that need it (the gaps' next activities): no copy of two columns per GPU."""

    def __init__(self, profile, ki: slice | np.ndarray, ai: slice | np.ndarray) -> None:
        self.k, self.a, self.ki, self.ai = profile.columns, profile.activities, ki, ai

    def _get(self, kcol: np.ndarray | None, acol: np.ndarray, rows: np.ndarray) -> np.ndarray:
        out = np.full(len(rows), -1, dtype=np.int64)
        n_kernels = _count(self.ki)
        kernel = rows < n_kernels
        if kcol is not None:
            out[kernel] = kcol[_pick(self.ki, rows[kernel])]
        out[~kernel] = acol[_pick(self.ai, rows[~kernel] - n_kernels)]
        return out

    def start(self, rows: np.ndarray) -> np.ndarray:
        return self._get(self.k.launch_start, self.a.launch_start, rows)

    def tid(self, rows: np.ndarray) -> np.ndarray:
        return self._get(self.k.launch_tid, self.a.launch_tid, rows)


def _range_at(profile, launches: _Launches, row: int) -> str:
    """The innermost host range (op or NVTX) around the launch call of ``row`` ('' when none)."""
    one = np.array([row], dtype=np.int64)
    t, at = int(launches.tid(one)[0]), int(launches.start(one)[0])
    r = profile.range_columns
    if at < 0 or not len(r):
        return ""
    hit = ((r.tid == t) | ((r.tid < 0) & (r.pid == t >> 24))) & (r.start <= at) & ((r.end >= at) | (r.end < 0))
    idx = np.flatnonzero(hit)
    return str(r.name[idx[np.argmax(r.start[idx])]]) if len(idx) else ""


# ------------------------------------------------------------------------------------------ ranks


def _ranks(profile) -> dict[int, int]:
    out = {}
    for r in profile.extra.get("ranks", []) or []:
        for g in r.get("gpus", []):
            out[int(g)] = int(r["rank"])
    return out


def _codes(key: np.ndarray) -> tuple[np.ndarray, int]:
    """A dense code per distinct value of ``key`` and how many there are (np.unique without numpy.ma)."""
    order = np.argsort(key, kind="stable")
    sk = key[order]
    first = np.empty(len(sk), dtype=bool)
    first[:1] = True
    np.not_equal(sk[1:], sk[:-1], out=first[1:])
    codes = np.empty(len(key), dtype=np.int64)
    codes[order] = np.cumsum(first) - 1
    return codes, int(first.sum())


def _collective_waits(window: Window, category_of_code: np.ndarray, gpus: list[GpuBudget]) -> None:
    """For each collective launched on every GPU (matched by name and order), the time each rank spent in it
    beyond the fastest rank's: a collective ends together, so the extra is waiting for the slowest to arrive."""
    if len(gpus) < 2 or not bool((category_of_code == COMMUNICATION).any()):  # (no collective: no pass over launches)
        return
    name, gpu = window.column("name"), window.column("gpu")
    comm = category_of_code[name] == COMMUNICATION
    if not comm.any():
        return
    name, gpu = name[comm].astype(np.int64), gpu[comm].astype(np.int64)
    start, end = window.column("start")[comm], window.column("end")[comm]
    order = np.lexsort((start, name, gpu))
    name, gpu, dur = name[order], gpu[order], (end - start)[order]
    group = gpu * (int(name.max()) + 1) + name
    first = np.r_[0, np.flatnonzero(np.diff(group)) + 1]
    ordinal = np.arange(len(group)) - np.repeat(first, np.diff(np.r_[first, len(group)]))
    key = name * (int(ordinal.max()) + 1) + ordinal
    inv, n_keys = _codes(key)
    fastest = np.full(n_keys, np.iinfo(np.int64).max)
    np.minimum.at(fastest, inv, dur)
    ranks_in = np.bincount(inv, minlength=n_keys)
    full = ranks_in[inv] == len(gpus)
    wait = np.bincount(gpu[full], weights=(dur - fastest[inv])[full], minlength=int(gpu.max()) + 1)
    for gb in gpus:
        gb.collective_wait_ns = int(round(wait[gb.gpu])) if gb.gpu < len(wait) else 0

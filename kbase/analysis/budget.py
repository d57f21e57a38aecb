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

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kbase.analysis.window import Window, gpu_label
from kbase.enums import WindowMode

FIELDS = ("window_ns", "compute_ns", "communication_exposed_ns", "communication_overlapped_ns",
          "memory_exposed_ns", "memory_overlapped_ns", "idle_ns")
BLOCKS = ("compute_ns", "communication_exposed_ns", "memory_exposed_ns", "idle_ns")  # add up to window_ns
BLOCK_LABELS = {"compute_ns": "compute", "communication_exposed_ns": "exposed communication",
                "memory_exposed_ns": "exposed memory", "idle_ns": "idle"}
COMPUTE, COMMUNICATION, MEMORY = 0, 1, 2
GAP_CAUSES = ("host", "sync", "launch", "unknown")
GAP_CAUSE_TEXT = {"host": "the GPU waits on the host (input pipeline, Python, CPU elsewhere)",
                  "sync": "the host was blocked in a synchronization (stream/device sync, blocking copy)",
                  "launch": "launch latency between back-to-back work, or a wait on another stream",
                  "unknown": "cause unknown (launch calls not in the capture)"}
GAP_BUCKETS = ((10_000, "< 10 µs"), (100_000, "10–100 µs"), (1_000_000, "0.1–1 ms"), (10_000_000, "1–10 ms"),
               (None, "≥ 10 ms"))
LAUNCH_GAP_NS = 10_000  # a gap this short is launch latency whoever was late
LARGEST_GAPS = 5
_NEVER = np.iinfo(np.int64).min


@dataclass
class Blocks:
    """One window's budget (or a sum of windows'): integer ns; ``step_wall_ns`` the host's step time over the
    same iterations (None without a marker)."""

    window_ns: int = 0
    compute_ns: int = 0
    communication_exposed_ns: int = 0
    communication_overlapped_ns: int = 0
    memory_exposed_ns: int = 0
    memory_overlapped_ns: int = 0
    idle_ns: int = 0
    step_wall_ns: int | None = None

    def add(self, other: Blocks) -> None:
        for f in FIELDS:
            setattr(self, f, getattr(self, f) + getattr(other, f))
        if other.step_wall_ns is not None:
            self.step_wall_ns = (self.step_wall_ns or 0) + other.step_wall_ns

    def as_dict(self) -> dict[str, int | None]:
        return {f: getattr(self, f) for f in (*FIELDS, "step_wall_ns")}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Blocks:
        vals = {f: int(d.get(f) or 0) for f in FIELDS}
        step = d.get("step_wall_ns")
        return cls(**vals, step_wall_ns=None if step is None else int(step))


@dataclass
class Gap:
    gpu: int
    iteration: int | None
    start_ns: int  # offset from the GPU's window start
    duration_ns: int
    cause: str
    before: str  # the activity before (kernel name, "memcpy", "memset"; "" at the window's edge)
    after: str
    before_range: str = ""  # the innermost host range (op / NVTX) around the launch of the activity before
    after_range: str = ""


@dataclass
class GpuBudget:
    gpu: int
    rank: int | None
    label: str
    blocks: Blocks
    iterations: list[tuple[int, Blocks]] = field(default_factory=list)
    collective_wait_ns: int = 0  # time in collectives beyond the fastest rank's (waiting for the slowest)


@dataclass
class Budget:
    unit: str  # "iteration" | "window"
    window: str  # what the windows are
    n_iterations: int
    gpus: list[GpuBudget]
    total: Blocks
    iterations: list[tuple[int, Blocks]]  # summed over GPUs (step wall summed over the GPUs' processes)
    gaps: dict[str, dict[str, dict[str, int]]]  # {"by_cause"|"by_size": {key: {"count", "ns"}}}
    largest_gaps: list[Gap]

    @property
    def denominator(self) -> str:
        n = len(self.gpus)
        return f"window x GPUs = {self.total.window_ns / 1e9:.6f} GPU-s ({n} GPU(s))"

    def share(self, block: str) -> float | None:
        return getattr(self.total, block) / self.total.window_ns if self.total.window_ns else None

    def per_unit(self, value: int | None) -> float | None:
        """``value`` (a sum over GPUs and units) per unit (iteration or window) per GPU."""
        n = max(self.n_iterations, 1) * max(len(self.gpus), 1)
        return None if value is None else value / n

    @property
    def straggler(self) -> GpuBudget | None:
        return max(self.gpus, key=lambda g: g.blocks.window_ns) if len(self.gpus) > 1 else None

    def step_samples(self) -> list[float]:
        """Step time per iteration (ns, mean over GPUs): the host's marker range where every iteration has one,
        else the GPU window. Empty for a window budget (no iterations)."""
        n = max(len(self.gpus), 1)
        if self.iterations and all(b.step_wall_ns is not None for _, b in self.iterations):
            return [(b.step_wall_ns or 0) / n for _, b in self.iterations]
        return [b.window_ns / n for _, b in self.iterations]

    @property
    def step_source(self) -> str:
        """Where the step time comes from: "host" (the marker range), "gpu" (the GPU window) or "" (none)."""
        if not self.iterations:
            return ""
        return "host" if all(b.step_wall_ns is not None for _, b in self.iterations) else "gpu"

    def to_stored(self) -> dict[str, Any]:
        """The budget as a baseline stores it: totals per GPU and per iteration (summed over GPUs), gaps."""
        its = self.iterations
        return {
            "format": 1, "unit": self.unit, "window": self.window, "n_iterations": self.n_iterations,
            "gpus": [{"gpu": g.gpu, "rank": g.rank, "label": g.label, **g.blocks.as_dict(),
                      "collective_wait_ns": g.collective_wait_ns} for g in self.gpus],
            "total": self.total.as_dict(),
            "iterations": {"iteration": [k for k, _ in its],
                           **{f: [getattr(b, f) for _, b in its] for f in (*FIELDS, "step_wall_ns")}},
            "gaps": self.gaps,
            "largest_gaps": [vars(g) for g in self.largest_gaps],
        }


def stored_budget_ok(d: Any) -> bool:
    """Whether ``d`` has the shape ``Budget.to_stored`` writes (an imported file's summary is checked before it
    is stored): its blocks integers (or null where allowed), its lists as long as the iterations, its texts text."""

    def ns(v: Any, none: bool = False) -> bool:
        return (v is None and none) or (isinstance(v, int) and not isinstance(v, bool) and abs(v) < 1 << 62)

    def blocks(b: Any) -> bool:
        return isinstance(b, dict) and all(ns(b.get(f)) for f in FIELDS) and ns(b.get("step_wall_ns"), none=True)

    if not isinstance(d, dict) or d.get("unit") not in ("iteration", "window") or not isinstance(d.get("window"), str):
        return False
    its = d.get("iterations")
    gpus = d.get("gpus")
    gaps = d.get("gaps")
    if not (ns(d.get("n_iterations")) and blocks(d.get("total")) and isinstance(its, dict)
            and isinstance(gpus, list) and isinstance(gaps, dict) and isinstance(d.get("largest_gaps"), list)):
        return False
    keys = its.get("iteration")
    if not isinstance(keys, list) or not all(ns(k) for k in keys):
        return False
    for f in (*FIELDS, "step_wall_ns"):
        col = its.get(f)
        if not isinstance(col, list) or len(col) != len(keys) or not all(ns(v, none=f == "step_wall_ns") for v in col):
            return False
    for g in gpus:
        if not (blocks(g) and ns(g.get("gpu")) and ns(g.get("rank"), none=True) and isinstance(g.get("label"), str)
                and ns(g.get("collective_wait_ns"))):
            return False
    for part in ("by_cause", "by_size"):
        table = gaps.get(part)
        if not isinstance(table, dict) or not all(
                isinstance(k, str) and isinstance(v, dict) and ns(v.get("count")) and ns(v.get("ns"))
                for k, v in table.items()):
            return False
    texts = ("cause", "before", "after", "before_range", "after_range")
    for g in d["largest_gaps"]:
        if not (isinstance(g, dict) and set(g) == {*texts, "gpu", "iteration", "start_ns", "duration_ns"}
                and all(isinstance(g[t], str) for t in texts) and ns(g["gpu"]) and ns(g["iteration"], none=True)
                and ns(g["start_ns"]) and ns(g["duration_ns"])):
            return False
    return True


def budget_from_stored(d: dict[str, Any]) -> Budget:
    """A stored budget (``Budget.to_stored``) back; its GPUs carry no per-iteration rows (not stored)."""
    its = d.get("iterations") or {}
    keys = [int(k) for k in its.get("iteration", [])]
    rows = [Blocks.from_dict({f: (its.get(f) or [None] * len(keys))[i] for f in (*FIELDS, "step_wall_ns")})
            for i in range(len(keys))]
    gpus = [GpuBudget(gpu=int(g["gpu"]), rank=g.get("rank"), label=str(g.get("label", "")), blocks=Blocks.from_dict(g),
                      collective_wait_ns=int(g.get("collective_wait_ns") or 0)) for g in d.get("gpus", [])]
    gaps = d.get("gaps") or {"by_cause": {}, "by_size": {}}
    return Budget(unit=str(d.get("unit", "window")), window=str(d.get("window", "")),
                  n_iterations=int(d.get("n_iterations") or 0), gpus=gpus, total=Blocks.from_dict(d.get("total", {})),
                  iterations=list(zip(keys, rows)), gaps=gaps,
                  largest_gaps=[Gap(**g) for g in d.get("largest_gaps", [])])


def category_codes(categories: list[str]) -> np.ndarray:
    """COMPUTE / COMMUNICATION / MEMORY per kernel name code, from ``classify``'s category per name."""
    code = {"communication": COMMUNICATION, "memory": MEMORY}
    return np.array([code.get(str(c), COMPUTE) for c in categories], dtype=np.int8)


def compute_budget(window: Window, category_of_code: np.ndarray, whole: bool = False,
                   labels: np.ndarray | None = None) -> Budget:
    """The budget of ``window`` (``whole``: each GPU's whole capture, first activity to last, as HTA's temporal
    breakdown). ``category_of_code``: COMPUTE / COMMUNICATION / MEMORY per kernel name code; ``labels``: a short
    name per code for the gaps shown (default: the full names)."""
    p = window.profile
    k, a = p.columns, p.activities
    iterations = window.mode == WindowMode.ITERATIONS and not whole
    kept_gpus = sorted(set(np.flatnonzero(np.bincount(window.column("gpu"))).tolist())) if window.n_launches else []
    if window.spec.gpu is not None:
        kept_gpus = [g for g in kept_gpus if g == window.spec.gpu]
    k_order = np.argsort(k.gpu, kind="stable")
    k_bounds = np.searchsorted(k.gpu[k_order], np.arange(len(p.gpu_columns.gpu) + 1))
    a_order = np.argsort(a.gpu, kind="stable")
    a_bounds = np.searchsorted(a.gpu[a_order], np.arange(len(p.gpu_columns.gpu) + 1))
    ranks = _ranks(p)
    steps = _host_steps(window) if iterations else {}
    gpus: list[GpuBudget] = []
    by_cause = {c: {"count": 0, "ns": 0} for c in GAP_CAUSES}
    by_size = {label: {"count": 0, "ns": 0} for _, label in GAP_BUCKETS}
    largest: list[Gap] = []
    for g in kept_gpus:
        ki = k_order[k_bounds[g]:k_bounds[g + 1]]
        ai = a_order[a_bounds[g]:a_bounds[g + 1]]
        start = np.concatenate([k.start[ki], a.start[ai]])
        end = np.concatenate([k.end[ki], a.end[ai]])
        cls = np.concatenate([category_of_code[k.name[ki]], np.full(len(ai), MEMORY, dtype=np.int8)])
        launch = np.concatenate([k.launch_start[ki] if k.launch_start is not None else np.full(len(ki), -1),
                                 a.launch_start[ai]])
        tid = np.concatenate([k.launch_tid[ki] if k.launch_tid is not None else np.full(len(ki), -1),
                              a.launch_tid[ai]])
        what = _Names(p, ki, a.kind[ai], labels)
        if iterations:
            keys, edges = _iteration_edges(window, ki, g)
        else:
            keys, edges = [], _whole_edges(window, start, end, whole)
        order = np.argsort(start, kind="stable")  # the one sort (nearly sorted already: ~linear)
        start, end, cls, launch, tid = start[order], end[order], cls[order], launch[order], tid[order]
        what.order = order
        busy = _union(start, end, ends=True)
        blocks, per_window = _sweep(start, end, cls, edges, busy[:2])
        gb = GpuBudget(gpu=g, rank=ranks.get(g), label=gpu_label(p, g), blocks=blocks)
        if iterations:
            pid = int(p.gpu_columns.pid[g]) if g < len(p.gpu_columns.pid) else -1
            total_step = 0
            for key, b in zip(keys, per_window):
                b.step_wall_ns = _step_of(steps, pid, key)
                total_step += b.step_wall_ns or 0
                gb.iterations.append((key, b))
            blocks.step_wall_ns = total_step if any(b.step_wall_ns is not None for _, b in gb.iterations) else None
        cause, size, g_start, nxt, prv = _gaps(busy, edges, launch, tid, p.syncs)
        # counts and sums by cause and by size bucket in numpy: a capture has about one gap per launch
        for code, c in enumerate(GAP_CAUSES):
            sel = cause == code
            by_cause[c]["count"] += int(np.count_nonzero(sel))
            by_cause[c]["ns"] += int(size[sel].sum())
        bucket = np.searchsorted(_BUCKET_LIMITS, size, side="right")
        for i, (_, label) in enumerate(GAP_BUCKETS):
            sel = bucket == i
            by_size[label]["count"] += int(np.count_nonzero(sel))
            by_size[label]["ns"] += int(size[sel].sum())
        top = np.argpartition(-size, LARGEST_GAPS)[:LARGEST_GAPS] if len(size) > LARGEST_GAPS else np.arange(len(size))
        for i in top.tolist():
            it = int(np.searchsorted(edges, g_start[i], side="right")) - 1
            largest.append(Gap(gpu=g, iteration=keys[it] if keys and 0 <= it < len(keys) else None,
                               start_ns=int(g_start[i] - edges[0]), duration_ns=int(size[i]),
                               cause=GAP_CAUSES[int(cause[i])], before=what.name(int(prv[i])),
                               after=what.name(int(nxt[i])), before_range=_range_at(p, launch, tid, int(prv[i])),
                               after_range=_range_at(p, launch, tid, int(nxt[i]))))
        largest.sort(key=lambda x: -x.duration_ns)
        del largest[LARGEST_GAPS:]
        gpus.append(gb)
    _collective_waits(window, category_of_code, gpus)
    total = Blocks()
    for gb in gpus:
        total.add(gb.blocks)
    summed: dict[int, Blocks] = {}
    for gb in gpus:
        for key, b in gb.iterations:
            summed.setdefault(key, Blocks()).add(b)
    n_it = len(window.iteration_keys) if iterations else 0
    desc = window.describe() if not whole else "whole capture per GPU (first activity to last)"
    return Budget(unit="iteration" if iterations else "window", window=desc, n_iterations=n_it, gpus=gpus,
                  total=total, iterations=sorted(summed.items()), gaps={"by_cause": by_cause, "by_size": by_size},
                  largest_gaps=largest)


# ------------------------------------------------------------------------------------------ windows


def _iteration_edges(window: Window, ki: np.ndarray, g: int) -> tuple[list[int], np.ndarray]:
    """The chosen iteration keys and the n+1 window edges on GPU ``g`` (``ki``: its kernels' rows)."""
    p = window.profile
    avail = np.asarray(window.available_keys, dtype=np.int64)
    chosen = list(window.iteration_keys)
    it = window.iteration[ki]
    inside = it >= 0
    pos = np.searchsorted(avail, it[inside])
    last_end = np.full(len(avail), _NEVER, dtype=np.int64)
    first_start = np.full(len(avail), np.iinfo(np.int64).max, dtype=np.int64)
    np.maximum.at(last_end, pos, p.columns.end[ki][inside])
    np.minimum.at(first_start, pos, p.columns.start[ki][inside])
    at = np.searchsorted(avail, np.asarray(chosen, dtype=np.int64))
    prev = at[0] - 1
    if prev >= 0 and last_end[prev] != _NEVER:
        e0 = int(last_end[prev])
    else:
        got = first_start[at][first_start[at] != np.iinfo(np.int64).max]
        e0 = int(got.min()) if len(got) else 0
    ends = last_end[at]
    edges = np.maximum.accumulate(np.r_[e0, np.where(ends == _NEVER, e0, ends)])
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


def _union(s: np.ndarray, e: np.ndarray, ends: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Intervals sorted by start -> disjoint intervals covering the same instants, and for each the position of
    the interval that opens it and (``ends``) of the one that reaches its end (the last to finish)."""
    if not len(s):
        z = np.zeros(0, dtype=np.int64)
        return z, z.copy(), z.copy(), z.copy()
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.r_[first[1:] - 1, len(s) - 1]
    if not ends:
        return s[first], reach[last], first, last
    # the position that set the running end (ties: the later one), read at each group's last position
    setter = np.maximum.accumulate(np.where(e >= reach, np.arange(len(e)), 0))
    return s[first], reach[last], first, setter[last]


def _covered(s: np.ndarray, e: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Time covered by the disjoint sorted intervals (s, e) before each instant of ``t``."""
    if not len(s):
        return np.zeros(len(t), dtype=np.int64)
    cum = np.r_[0, np.cumsum(e - s)]
    i = np.searchsorted(s, t, side="right") - 1
    j = np.maximum(i, 0)
    inside = np.clip(t - s[j], 0, e[j] - s[j])
    return np.where(i < 0, 0, cum[j] + inside)


def _sweep(s: np.ndarray, e: np.ndarray, cls: np.ndarray, edges: np.ndarray,
           busy: tuple[np.ndarray, np.ndarray]) -> tuple[Blocks, list[Blocks]]:
    """The blocks of each window between consecutive ``edges``, and their sum. ``s``/``e``/``cls``: every
    activity of the GPU sorted by start (a subset of a sorted array stays sorted: one sort for five unions);
    ``busy``: the union of all of them."""

    def within(mask: np.ndarray | None) -> np.ndarray:
        u = busy if mask is None else _union(s[mask], e[mask])[:2]
        return np.diff(_covered(u[0], u[1], edges))

    comp, comm, mem = within(cls == COMPUTE), within(cls == COMMUNICATION), within(cls == MEMORY)
    cx, cxm = within(cls <= COMMUNICATION), within(None)
    length = np.diff(edges)
    out = []
    for i in range(len(length)):
        comm_exp = int(cx[i] - comp[i])
        mem_exp = int(cxm[i] - cx[i])
        out.append(Blocks(window_ns=int(length[i]), compute_ns=int(comp[i]), communication_exposed_ns=comm_exp,
                          communication_overlapped_ns=int(comm[i]) - comm_exp, memory_exposed_ns=mem_exp,
                          memory_overlapped_ns=int(mem[i]) - mem_exp, idle_ns=int(length[i] - cxm[i])))
    total = Blocks()
    for b in out:
        total.add(b)
    return total, out


# ------------------------------------------------------------------------------------------ idle gaps


_BUCKET_LIMITS = np.array([limit for limit, _ in GAP_BUCKETS if limit is not None], dtype=np.int64)


def _gaps(busy: tuple[np.ndarray, ...], edges: np.ndarray, launch: np.ndarray, tid: np.ndarray,
          syncs) -> tuple[np.ndarray, ...]:
    """The idle gaps inside the window (between the busy intervals ``busy``: ``_union`` of every activity, its
    positions those of ``launch``/``tid``), as arrays: cause (an index of ``GAP_CAUSES``), ns, start, the
    position after and the position before each."""
    s, e, opener, closer = busy
    lo, hi = int(edges[0]), int(edges[-1])
    if not len(s) or hi <= lo:
        z = np.zeros(0, dtype=np.int64)
        return z.astype(np.int8), z, z, z, z
    g_start, g_end = np.maximum(e[:-1], lo), np.minimum(s[1:], hi)  # clipped to the window
    keep = g_end > g_start
    g_start, g_end = g_start[keep], g_end[keep]
    nxt, prv = opener[1:][keep], closer[:-1][keep]
    size = g_end - g_start
    nl = launch[nxt]
    cause = np.full(len(size), GAP_CAUSES.index("launch"), dtype=np.int8)
    cause[nl < 0] = GAP_CAUSES.index("unknown")
    host = np.flatnonzero((nl >= g_start) & (size >= LAUNCH_GAP_NS))  # a few: the long waits
    cause[host] = GAP_CAUSES.index("host")
    cause[host[_blocked(syncs, tid[nxt[host]] >> 24, g_start[host])]] = GAP_CAUSES.index("sync")
    return cause, size, g_start, nxt, prv


def _blocked(syncs, pid: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Whether a synchronize call of process ``pid`` was in progress at each instant ``at``."""
    out = np.zeros(len(at), dtype=bool)
    if not len(syncs) or not len(at):
        return out
    for p in sorted(set(pid.tolist())):  # (np.unique would import numpy.ma: ~10 ms of every top)
        mine = syncs.pid == p
        if not mine.any():
            continue
        order = np.argsort(syncs.start[mine], kind="stable")
        s, e = syncs.start[mine][order], np.maximum.accumulate(syncs.end[mine][order])
        sel = np.flatnonzero(pid == p)
        i = np.searchsorted(s, at[sel], side="right") - 1
        out[sel] = (i >= 0) & (e[np.maximum(i, 0)] >= at[sel])
    return out


class _Names:
    """Names of a GPU's rows (its kernels, then its memcpy/memset), looked up only for the gaps shown."""

    def __init__(self, profile, ki: np.ndarray, akind: np.ndarray, labels: np.ndarray | None) -> None:
        self.profile, self.ki, self.akind, self.labels = profile, ki, akind, labels
        self.order: np.ndarray | None = None  # position in start order -> row (kernels, then memcpy/memset)

    def name(self, pos: int) -> str:
        row = int(self.order[pos]) if self.order is not None else pos
        if row < len(self.ki):
            c = self.profile.columns
            code = int(c.name[self.ki[row]])
            if self.labels is not None and code < len(self.labels):
                return str(self.labels[code])
            return str(c.names[code])
        return "memset" if int(self.akind[row - len(self.ki)]) == 1 else "memcpy"


def _range_at(profile, launch: np.ndarray, tid: np.ndarray, row: int) -> str:
    """The innermost host range (op or NVTX) around the launch call of ``row`` ('' when none)."""
    t, at = int(tid[row]), int(launch[row])
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
    if len(gpus) < 2:
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

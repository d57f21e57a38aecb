"""The GPU time budget's data (``analysis.budget``): the blocks of a window, a GPU's and a capture's budget, the
stored form a baseline keeps (``Budget.to_stored`` / ``budget_from_stored``) and its import check."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy only for ``category_codes``: a stored budget renders without it (``kbase top`` cached)
    import numpy as np

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
        mine, theirs = self.__dict__, other.__dict__  # (a GPU's iterations are summed by the hundred)
        for f in FIELDS:
            mine[f] += theirs[f]
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
    import numpy as np

    code = {"communication": COMMUNICATION, "memory": MEMORY}
    return np.array([code.get(str(c), COMPUTE) for c in categories], dtype=np.int8)

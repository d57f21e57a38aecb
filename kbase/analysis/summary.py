"""A leaderboard's summary: the window and the leaderboard as a whole. Plain data (no numpy or pandas),
so a stored leaderboard can be rendered without the data stack (``kbase show`` on a SQLite store)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from kbase.analysis.columns import row_fields

# A leaderboard table's columns, in order (a per-GPU view has "gpu" first): declared in ``analysis.columns``.
COLUMNS = row_fields()


@dataclass
class LeaderboardSummary:
    """The window and the leaderboard as a whole. Times in ns; shares are fractions of the window's
    GPU time (window length x GPUs), ``*_share_kernel`` of total kernel time."""

    source: str
    format: str
    exporter: str
    gpu_models: list[str]
    gpus: int
    window: str  # human description of the window actually used
    aligned: bool
    mode: str  # WindowMode
    marker: str
    iterations: int
    iteration_keys: list[int]
    warmup_skipped: int
    window_start_ns: int
    window_end_ns: int
    window_ns: int
    window_gpu_ns: int
    total_kernel_ns: int
    kernel_ns_per_iter: float | None
    compute_ns: int
    communication_ns: int
    memory_ns: int
    busy_share: float | None
    compute_share: float | None
    communication_share: float | None
    memory_share: float | None
    share_denominator: str
    top1_share_kernel: float
    top5_share_kernel: float
    shape: list[str]
    kernels: int
    launches: int
    unattributed_no_launch: int
    outside_iterations: int
    step_wall_ns: float | None = None
    # the GPU time budget (``analysis.budget``: ``Budget.to_stored``); None when stored before it existed
    budget: dict | None = None
    # whether the capture spans its whole program (``analysis.span``: "program", "slice"; None: it does not say,
    # or stored before kbase looked) and why, in one clause
    capture_span: str | None = None
    capture_span_why: str | None = None

    @classmethod
    def from_dict(cls, data: dict) -> LeaderboardSummary:
        """From stored JSON: unknown keys are ignored, missing ones take neutral values (older stores)."""
        known = {f.name: f for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for name in known:
            if name not in values:
                values[name] = _NEUTRAL.get(name)
        return cls(**values)


# Values for keys an older store's summary lacks.
_NEUTRAL: dict[str, object] = {
    "source": "", "format": "", "exporter": "", "gpu_models": [], "gpus": 0, "window": "", "aligned": False,
    "mode": "whole", "marker": "", "iterations": 0, "iteration_keys": [], "warmup_skipped": 0,
    "window_start_ns": 0, "window_end_ns": 0, "window_ns": 0, "window_gpu_ns": 0, "total_kernel_ns": 0,
    "compute_ns": 0, "communication_ns": 0, "memory_ns": 0, "share_denominator": "", "top1_share_kernel": 0.0,
    "top5_share_kernel": 0.0, "shape": [], "kernels": 0, "launches": 0, "unattributed_no_launch": 0,
    "outside_iterations": 0,
}

"""What the HTML report draws: plain typed dataclasses, with no store, SQL or HTML in them.

``kbase.report_data`` (``kbase.api.reporting``) builds a :class:`ReportData` — its diff is the ``GateResult``
of ``kbase.gate``, its steps those of ``kbase.steps`` — and the renderer (``site.build_report``) only
formats these objects: the report states what the CLI states. Every time is nanoseconds **per iteration
per GPU** (the unit of ``kbase diff``), or per window-second for a capture without an iteration marker
(``unit``).

Names (kernel names, commit subjects, branch names) come from profiles and git and are untrusted:
the renderer escapes them; nothing here needs to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kbase.comparison.result import GateResult

REPORT_SCHEMA = "kbase.report/1"


@dataclass(frozen=True)
class CommitRef:
    """One commit of the history, as the report labels it."""

    commit: str  # full hash
    date: str | None  # ISO 8601 (UTC) commit date; the capture time when the commit date is unknown
    subject: str = ""  # first line of the commit message ("" when git was not consulted)
    branch: str = ""
    baseline_ids: tuple[int, ...] = ()  # the pooled repeat captures at this commit
    fingerprint: str = ""  # comparability key (GPU model+count, workload, window spec)
    bisect: bool = False  # measured only by ``kbase bisect`` (its midpoints), not by the job's own snapshots


@dataclass(frozen=True)
class BudgetBar:
    """The GPU time budget of one iteration (a leaderboard's) or of one commit (the trend's, repeat captures
    pooled), from the budget stored with each baseline (``summary.budget``, docs/budget.md): per iteration per
    GPU, or per GPU-second of window for a capture without iteration markers. The four blocks add up to the
    window (``window_ns``)."""

    label: str  # the iteration key, or the commit
    compute_ns: float
    communication_ns: float  # exposed: not hidden under compute
    memory_ns: float  # exposed: not hidden under compute or communication
    idle_ns: float
    step_ns: float | None = None  # the step time (host marker range, else the GPU window); None: no step

    @property
    def window_ns(self) -> float:
        return self.compute_ns + self.communication_ns + self.memory_ns + self.idle_ns


@dataclass
class BudgetView:
    """One baseline's budget as the leaderboard page draws it: the whole window and each iteration."""

    unit: str  # "iteration" | "window"
    step_source: str  # "host" (marker range) | "gpu" (GPU window) | "" (no iterations: no step)
    gpus: int
    total: BudgetBar
    iterations: list[BudgetBar] = field(default_factory=list)
    communication_overlapped_ns: float = 0.0  # per iteration per GPU, hidden under compute
    memory_overlapped_ns: float = 0.0


@dataclass
class CommitPoint:
    """The whole iteration at one commit (repeat captures pooled, as ``kbase diff`` pools them)."""

    ref: CommitRef
    gpus: int
    units: float  # iterations (or window-seconds) summed over the pooled captures
    unit: str  # "iteration" | "window-second"
    kernel_ns: float  # all kernels, per iteration per GPU
    compute_ns: float
    communication_ns: float
    memory_ns: float
    wall_ns: float  # GPU wall time of one iteration (window length / iterations)
    budget: BudgetBar | None = None  # None: a capture at this commit was stored before kbase kept the budget


@dataclass
class KernelSeries:
    """One kernel over the history; every list is aligned with ``ReportData.commits`` (None: absent)."""

    name: str  # full demangled name
    short_name: str
    category: str  # compute | communication | memory
    tc: str  # tensor-core state: "tc" | "fallback" | "na"
    per_iter_ns: list[float | None]
    launches_per_iter: list[float | None]
    ns_per_launch: list[float | None]
    band_low_ns: list[float | None]  # iteration-to-iteration spread: 10th percentile of per-iteration time
    band_high_ns: list[float | None]  # 90th percentile


@dataclass(frozen=True)
class StepMarker:
    """A step (``kbase steps``) in a series, drawn as a vertical line at ``index``."""

    index: int  # position in ReportData.commits of the first commit after the step
    kernel: str | None  # full kernel name; None: the total kernel time
    delta_pct: float  # size of the step, in percent of the level before it
    label: str = ""
    kind: str = "step"  # "step" | "creep"
    short_name: str = ""
    from_commit: str = ""  # the last commit at the old level: the step's diff page compares it ...
    to_commit: str = ""  # ... with the first commit at the new level (a creep: at its last level)
    effect: float = float("nan")  # on the iteration
    before_ns: float | None = None  # the levels before and after (per iteration per GPU), as kbase steps states them
    after_ns: float | None = None
    page: str = ""  # the step's diff page (``StepDiff.page``), "" when it has none


@dataclass
class StepDiff:
    """The diff page of a detected step: ``kbase.gate`` of the step's commits (``before`` -> ``after``)."""

    before: str  # full commit hashes
    after: str
    page: str  # file name: diff-<before>-<after>.html
    gate: GateResult | None  # None: kbase gate of the pair refused it (``note`` says why)
    note: str = ""
    labels: list[str] = field(default_factory=list)  # the steps it shows (several kernels may step at one commit)


@dataclass
class LeaderboardRow:
    name: str
    short_name: str
    category: str
    tc: str
    per_iter_ns: float | None
    launches_per_iter: float | None
    avg_ns: float  # per launch
    share_window: float | None  # of the window's GPU time (window length x GPUs)
    share_kernel: float | None  # of all kernel time
    amdahl_ceiling: float | None  # 1 / (1 - share_window); None when unbounded
    fragmented: bool = False
    count: int = 0  # launches in the window, all GPUs
    total_ns: float | None = None  # in the window, all GPUs
    min_ns: float | None = None
    max_ns: float | None = None
    median_ns: float | None = None
    tc_reason: str = ""  # why its TC state; a ⚠'s fix (``analysis.diagnosis.annotate``, as ``kbase top`` says it)
    diagnosis: str | None = None  # expected / not_expected / unhealthy; None: not fat
    diagnosis_reason: str = ""


@dataclass
class OpKernelRow:
    """One kernel of an op: the part of its time that op launched."""

    name: str
    short_name: str
    per_iter_ns: float | None
    launches_per_iter: float | None
    share_op: float | None  # of the op's time


@dataclass
class OpRow:
    """One op of a leaderboard grouped by op (``kbase top --by op``), with its kernels (the drill-down)."""

    op: str | None  # None: kernels launched by no op
    per_iter_ns: float | None
    launches_per_iter: float | None
    share_window: float | None
    share_kernel: float | None
    kernels: list[OpKernelRow] = field(default_factory=list)


@dataclass
class LeaderboardView:
    """One baseline's leaderboard: where its iteration goes."""

    baseline_id: int
    ref: CommitRef
    gpus: int
    gpu_models: str
    iterations: int
    aligned: bool
    window_desc: str
    wall_ns: float  # one iteration on one GPU
    compute_ns: float  # per iteration per GPU
    communication_ns: float
    memory_ns: float
    rows: list[LeaderboardRow] = field(default_factory=list)  # by time, largest first
    ops: list[OpRow] | None = None  # grouped by op, largest first (None: the baseline stores no op information)
    budget: BudgetView | None = None  # None: stored before kbase kept the GPU time budget


@dataclass
class ReportData:
    """Everything one report shows, for one workload (and optionally one branch)."""

    workload: str
    commits: list[CommitPoint]  # oldest first
    kernels: list[KernelSeries]  # the top kernels, largest first; the rest is drawn as "other"
    branch: str | None = None
    title: str = ""
    steps: list[StepMarker] = field(default_factory=list)
    gate: GateResult | None = None  # kbase.gate of the diff page's pair (None: no diff page)
    step_diffs: list[StepDiff] = field(default_factory=list)  # a diff page per detected step (largest first)
    leaderboard: LeaderboardView | None = None
    generated_at: str = ""  # ISO 8601
    notes: list[str] = field(default_factory=list)
    pair_notes: list[str] = field(default_factory=list)  # why the diff page shows its pair (``latest_change``)
    budget_notes: list[str] = field(default_factory=list)  # what the budget trend says of commits without one

"""The store's tables (SQLModel), all in one place. Alembic's ``env.py`` reads ``SQLModel.metadata``.

- ``Baseline``: one run's leaderboard on its window, with when and at which commit it was taken.
- ``KernelName``: each distinct kernel name once (long C++ templates repeat across thousands of
  baselines); rows refer to it by id, and its ``name_hash`` is the indexable key.
- ``BaselineKernel``: one leaderboard row per kernel per baseline, with its per-iteration samples
  packed as float32 (ns per iteration, summed over GPUs) in key order of ``Baseline.iteration_keys``,
  and its launch sketch (``analysis.sketch``: launch-duration quantiles per launch-order chunk).
- ``OpName``: each distinct op key once (``analysis.ops``: ``aten::mm``, ``Linear/aten::mm``), with its op
  without scope (the unit an algorithm swap is judged on).
- ``BaselineKernelOp``: per baseline, each kernel's launches and time split by the op that launched them (a
  kernel may serve several ops: elementwise kernels), with per-iteration samples like the kernel rows'. A
  baseline without op information (stored before 0010, or a profile without op ranges) has none: it compares
  with the library-swap rule.
- ``Acceptance``: a known regression acknowledged with ``kbase accept``.

All nanosecond quantities are BIGINT: a window's GPU time overflows 32 bits in about 2 s.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from sqlalchemy import BigInteger, Column, ForeignKey, Index, Integer, LargeBinary, Table, Text
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


class Baseline(SQLModel, table=True):
    __tablename__ = "baseline"
    __table_args__ = (
        Index("ix_baseline_workload_commit", "workload", "commit"),
        Index("ix_baseline_workload_created", "workload", "created_at"),
        Index("ix_baseline_created_at", "created_at", "id"),  # kbase list: newest first, any workload
        # Idempotence under concurrency: one capture (file and window) at one commit is stored once,
        # unless re-stored on purpose (--force: the next copy number). A constraint, not a check.
        Index("ux_baseline_capture", "workload", "commit", "source_sha256", "window_spec", "capture_copy",
              unique=True),
        Index("ix_baseline_commit_probe", "commit", "source_probe"),  # kbase top FILE: stored at this commit?
    )

    id: int | None = Field(default=None, primary_key=True)
    created_at: datetime = Field(default_factory=utcnow)  # aware, stored as UTC
    workload: str = Field(max_length=200)
    commit: str = Field(max_length=64)  # full hash
    commit_date: datetime | None = None  # aware, stored as UTC
    branch: str = Field(default="", max_length=300)  # "" when detached
    detached: bool = False
    dirty: bool = False
    source_name: str = Field(sa_type=Text)
    source_sha256: str = Field(max_length=64, index=True)
    source_size: int = Field(sa_type=BigInteger)
    source_format: str = Field(max_length=32)
    # Identity of the file (no full read): its mtime when stored and the probe, a sha256 over its content
    # (small files) or device, inode, size, times and first/last 64 KiB, with its SQLite side files
    # (``readers.source.source_identity``). None before 0006, or when the identity was unsure; probes of
    # the older definition (size, first/last 64 KiB) never match a new one: such files are read again.
    source_mtime_ns: int | None = Field(default=None, sa_type=BigInteger)
    source_probe: str | None = Field(default=None, max_length=64)
    exporter_version: str = Field(default="", sa_type=Text)
    gpu_models: str = Field(default="", sa_type=Text)  # comma-separated, sorted
    gpu_count: int
    host: str = Field(default="", max_length=300)
    window_spec: str = Field(sa_type=Text)  # WindowSpec.key()
    window_desc: str = Field(sa_type=Text)  # human description of the window actually used
    marker: str = Field(default="", sa_type=Text)
    aligned: bool
    warmup_skipped: int = 0
    iterations_used: int = 0
    iteration_keys: str = Field(default="[]", sa_type=Text)  # JSON list of ints
    window_ns: int = Field(sa_type=BigInteger)
    window_gpu_ns: int = Field(sa_type=BigInteger)
    total_kernel_ns: int = Field(sa_type=BigInteger)
    compute_ns: int = Field(default=0, sa_type=BigInteger)
    communication_ns: int = Field(default=0, sa_type=BigInteger)
    memory_ns: int = Field(default=0, sa_type=BigInteger)
    step_wall_ns: float | None = None  # mean CPU step time where the profile has it (Kineto)
    fingerprint: str = Field(max_length=64, index=True)  # comparability: GPU model+count, workload, window
    summary_json: str = Field(default="{}", sa_type=Text)
    kbase_version: str = Field(max_length=32)
    capture_copy: int = Field(default=0, sa_column_kwargs={"server_default": "0"})  # 0; n for the n-th --force
    tags: str = Field(default="[]", sa_type=Text)  # JSON list
    note: str = Field(default="", sa_type=Text)


class KernelName(SQLModel, table=True):
    __tablename__ = "kernel_name"

    id: int | None = Field(default=None, primary_key=True)
    name_hash: str = Field(max_length=40, unique=True)  # sha1 of the full demangled name
    name: str = Field(sa_type=Text)
    family_hash: str = Field(max_length=40, index=True)
    family: str = Field(sa_type=Text)
    short_name: str = Field(sa_type=Text)
    category: str = Field(max_length=16)
    tc: str = Field(max_length=16)


class BaselineKernel(SQLModel, table=True):
    __tablename__ = "baseline_kernel"
    # one kernel across baselines (``kbase history``, the report's series) read from the index alone: the
    # columns a history row shows ride along, so 10,000 baselines are one index range, not 10,000 row reads
    __table_args__ = (Index("ix_baseline_kernel_history", "name_id", "baseline_id", "count", "total_ns", "avg_ns",
                            "per_iter_ns", "share_window"),)

    id: int | None = Field(default=None, primary_key=True)
    baseline_id: int = Field(
        sa_column=Column(Integer, ForeignKey("baseline.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    name_id: int = Field(sa_column=Column(Integer, ForeignKey("kernel_name.id"), nullable=False))
    rank: int
    gpus: int
    count: int = Field(sa_type=BigInteger)
    total_ns: int = Field(sa_type=BigInteger)
    avg_ns: float
    median_ns: float
    min_ns: int = Field(sa_type=BigInteger)
    max_ns: int = Field(sa_type=BigInteger)
    std_ns: float
    per_iter_ns: float | None = None
    count_per_iter: float | None = None
    share_window: float | None = None
    share_kernel: float | None = None
    amdahl_ceiling: float | None = None
    fragmented: bool = False
    iter_ns: bytes | None = Field(default=None, sa_type=LargeBinary)  # float32 per iteration key
    iter_count: bytes | None = Field(default=None, sa_type=LargeBinary)  # float32 launches per key
    # float32 (8 launch-order chunks x (16 duration quantiles, launches, total ns)); NULL before 0005
    launch_sketch: bytes | None = Field(default=None, sa_type=LargeBinary)


class OpName(SQLModel, table=True):
    __tablename__ = "op_name"

    id: int | None = Field(default=None, primary_key=True)
    name_hash: str = Field(max_length=40, unique=True)  # sha1 of the op key
    key: str = Field(sa_type=Text)  # the op key: "scope/op", or the op
    op: str = Field(sa_type=Text)  # the op without its scope


class BaselineKernelOp(SQLModel, table=True):
    __tablename__ = "baseline_kernel_op"

    id: int | None = Field(default=None, primary_key=True)
    baseline_id: int = Field(
        sa_column=Column(Integer, ForeignKey("baseline.id", ondelete="CASCADE"), nullable=False, index=True)
    )
    name_id: int = Field(sa_column=Column(Integer, ForeignKey("kernel_name.id"), nullable=False))
    op_id: int | None = Field(default=None, sa_column=Column(Integer, ForeignKey("op_name.id"), nullable=True))
    count: int = Field(sa_type=BigInteger)
    total_ns: int = Field(sa_type=BigInteger)
    iter_ns: bytes | None = Field(default=None, sa_type=LargeBinary)  # float32 per iteration key, as kernel rows'


class Acceptance(SQLModel, table=True):
    __tablename__ = "acceptance"
    __table_args__ = {"sqlite_autoincrement": True}  # a revoked id is never handed out again (0007)

    id: int | None = Field(default=None, primary_key=True)
    workload: str = Field(max_length=200, index=True)
    pattern: str = Field(sa_type=Text)  # glob or /regex/ on kernel names
    commit: str = Field(max_length=64)
    reason: str = Field(sa_type=Text)
    author: str = Field(default="", max_length=300)
    created_at: datetime = Field(default_factory=utcnow)
    expires: date | None = None


# The Core tables behind the models, typed for queries (SQLModel does not declare ``__table__``).
BASELINE: Table = Baseline.__table__  # type: ignore[attr-defined]
KERNEL_NAME: Table = KernelName.__table__  # type: ignore[attr-defined]
BASELINE_KERNEL: Table = BaselineKernel.__table__  # type: ignore[attr-defined]
ACCEPTANCE: Table = Acceptance.__table__  # type: ignore[attr-defined]
OP_NAME: Table = OpName.__table__  # type: ignore[attr-defined]
BASELINE_KERNEL_OP: Table = BaselineKernelOp.__table__  # type: ignore[attr-defined]

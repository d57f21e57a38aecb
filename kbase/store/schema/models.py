"""The store's tables (SQLModel), all in one place. Alembic's ``env.py`` reads ``SQLModel.metadata``.

- ``Baseline``: one run's leaderboard on its window, with when and at which commit it was taken, and why
  (``kind``: a snapshot, or a ``kbase bisect`` midpoint).
- ``KernelName``: each distinct kernel name once (long C++ templates repeat across thousands of
  baselines); rows refer to it by id, and its ``name_hash`` is the indexable key.
- ``BaselineKernels``: one row per baseline holding its whole kernel table — every leaderboard column,
  the per-iteration samples (ns and launches per key of ``Baseline.iteration_keys``, summed over GPUs)
  and the launch sketches (``analysis.sketch``) — as packed-column blobs (``kernel_blobs``). Until 0009
  this was a row per kernel (``baseline_kernel``): ~700 KiB per 500-kernel x 50-iteration baseline, now
  ~40-60 KiB (docs/store-format.md).
- ``WorkloadKernel``: the kernel names each workload has stored.
- ``OpName``: each distinct op key once (``analysis.ops``: ``aten::mm``, ``Linear/aten::mm``), with its op
  without scope (the unit an algorithm swap is judged on); ``BaselineKernels.ops`` refers to it by id.
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
    # From the GPU time budget (0011; the whole budget is in ``summary_json``): the step time per iteration (the
    # host's marker range, else the GPU window; mean over GPUs) and idle ns per unit per GPU, for ``kbase steps``
    # and ``history`` to follow without decoding summaries. NULL: stored before 0011, or no iterations (step).
    step_ns: float | None = None
    idle_ns: float | None = None
    # Why it was stored (0012): "snapshot" (a profiled run of the job), "bisect" (a midpoint ``kbase bisect``
    # captured): prune and the listings tell the probes of a search from the branch's own record.
    kind: str = Field(default="snapshot", max_length=16, sa_column_kwargs={"server_default": "snapshot"})
    # Whether the capture spans its whole program (0013; ``analysis.span``, also in ``summary_json``): "program",
    # "slice", NULL (the capture does not say, or stored before 0013). History noise per run reads it.
    capture_span: str | None = Field(default=None, max_length=16)


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


class BaselineKernels(SQLModel, table=True):
    """One baseline's kernel table (0009): its leaderboard rows, per-iteration samples and launch sketches as
    four packed-column blobs (``kernel_blobs``; docs/store-format.md), ~80-120 bytes per kernel. ``kernel_ids``
    and ``levels`` first: a history read (``kbase steps``, ``history``) reads them alone, ahead of the rest."""

    __tablename__ = "baseline_kernels"

    baseline_id: int = Field(
        sa_column=Column(Integer, ForeignKey("baseline.id", ondelete="CASCADE"), primary_key=True, autoincrement=False)
    )
    format: int  # kernel_blobs.FORMAT of the four blobs
    kernels: int  # rows (kernels) of the table
    # this store's ``kernel_name`` id of each row (``id_lists.id_list``), outside the blobs (0014): the blobs
    # are the same bytes in every store and export; ahead of ``levels``, which history reads with it
    kernel_ids: bytes = Field(sa_type=LargeBinary)
    levels: bytes = Field(sa_type=LargeBinary)  # launches, total ns (what derives from them: computed on read)
    board: bytes = Field(sa_type=LargeBinary)  # the other leaderboard columns
    samples: bytes | None = Field(default=None, sa_type=LargeBinary)  # per iteration key; NULL without keys
    sketches: bytes | None = Field(default=None, sa_type=LargeBinary)  # NULL: none stored (before 0005)
    # each kernel's launches and time by the op that launched it (``op_blobs``); NULL: no op information (a
    # profile without op ranges, or stored before 0010)
    ops: bytes | None = Field(default=None, sa_type=LargeBinary)
    op_ids: bytes | None = Field(default=None, sa_type=LargeBinary)  # ``op_name`` id of each op position of ``ops``


class WorkloadKernel(SQLModel, table=True):
    """Which kernel names a workload's baselines hold (kernel lookup by ``--name``), one row per pair; written
    with each baseline, kept when one is deleted (the name stays findable; its history lists what is left)."""

    __tablename__ = "workload_kernel"
    __table_args__ = {"sqlite_with_rowid": False}

    workload: str = Field(max_length=200, primary_key=True)
    name_id: int = Field(sa_column=Column(Integer, ForeignKey("kernel_name.id"), primary_key=True,
                                          autoincrement=False))


class OpName(SQLModel, table=True):
    """Each distinct op key once (0010), as ``KernelName`` for kernels."""

    __tablename__ = "op_name"

    id: int | None = Field(default=None, primary_key=True)
    name_hash: str = Field(max_length=40, unique=True)  # sha1 of the op key
    key: str = Field(sa_type=Text)  # the op key: "scope/op", or the op
    op: str = Field(sa_type=Text)  # the op without its scope


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
BASELINE_KERNELS: Table = BaselineKernels.__table__  # type: ignore[attr-defined]
WORKLOAD_KERNEL: Table = WorkloadKernel.__table__  # type: ignore[attr-defined]
ACCEPTANCE: Table = Acceptance.__table__  # type: ignore[attr-defined]
OP_NAME: Table = OpName.__table__  # type: ignore[attr-defined]

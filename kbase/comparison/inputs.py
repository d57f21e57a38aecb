"""What a comparison reads, as plain values in memory: both sides' captures, the history the noise model
uses, the acceptances the gate honours. The reading side (``comparison.resolve``, ``comparison.reads``, driven by
``api.comparing``) fills them from git, the store and profile files; the computing side
(``comparison.compare``) takes them and a ``policy.ComparisonPolicy`` and reads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from kbase.analysis.capture import Capture
    from kbase.comparison.side import Side, SideMeta
    from kbase.store.schema.records import AcceptanceRecord, BaselineRecord


@dataclass(frozen=True)
class SideInputs:
    """One side as read, not yet pooled: its captures (repeat captures at one commit, or one profile's), what
    they measured (``meta``), the stored baselines they are (none for a profile) and what resolving it found."""

    label: str
    captures: tuple[Capture, ...]
    meta: SideMeta
    commit: str | None = None
    baselines: tuple[BaselineRecord, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def baseline_ids(self) -> list[int]:
        return [b.id for b in self.baselines if b.id is not None]


@dataclass
class Resolved:
    """One side of a comparison, pooled (``compare.pool``)."""

    side: Side
    commit: str | None
    baseline_ids: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    label: str = ""


@dataclass(frozen=True)
class HistoryInputs:
    """The history the noise model uses: the comparable past baselines on a line (``where`` says which), and, when
    there are enough of them (``min_history``), their levels. Aligned baselines: per-iteration levels per kernel
    (``names`` x ``past``) and their ops' (``op_rows``: (baseline id, op key, op without scope, ns)). Without
    iteration markers: each kernel's total and launch count per capture (``names`` x ``past``)."""

    past: tuple[BaselineRecord, ...]
    where: str
    aligned: bool
    names: tuple[str, ...] = ()
    levels: np.ndarray | None = None  # aligned: per iteration per GPU; else each capture's kernel totals
    counts: np.ndarray | None = None  # not aligned: launches per capture
    op_rows: tuple[tuple, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ComparisonInputs:
    """Everything one comparison needs, read: the two sides, the history of the before side's line (None:
    no stored before side), and the notes of choosing the pair (``--base-ref``'s merge-base)."""

    before: SideInputs
    after: SideInputs
    history: HistoryInputs | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class GateInputs:
    """A comparison's inputs and the acceptances in force over its range (not expired, commit in
    ``(before, after]``)."""

    comparison: ComparisonInputs
    acceptances: tuple[AcceptanceRecord, ...] = ()

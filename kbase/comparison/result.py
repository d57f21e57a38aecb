"""What ``kbase.compare``, ``kbase.gate`` and ``kbase.history`` return: one comparison (both resolved sides
and their diff) and, for the gate, its verdict; one kernel's stored history. Every output — terminal, JSON,
Markdown, JUnit, BMF, the HTML report — is rendered from these objects, so every output states what one
call computed. (Plain dataclasses, no numpy: ``kbase history`` stays light.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbase.comparison.diff import DiffResult
    from kbase.comparison.gate import Verdict
    from kbase.comparison.resolve import Resolved


@dataclass
class Comparison:
    result: DiffResult
    before: Resolved
    after: Resolved
    notes: list[str] = field(default_factory=list)


@dataclass
class GateResult:
    comparison: Comparison
    verdict: Verdict


@dataclass
class KernelHistory:
    """One stored kernel across the baselines that hold it (``kbase.history``)."""

    query: str  # what was asked for
    name: str  # the one stored kernel it names (full demangled name)
    short_name: str
    rows: list[dict[str, Any]]  # one record per baseline holding it, oldest first (plain rows: no pandas)

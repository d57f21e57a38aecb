"""The comparison itself, on inputs already read: pool each side's captures, model the history's noise,
diff, and (for the gate) decide. No store, no git, no file: everything arrives in ``inputs`` values, and of
the settings only the ``policy.ComparisonPolicy``. ``api.comparing`` reads both sides (``comparison.resolve``)
and the rest (``comparison.reads``) first, then calls ``compare`` or ``gate``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbase.comparison.diff import compute_diff
from kbase.comparison.gate import decide
from kbase.comparison.history import noise_of
from kbase.comparison.inputs import ComparisonInputs, GateInputs, Resolved, SideInputs
from kbase.comparison.result import Comparison, GateResult
from kbase.comparison.side import side_from_captures

if TYPE_CHECKING:
    from kbase.policy import ComparisonPolicy


def pool(side: SideInputs) -> Resolved:
    """One side's captures pooled (``side.side_from_captures``: repeat captures are processes, their samples
    side by side)."""
    return Resolved(side=side_from_captures(list(side.captures), side.label, side.meta), commit=side.commit,
                    baseline_ids=side.baseline_ids, notes=list(side.notes), label=side.label)


def compare(inputs: ComparisonInputs, policy: ComparisonPolicy) -> Comparison:
    """Both sides pooled, the before side's history noise, and their diff per unit."""
    first, second = pool(inputs.before), pool(inputs.after)
    noise, why = noise_of(inputs.history, first.side, policy.gate) if inputs.history is not None else (None, [])
    result = compute_diff(first.side, second.side, policy.gate, history=noise)
    return Comparison(result=result, before=first, after=second,
                      notes=list(inputs.notes) + first.notes + second.notes + why, pricing=policy.pricing)


def gate(inputs: GateInputs, policy: ComparisonPolicy, *, allow_incomparable: bool = False,
         warn_only: bool = False) -> GateResult:
    """``compare``, then the verdict with the acceptances in force over the range."""
    comparison = compare(inputs.comparison, policy)
    return judged(comparison, inputs.acceptances, allow_incomparable=allow_incomparable, warn_only=warn_only)


def judged(comparison: Comparison, acceptances: tuple = (), *, allow_incomparable: bool = False,
           warn_only: bool = False) -> GateResult:
    """A comparison with the gate's verdict on it."""
    verdict = decide(comparison.result, list(acceptances), allow_incomparable=allow_incomparable, warn_only=warn_only)
    return GateResult(comparison=comparison, verdict=verdict)

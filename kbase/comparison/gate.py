"""Stage 6 — decide the gate from a diff: pass (0), kernel/total regression (1), incomparable (2).

A failing row is a regressed kernel (every floor passed, ``min_effect_pct`` included, and significant), a
regressed op whose kernels were swapped (``comparison.ops``: the op is judged as one unit), or a new kernel
above the share floor when the policy says ``new_kernel = "fail"``, unless it is ignored by the policy or
covered by an unexpired ``kbase accept`` for a commit inside the compared range. Significant regressions
under ``min_effect_pct`` of the iteration (``regressed_below_floor``, "below floor"), kernels an algorithm swap
covers (``swapped``) and low-confidence changes that would otherwise regress are never failures. The verdict
is data; its sentences are the renderer's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from enum import StrEnum
from typing import TYPE_CHECKING

from kbase.comparison.diff import NO_KERNELS, DiffResult
from kbase.enums import Confidence, ExitCode, GateStatus, KernelClass, NewKernelPolicy
from kbase.policy import name_matches

if TYPE_CHECKING:
    from kbase.store.schema.records import AcceptanceRecord

PASS, REGRESSION, INCOMPARABLE = ExitCode.OK, ExitCode.REGRESSION, ExitCode.USAGE
TOTAL_KERNEL_TIME = "(total kernel time per iteration)"
STEP_TIME = "(step time per iteration)"
BUSY_SHARE = "(busy share of the window)"


class FindingKind(StrEnum):
    REGRESSED = "regressed"  # a kernel grew beyond its noise and every floor
    OP_REGRESSED = "op_regressed"  # an op whose kernels were swapped grew beyond its noise and every floor
    NEW_KERNEL = "new_kernel"  # a new kernel above the share floor
    TOTAL = "total"  # total kernel time per iteration grew significantly
    LOW_CONFIDENCE = "low_confidence"  # would regress, but too few samples to test
    STEP = "step"  # the step time (or, without iteration markers, the busy share) regressed beyond its noise
    STEP_NOT_JUDGED = "step_not_judged"  # the step moved, but between-process noise hides changes of that size
    CANNOT_JUDGE = "cannot_judge"  # nothing measured its noise: listed, failing only with ``cannot_judge = "fail"``


@dataclass(frozen=True)
class Finding:
    """One kernel (or the total) the gate has something to say about."""

    kind: FindingKind
    name: str
    short_name: str
    delta_pct: float = float("nan")
    effect: float = float("nan")  # Δ / iteration time
    share_before: float = float("nan")
    share_after: float = float("nan")
    before: float = float("nan")  # ns per iteration per GPU
    after: float = float("nan")
    p_value: float = float("nan")
    explain: str = ""  # a step finding: the block that grew and its likely cause
    mde_pct: float = float("nan")
    mde_rel: float = float("nan")  # cannot judge: the change it would need to show (``work.needed_mde``)
    noise: str = ""  # the noise source its test used (``noise.SOURCES``); "" for findings without a test


@dataclass(frozen=True)
class AcceptedFinding:
    finding: Finding
    acceptance_id: int | None
    pattern: str
    reason: str
    commit: str
    expires: date | None
    author: str


@dataclass
class Verdict:
    code: int
    status: GateStatus
    failing: list[Finding] = field(default_factory=list)
    accepted: list[AcceptedFinding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)  # why the sides are incomparable
    unit: str = "iteration"  # the comparison's unit (``side.Unit``), for the sentences
    net_pct: float = float("nan")  # the change of total kernel time per unit (said beside a new-kernel failure)


def active_acceptances(acceptances: Iterable[AcceptanceRecord], today: date | None = None,
                       in_range: Callable[[str], bool] | None = None) -> list[AcceptanceRecord]:
    """Acceptances not expired whose commit lies in the compared range (``in_range(commit)``)."""
    today = today or date.today()
    return [a for a in acceptances
            if (a.expires is None or a.expires >= today) and (in_range is None or in_range(a.commit))]


def _finding(kind: FindingKind, r: dict) -> Finding:
    return Finding(kind=kind, name=r["name"], short_name=r["short_name"], delta_pct=r["delta_pct"],
                   effect=r["effect"], share_before=r["share_before"], share_after=r["share_after"],
                   before=r["before"], after=r["after"], p_value=r["p_value"], mde_rel=r["mde_rel"],
                   noise=r.get("noise_source") or "")


class AcceptanceIndex:
    """The acceptances by pattern: a pattern without glob characters (what ``kbase accept NAME`` stores) is
    one dictionary entry, the others are tried in order; ``first`` is the first acceptance in the given order
    whose pattern matches, as a scan of them all would give, in time independent of how many are exact."""

    def __init__(self, acceptances: Sequence[AcceptanceRecord]) -> None:
        self.exact: dict[str, int] = {}
        self.patterns: list[tuple[int, AcceptanceRecord]] = []
        self.all = list(acceptances)
        for i, a in enumerate(self.all):
            if _is_literal(a.pattern):
                self.exact.setdefault(a.pattern, i)
            else:
                self.patterns.append((i, a))

    def first(self, names: tuple[str, ...]) -> AcceptanceRecord | None:
        hits = [self.exact[n] for n in names if n in self.exact]
        best = min(hits) if hits else len(self.all)
        for i, a in self.patterns:
            if i >= best:
                break
            if any(name_matches(a.pattern, n) for n in names):
                best = i
                break
        return self.all[best] if best < len(self.all) else None


def _is_literal(pattern: str) -> bool:
    """A glob that matches exactly itself (no ``*?[``), not a ``/regex/``."""
    return not any(c in pattern for c in "*?[") and not (len(pattern) >= 2 and pattern[0] == pattern[-1] == "/")


def _fail_or_accept(v: Verdict, finding: Finding, acceptances: AcceptanceIndex, names: tuple[str, ...]) -> None:
    """A failing finding, or an accepted one when an acceptance's pattern matches one of its ``names``."""
    acc = acceptances.first(names)
    if acc is None:
        v.failing.append(finding)
    else:
        v.accepted.append(AcceptedFinding(finding=finding, acceptance_id=acc.id, pattern=acc.pattern, reason=acc.reason,
                                          commit=acc.commit, expires=acc.expires, author=acc.author))


def _step(v: Verdict, result: DiffResult, acceptances: AcceptanceIndex) -> None:
    """The step rule (``comparison.step``): a regressed step fails (when ``step_gate``); a step that grew by at
    least ``step_max_mde_pct`` but could not be judged against between-process noise is a warning with its MDE
    (smaller unjudged moves are shown in the diff, not repeated in the verdict)."""
    b = result.budget
    if b is None:
        return
    j, name = (b.step, STEP_TIME) if b.step is not None else (b.busy, BUSY_SHARE)
    if j is None:
        return
    worse = j.delta_pct if b.step is not None else -j.delta_pct
    finding = Finding(kind=FindingKind.STEP, name=name, short_name=name, delta_pct=j.delta_pct, before=j.before,
                      after=j.after, p_value=j.p_value, explain=b.explain(), mde_pct=j.mde_pct)
    if j.regressed and result.policy.step_gate:
        _fail_or_accept(v, finding, acceptances, (name,))
    elif j.regressed or (not j.judged and worse >= result.policy.step_max_mde_pct):
        kind = FindingKind.STEP if j.regressed else FindingKind.STEP_NOT_JUDGED
        v.warnings.append(Finding(**{**vars(finding), "kind": kind}))


def decide(result: DiffResult, acceptances: Sequence[AcceptanceRecord] = (), allow_incomparable: bool = False,
           warn_only: bool = False) -> Verdict:
    v = Verdict(code=PASS, status=GateStatus.PASS, unit=result.totals.unit, net_pct=result.totals.kernel.delta_pct)
    # A candidate that measured nothing has nothing to pass with: --allow-incomparable does not apply.
    if result.mismatches and (not allow_incomparable or NO_KERNELS in result.mismatches):
        v.code, v.status, v.mismatches = INCOMPARABLE, GateStatus.INCOMPARABLE, list(result.mismatches)
        return v
    policy = result.policy
    fail_new = policy.new_kernel == NewKernelPolicy.FAIL
    index = AcceptanceIndex(acceptances)
    for r in result.records():
        cls = r["class"]
        if cls == KernelClass.NEW and r["gated"] and not fail_new:
            v.warnings.append(_finding(FindingKind.NEW_KERNEL, r))
        if (cls == KernelClass.WITHIN_NOISE and r["confidence"] == Confidence.LOW
                and r["delta_pct"] >= policy.max_increase_pct and r["share_before"] >= policy.share_floor):
            v.warnings.append(_finding(FindingKind.LOW_CONFIDENCE, r))
        if cls == KernelClass.CANNOT_JUDGE and not r["ignored"]:
            if policy.cannot_judge == "fail":
                _fail_or_accept(v, _finding(FindingKind.CANNOT_JUDGE, r), index, (r["name"], r["short_name"]))
            else:
                v.warnings.append(_finding(FindingKind.CANNOT_JUDGE, r))
        if not (r["gated"] and (cls == KernelClass.REGRESSED or fail_new)):
            continue
        finding = _finding(FindingKind.NEW_KERNEL if cls == KernelClass.NEW else FindingKind.REGRESSED, r)
        _fail_or_accept(v, finding, index, (r["name"], r["short_name"]))
    for r in (result.ops.records() if result.ops is not None else []):
        if r["gated"]:  # an op whose kernels were swapped, regressed as a whole
            finding = Finding(kind=FindingKind.OP_REGRESSED, name=r["op"], short_name=r["op"],
                              delta_pct=r["delta_pct"], effect=r["effect"], share_before=r["share_before"],
                              share_after=r["share_after"], before=r["before"], after=r["after"], p_value=r["p_value"])
            _fail_or_accept(v, finding, index, (r["op"],))
    k = result.totals.kernel
    if k.regressed:
        v.failing.append(Finding(kind=FindingKind.TOTAL, name=TOTAL_KERNEL_TIME, short_name=TOTAL_KERNEL_TIME,
                                 delta_pct=k.delta_pct, before=k.before, after=k.after, p_value=k.p_value))
    _step(v, result, index)
    if v.failing:
        v.code, v.status = REGRESSION, GateStatus.FAIL
        if warn_only:
            v.code, v.status = PASS, GateStatus.WARN_ONLY
    return v

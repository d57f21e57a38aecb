"""What a comparison says in words, from its numbers: each kernel's diagnosis and what its change is worth in
Amdahl terms, a gate finding, the verdict's reasons and warnings. ``render.diff`` (the JSON document, the screen,
Markdown), the PR comment, JUnit and the report all print these sentences."""

from __future__ import annotations

from typing import Any

from kbase.analysis.amdahl import amdahl
from kbase.analysis.names import short_id
from kbase.comparison.gate import STEP_TIME, Finding, FindingKind, Verdict
from kbase.comparison.side import Unit, unit_of
from kbase.comparison.work import MIN_REPEATS
from kbase.enums import GateStatus, KernelClass, Match
from kbase.render.incomparable import incomparable_hint
from kbase.units import fmt_delta_pct, fmt_p


def diagnosis(r: dict[str, Any], unit: Unit = Unit.ITERATION) -> str:
    """More launches, or slower launches? (a fusion problem and a slow kernel are different fixes)"""
    prefix = "algorithm swap: " if r.get("swap") else ""
    side = _side(r)
    if side in (Match.NEW, Match.GONE):
        return prefix + KernelClass(side).label
    dc = r["count_after"] - r["count_before"]
    rel_count = dc / r["count_before"] if r["count_before"] else 0.0
    rel_avg = (r["avg_after"] - r["avg_before"]) / r["avg_before"] if r["avg_before"] else 0.0
    parts = []
    if abs(rel_count) >= 0.01 and abs(dc) >= 0.5:
        parts.append(f"{'more' if dc > 0 else 'fewer'} launches ({dc:+.1f}{unit.short})")
    if abs(rel_avg) >= 0.01:
        parts.append(f"{'slower' if rel_avg > 0 else 'faster'} per launch ({rel_avg:+.1%})")
    return prefix + ("; ".join(parts) or "no change in launches or per-launch time")


def _side(r: dict[str, Any]) -> str:
    """``new`` or ``gone`` for a kernel on one side only (a swapped one too: by ``match``), else its class."""
    return str(r.get("match") or r["class"])


def amdahl_text(r: dict[str, Any], unit: Unit = Unit.ITERATION) -> str:
    """What this change is worth overall: share p sped up s x gives 1/(1-p+p/s)."""
    p = r["share_before"]
    if _side(r) == Match.NEW:
        return f"adds {r['effect']:.2%} of {unit.whole}"
    if _side(r) == Match.GONE:
        return f"removes {-r['effect']:.2%} of {unit.whole}"
    if not r["before"] > 0 or not r["after"] > 0 or p != p:
        return ""
    speed = r["before"] / r["after"]  # > 1: faster
    overall = amdahl(p, speed)
    if speed < 1:
        return (f"{1 / speed:.2f}x slower kernel at {p:.1%} share: run {overall:.4f}x ({1 - overall:.2%} slower); "
                f"fixing it is worth {1 / overall:.4f}x")
    return f"{speed:.2f}x faster kernel at {p:.1%} share: run {overall:.4f}x; ceiling {amdahl(p):.3f}x"


def _finding_row(f: Finding) -> dict[str, Any]:
    return {"class": KernelClass.NEW if f.kind == FindingKind.NEW_KERNEL else KernelClass.REGRESSED,
            "share_before": f.share_before, "before": f.before, "after": f.after, "effect": f.effect}


def step_finding_text(f: Finding) -> str:
    """``step +24.5%: idle +36.8 ms/iter, the GPU waits on the host (...)`` (or the busy share's)."""
    what = "step" if f.name == STEP_TIME else "busy share"
    head = f"{what} {fmt_delta_pct(f.delta_pct)}"
    if f.kind == FindingKind.STEP_NOT_JUDGED:
        return (f"{head} not judged: between-process noise hides changes under {f.mde_pct:.1f}% (MDE); "
                f"{f.explain} — store repeat captures (several processes) to judge it")
    return f"{head} (p={fmt_p(f.p_value)}): {f.explain}"


def finding_text(f: Finding, unit: Unit = Unit.ITERATION) -> str:
    if f.kind in (FindingKind.STEP, FindingKind.STEP_NOT_JUDGED):
        return step_finding_text(f)
    if f.kind == FindingKind.TOTAL:
        return f"total kernel time {unit.per} {f.delta_pct:+.1f}% (p={fmt_p(f.p_value)})"
    if f.kind == FindingKind.LOW_CONFIDENCE:
        return f"possible regression, low confidence (too few samples): {f.short_name} {fmt_delta_pct(f.delta_pct)}"
    if f.kind == FindingKind.CANNOT_JUDGE:
        need = (f"; with {MIN_REPEATS} repeat captures a side it would detect about {f.mde_rel:.1%}"
                if f.mde_rel == f.mde_rel else "")
        return (f"cannot judge {f.short_name} {short_id(f.name)} {fmt_delta_pct(f.delta_pct)} {unit.per} (too few "
                f"launches for a noise estimate, no history or repeat captures{need})")
    if f.kind == FindingKind.OP_REGRESSED:
        return (f"op {f.name} {fmt_delta_pct(f.delta_pct)} {unit.per} ({f.effect:+.2%} of {unit.whole}), its kernels "
                f"swapped (judged as one op) — {amdahl_text(_finding_row(f), unit)}")
    what = "new kernel" if f.kind == FindingKind.NEW_KERNEL else f"{fmt_delta_pct(f.delta_pct)} {unit.per}"
    return (f"{f.short_name} {short_id(f.name)} {what} ({f.effect:+.2%} of {unit.whole}) — "
            f"{amdahl_text(_finding_row(f), unit)}{MEASURED_BETWEEN_RUNS.get(f.noise, '')}")


# a finding whose test took its noise from between-process spread says where it measured it
MEASURED_BETWEEN_RUNS = {"history": "; noise from history (past baselines' spread)",
                         "repeat": "; noise from repeat captures (between processes)"}


def verdict_reasons(v: Verdict) -> list[str]:
    if v.status == GateStatus.INCOMPARABLE:
        hint = incomparable_hint(v.mismatches)
        return [f"incomparable: {m}" for m in v.mismatches] + ([f"to compare: {hint}"] if hint else [])
    unit = unit_of(v.unit)
    out = [{FindingKind.TOTAL: "", FindingKind.STEP: "", FindingKind.CANNOT_JUDGE: "not judged: "}.get(f.kind,
                                                                                          "regression: ")
           + finding_text(f, unit) for f in v.failing]
    if any(f.kind == FindingKind.NEW_KERNEL for f in v.failing) and v.net_pct == v.net_pct:
        # a changed kernel set fails on the new-kernel rule even when the run got faster: the net change beside it
        out.append(f"net: total kernel time {unit.per} {fmt_delta_pct(v.net_pct)} with the changed kernel set"
                   + (" (faster overall; failing on the new-kernel rule)" if v.net_pct < 0 else ""))
    return out


def verdict_warnings(v: Verdict) -> list[str]:
    unit = unit_of(v.unit)
    return [f"new kernel {f.short_name} at {f.share_after:.1%} of {unit.whole}" if f.kind == FindingKind.NEW_KERNEL
            else finding_text(f, unit) for f in v.warnings]


def verdict_dict(v: Verdict) -> dict[str, Any]:
    return {"code": v.code, "status": v.status.value, "reasons": verdict_reasons(v), "warnings": verdict_warnings(v),
            "failing": [f.name for f in v.failing],
            "accepted": [{"name": a.finding.name, "pattern": a.pattern, "reason": a.reason, "commit": a.commit,
                          "expires": a.expires.isoformat() if a.expires else None, "author": a.author,
                          "acceptance_id": a.acceptance_id} for a in v.accepted]}


def verdict_lines(verdict: Verdict | None) -> list[str]:
    if verdict is None:
        return []
    head = {GateStatus.PASS: "PASS", GateStatus.FAIL: "FAIL", GateStatus.INCOMPARABLE: "INCOMPARABLE",
            GateStatus.WARN_ONLY: "FAIL (warn-only: exit 0)"}
    out = [f"gate: {head[verdict.status]} (exit {verdict.code})"]
    out += [f"  {r}" for r in verdict_reasons(verdict)]
    out += [f"  accepted: {a.finding.name} (pattern {a.pattern}, {a.reason}, expires "
            f"{a.expires.isoformat() if a.expires else 'never'})" for a in verdict.accepted]
    out += [f"  warning: {w}" for w in verdict_warnings(verdict)]
    return out

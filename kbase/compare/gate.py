"""Stage 6 — decide the gate from a diff: pass (0), kernel/total regression (1), incomparable (2).

A failing row is a regressed kernel (every floor passed and significant), or a new kernel above
the share floor when the policy says ``new_kernel = "fail"``, unless it is ignored by the policy
or covered by an unexpired ``kbase accept`` for a commit inside the compared range. Low-confidence
changes that would otherwise regress are warnings, never failures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

from kbase.compare.diff import NO_KERNELS, DiffResult
from kbase.compare.policy import name_matches

PASS, REGRESSION, INCOMPARABLE = 0, 1, 2


@dataclass
class Verdict:
    code: int
    status: str  # "pass" | "fail" | "incomparable" | "warn-only"
    failing: list[dict] = field(default_factory=list)
    accepted: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"code": self.code, "status": self.status, "reasons": self.reasons, "warnings": self.warnings,
                "failing": [r["name"] for r in self.failing], "accepted": self.accepted}


def active_acceptances(acceptances, today: date | None = None, in_range=None) -> list:
    """Acceptances not expired whose commit lies in the compared range (``in_range(commit)``)."""
    today = today or date.today()
    return [a for a in acceptances
            if (a.expires is None or a.expires >= today) and (in_range is None or in_range(a.commit))]


def decide(result: DiffResult, acceptances=(), allow_incomparable: bool = False, warn_only: bool = False) -> Verdict:
    v = Verdict(code=PASS, status="pass")
    # A candidate that measured nothing has nothing to pass with: --allow-incomparable does not apply.
    if result.mismatches and (not allow_incomparable or NO_KERNELS in result.mismatches):
        v.code, v.status = INCOMPARABLE, "incomparable"
        v.reasons = [f"incomparable: {m}" for m in result.mismatches]
        return v
    policy = result.policy
    rows = result.rows.to_dict("records") if len(result.rows) else []
    for r in rows:
        failing = bool(r["gated"]) and (r["class"] == "regressed" or policy.new_kernel == "fail")
        if r["class"] == "new" and r["gated"] and policy.new_kernel == "warn":
            v.warnings.append(f"new kernel {r['short_name']} at {r['share_after']:.1%} of the iteration")
        if r["class"] == "within noise" and r["confidence"] == "low" and r["delta_pct"] >= policy.max_increase_pct \
                and r["share_before"] >= policy.share_floor:
            v.warnings.append(f"possible regression, low confidence (too few samples): {r['short_name']} {r['delta_pct']:+.1f}%")
        if not failing:
            continue
        acc = next((a for a in acceptances if name_matches(a.pattern, r["name"]) or name_matches(a.pattern, r["short_name"])), None)
        if acc is not None:
            v.accepted.append({"name": r["name"], "pattern": acc.pattern, "reason": acc.reason, "commit": acc.commit,
                               "expires": acc.expires.isoformat() if acc.expires else None, "author": acc.author})
            continue
        v.failing.append(r)
        what = "new kernel" if r["class"] == "new" else f"{r['delta_pct']:+.1f}% per iteration"
        v.reasons.append(f"regression: {r['short_name']} {what} ({r['effect']:+.2%} of the iteration) — {r['amdahl']}")
    k = result.totals["kernel"]
    if k.get("regressed"):
        v.reasons.append(f"total kernel time per iteration {k['delta_pct']:+.1f}% (p={k['p_value']:.3g})")
        v.failing.append({"name": "(total kernel time per iteration)"})
    if v.failing:
        v.code, v.status = REGRESSION, "fail"
        if warn_only:
            v.code, v.status = PASS, "warn-only"
    return v

"""The step's verdict: the GPU time budget of both sides, the step time judged against its noise, and the
change explained block by block (docs/budget.md).

Step time is noisy between processes in a way kernel time is not (the host's data loading, Python, the CPU
elsewhere): the same configuration captured twice moves the host step by several percent while kernel time
holds. So the step gets its own noise model, like a kernel's:

- within each capture, the spread of its iterations' step times (the standard error of each side's mean);
- between processes: from repeat captures (several processes pooled on one side: the spread of their means
  beyond the within-capture part), else from history (the step levels of past baselines on the base line: a
  robust sd, each baseline another process), else the stated fallback ``step_run_noise`` (relative sd of one
  capture's mean step, calibrated on the real A/A pairs: docs/budget.md).

A change is ``regressed`` when it is significant at the gate's ``alpha`` (one-sided; one test, as the total
kernel time rule) and at least
``min_effect_pct`` of the step; ``judged`` is False when it is not significant and the minimum detectable
effect (80% power) is above ``step_max_mde_pct``: the evidence cannot separate such a change from
between-process noise, and the MDE it would need is stated. Without iteration markers there is no step: the
busy share (1 - idle share) is compared instead, with the same between-process rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from kbase.analysis.budget_blocks import BLOCKS, FIELDS, GAP_CAUSE_TEXT, GAP_CAUSES, Budget, budget_from_stored
from kbase.comparison.levels import level_noise
from kbase.comparison.noise import POWER_Z
from kbase.policy import Policy


@dataclass
class SideBudget:
    """One side's budgets (one per capture: each a process), per iteration per GPU."""

    budgets: list[Budget]

    @property
    def unit(self) -> str:
        return "iteration" if self.budgets and all(b.unit == "iteration" for b in self.budgets) else "window"

    @property
    def units(self) -> int:
        """Units x GPUs over the pooled captures (a window counts as one unit): what a sum is divided by, as the
        kernels of a side are pooled (every iteration of every capture weighs the same)."""
        return sum(max(b.n_iterations, 1) * max(len(b.gpus), 1) for b in self.budgets) or 1

    def blocks(self) -> dict[str, float]:
        """Each field per unit per GPU over the pooled captures (``Budget.per_unit`` of one capture)."""
        return {f: sum(getattr(b.total, f) for b in self.budgets) / self.units for f in FIELDS}

    def gap_causes(self) -> dict[str, float]:
        return {c: sum(b.gaps.get("by_cause", {}).get(c, {}).get("ns", 0) for b in self.budgets) / self.units
                for c in GAP_CAUSES}

    def step_mean(self) -> float | None:
        """The mean step time per iteration over every pooled iteration (None without iterations)."""
        steps = [s for c in self.samples(self.step_source()) for s in c]
        return sum(steps) / len(steps) if steps else None

    def step_source(self) -> str:
        return "host" if self.budgets and all(b.step_source == "host" for b in self.budgets) else "gpu"

    def samples(self, source: str) -> list[list[float]]:
        """Per capture, its step time per iteration (``source`` "host" or "gpu")."""
        out = []
        for b in self.budgets:
            n = max(len(b.gpus), 1)
            if source == "host":
                out.append([(x.step_wall_ns or 0) / n for _, x in b.iterations])
            else:
                out.append([x.window_ns / n for _, x in b.iterations])
        return out

    def busy(self) -> list[list[float]]:
        """Per capture, its busy share (one value: a window has no iterations)."""
        return [[1.0 - (b.share("idle_ns") or 0.0)] for b in self.budgets]


def step_level(summary_json: str | None) -> float | None:
    """A stored baseline's mean step time per iteration (ns) from its summary's budget, or None."""
    import json

    try:
        got = json.loads(summary_json or "{}").get("budget")
    except (ValueError, AttributeError):
        return None
    if not got:
        return None
    b = budget_from_stored(got)
    s = b.step_samples()
    return sum(s) / len(s) if s else None


def side_budget(summaries: list[Any]) -> SideBudget | None:
    """The budgets stored in the captures' summaries; None when any capture has none (stored before it)."""
    got: list[dict[str, Any]] = [g for g in (getattr(s, "budget", None) for s in summaries) if g]
    if not got or len(got) < len(summaries):
        return None
    return SideBudget([budget_from_stored(g) for g in got])


@dataclass
class Judgement:
    before: float
    after: float
    delta_pct: float
    regressed: bool
    improved: bool
    judged: bool
    p_value: float
    mde_pct: float
    noise: str  # where the between-process part came from: repeat, history, assumed
    se_pct: float


@dataclass
class BudgetDiff:
    """The budget of both sides per unit per GPU and what the step did."""

    unit: str  # "iteration" | "window"
    before: dict[str, float]
    after: dict[str, float]
    delta: dict[str, float]  # per field; the four blocks add up to the window's delta
    step_source: str  # "host" (marker ranges), "gpu" (GPU window), "" (none: the busy share is judged)
    step: Judgement | None
    busy: Judgement | None  # without iterations
    kernel_delta_ns: float | None  # what the kernels' own change predicted (per unit per GPU)
    cause_delta: dict[str, float] = field(default_factory=dict)  # idle by likely cause, change per unit per GPU
    notes: list[str] = field(default_factory=list)

    @property
    def grew(self) -> tuple[str, float] | None:
        """The block that grew most (name, ns per unit per GPU), or None when none grew."""
        k = max(BLOCKS, key=lambda b: self.delta[b])
        return (k, self.delta[k]) if self.delta[k] > 0 else None

    @property
    def idle_cause(self) -> str | None:
        if not self.cause_delta:
            return None
        c = max(GAP_CAUSES, key=lambda x: self.cause_delta[x])
        return c if self.cause_delta[c] > 0 else None

    def explain(self) -> str:
        """The block that grew, with the idle gaps' likely cause: "idle +36.8 ms/iter, the GPU waits on the host"."""
        g = self.grew
        if g is None:
            return "no block grew"
        name, ns = g
        from kbase.analysis.budget import BLOCK_LABELS
        from kbase.units import fmt_ns

        per = "/iter" if self.unit == "iteration" else "/window"
        text = f"{BLOCK_LABELS[name]} +{fmt_ns(ns)}{per}"
        if name == "idle_ns" and self.idle_cause:
            text += f", {GAP_CAUSE_TEXT[self.idle_cause]}"
        return text

    def amdahl_line(self) -> str | None:
        """Kernels predicted vs what the window realised."""
        if self.kernel_delta_ns is None:
            return None

        realised = self.delta["window_ns"]
        rest = realised - self.kernel_delta_ns
        per = "/iter" if self.unit == "iteration" else "/window"
        labels = {"idle_ns": "idle", "communication_exposed_ns": "exposed comm", "memory_exposed_ns": "exposed memory"}
        parts = [f"{label} {_signed(self.delta[b])}" for b, label in labels.items() if abs(self.delta[b]) >= 1000]
        return (f"Amdahl check: kernels predicted {_signed(self.kernel_delta_ns)}{per}, the window realised "
                f"{_signed(realised)}{per}" + (f"; the other {_signed(rest)}: {', '.join(parts)}" if parts else "")
                if abs(rest) >= 1000 else
                f"Amdahl check: kernels predicted {_signed(self.kernel_delta_ns)}{per}, the window realised "
                f"{_signed(realised)}{per}")


def _signed(ns: float) -> str:
    from kbase.units import fmt_ns

    return ("+" if ns >= 0 else "-") + fmt_ns(abs(ns))


def budget_diff(before: SideBudget, after: SideBudget, policy: Policy, kernel_delta_ns: float | None,
                history_levels: list[float] | None = None) -> BudgetDiff:
    b, a = before.blocks(), after.blocks()
    unit = "iteration" if before.unit == "iteration" and after.unit == "iteration" else "window"
    delta = {f: a[f] - b[f] for f in FIELDS}
    causes_b, causes_a = before.gap_causes(), after.gap_causes()
    out = BudgetDiff(unit=unit, before=b, after=a, delta=delta, step_source="", step=None, busy=None,
                     kernel_delta_ns=kernel_delta_ns,
                     cause_delta={c: causes_a[c] - causes_b[c] for c in GAP_CAUSES})
    if unit == "iteration":
        source = "host" if before.step_source() == "host" and after.step_source() == "host" else "gpu"
        out.step_source = source
        out.step = judge(before.samples(source), after.samples(source), policy, history_levels)
    else:
        out.notes.append("step time cannot be judged: no iteration markers (the busy share is judged instead)")
        out.busy = judge(before.busy(), after.busy(), policy, None, worse_when_higher=False)
    return out


def judge(before: list[list[float]], after: list[list[float]], policy: Policy,
          history_levels: list[float] | None = None, worse_when_higher: bool = True,
          run_sd: tuple[float, str] | None = None) -> Judgement | None:
    """A level's change (after/before - 1) against within-capture and between-process noise (module doc).
    ``run_sd``: the between-process relative sd and its source when the caller measured it (``kbase bisect``:
    the repeat captures at GOOD, the line's history), in place of the sides' own."""
    mb, ma = _pooled(before), _pooled(after)
    if mb is None or ma is None or mb <= 0:
        return None
    rel = ma / mb - 1.0
    within = _within_rel(before, mb) + _within_rel(after, ma)
    sd, noise = run_sd if run_sd is not None else _between(before, after, history_levels, policy)
    k_b, k_a = max(len(before), 1), max(len(after), 1)
    se = math.sqrt(within + sd * sd * (1.0 / k_b + 1.0 / k_a))
    z_crit = NormalDist().inv_cdf(1.0 - policy.alpha)  # one test, like the total-kernel-time rule
    worse = rel if worse_when_higher else -rel
    z = worse / se if se > 0 else (math.inf if worse > 0 else 0.0)
    p = 1.0 - NormalDist().cdf(z) if math.isfinite(z) else 0.0
    significant = z > z_crit
    better = (-worse / se if se > 0 else 0.0) > z_crit
    mde = (z_crit + POWER_Z) * se
    floor = policy.min_effect_pct / 100.0
    regressed = significant and worse >= floor
    judged = significant or better or mde * 100.0 <= policy.step_max_mde_pct
    return Judgement(before=mb, after=ma, delta_pct=rel * 100.0, regressed=regressed,
                     improved=better and -worse >= floor, judged=judged, p_value=p, mde_pct=mde * 100.0, noise=noise,
                     se_pct=se * 100.0)


def _pooled(captures: list[list[float]]) -> float | None:
    means = [sum(c) / len(c) for c in captures if c]
    return sum(means) / len(means) if means else None


def _within_rel(captures: list[list[float]], mean: float) -> float:
    """Variance (relative to ``mean``, squared) of the side's pooled mean from its iterations' spread."""
    parts = []
    for c in captures:
        if len(c) >= 2:
            m = sum(c) / len(c)
            var = sum((x - m) ** 2 for x in c) / (len(c) - 1)
            parts.append(var / len(c))
        elif c:
            parts.append(0.0)
    if not parts:
        return 0.0
    return sum(parts) / len(parts) ** 2 / (mean * mean)


def _between(before: list[list[float]], after: list[list[float]], history: list[float] | None,
             policy: Policy) -> tuple[float, str]:
    """The between-process relative sd of one capture's mean, and where it came from."""
    sds = []
    for side in (before, after):
        means = [sum(c) / len(c) for c in side if c]
        if len(means) >= 2:
            m = sum(means) / len(means)
            var_means = sum((x - m) ** 2 for x in means) / (len(means) - 1)
            within = _within_rel(side, m) * m * m * len(means)  # the within part of one capture mean's variance
            sds.append((math.sqrt(max(var_means - within, 0.0)) / m, len(means) - 1))
    if sds:
        df = sum(d for _, d in sds)
        measured = math.sqrt(sum(s * s * d for s, d in sds) / df)
        # moderated by the fallback as one prior degree of freedom: two processes cannot prove noise is zero
        prior = policy.step_run_noise
        return math.sqrt((measured * measured * df + prior * prior) / (df + 1)), "repeat"
    levels = [x for x in (history or []) if x and math.isfinite(x)]
    if len(levels) >= policy.min_history:
        m = sorted(levels)[len(levels) // 2]
        return max(level_noise(levels) / m, policy.run_noise), "history"
    return policy.step_run_noise, "assumed"


def budget_diff_doc(d: BudgetDiff) -> dict[str, Any]:
    """The diff's ``"budget"`` object (``kbase.diff`` JSON)."""
    j = d.step
    step: dict[str, Any] = {"judged": False, "regressed": False}
    if j is not None:
        step = {"before_ns": j.before, "after_ns": j.after, "delta_pct": j.delta_pct, "regressed": j.regressed,
                "improved": j.improved, "judged": j.judged, "p_value": j.p_value, "mde_pct": j.mde_pct,
                "noise": j.noise, "source": d.step_source}
    out: dict[str, Any] = {
        "unit": d.unit,
        "before": dict(d.before), "after": dict(d.after),
        "delta_ns": {k: d.delta[k] for k in FIELDS},
        "step": step,
        "explained": d.explain(),
        "idle_cause_delta_ns": dict(d.cause_delta),
        "kernels_predicted_ns": d.kernel_delta_ns,
        "amdahl": d.amdahl_line(),
        "notes": list(d.notes),
    }
    if d.busy is not None:
        out["busy_share"] = {"before": d.busy.before, "after": d.busy.after, "delta_pct": d.busy.delta_pct,
                             "regressed": d.busy.regressed, "judged": d.busy.judged, "mde_pct": d.busy.mde_pct,
                             "noise": d.busy.noise}
    return out


def step_verdict_lines(b: dict[str, Any] | None) -> list[str]:
    """The step's verdict as the diff judged it (the diff's ``budget`` object): the step time's line, or without
    iteration markers the busy share's. One definition: ``kbase diff``, the report and the notebook print it."""
    if not b:
        return []
    from kbase.units import fmt_delta_pct, fmt_ns_pair, fmt_p

    lines = []
    s = b["step"]
    if s.get("before_ns") is not None:
        word = ("regressed" if s["regressed"] else "improved" if s.get("improved") else
                "within noise" if s["judged"] else f"not judged (MDE {s['mde_pct']:.1f}%)")
        src = "host range" if s.get("source") == "host" else "GPU window"
        before, after = fmt_ns_pair(s["before_ns"], s["after_ns"])
        lines.append(f"step per iteration ({src}): {before} -> {after} ({fmt_delta_pct(s['delta_pct'])}): "
                     f"{word} (noise {s['noise']}, p={fmt_p(s['p_value'])})")
    busy = b.get("busy_share")
    if busy:
        lines.append(f"busy share of the window: {busy['before']:.1%} -> {busy['after']:.1%}: "
                     + ("regressed" if busy["regressed"] else "within noise" if busy["judged"]
                        else f"not judged (MDE {busy['mde_pct']:.1f}%)"))
    return lines

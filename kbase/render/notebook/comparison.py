"""How a comparison and a gate's result show themselves in a notebook: a one-line ``repr`` (what it is and its
headline numbers) and a small HTML table (``_repr_html_``, every name escaped by ``display.html_table``) of the
kernels that changed. They format what the objects hold, nothing recomputed: the verdict is the gate's, the
numbers the diff's."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kbase.analysis.classify import TC_SYMBOL
from kbase.analysis.cost import iteration_effect
from kbase.analysis.names import short_id
from kbase.comparison.gate import STEP_TIME, FindingKind
from kbase.comparison.result import CHANGED, row_delta_pct
from kbase.comparison.result import row_sides as sides
from kbase.comparison.side import unit_why
from kbase.comparison.step import budget_diff_doc, step_verdict_lines
from kbase.display import clip, html_table, inert
from kbase.enums import GateStatus, KernelClass, class_counts
from kbase.units import ABSENT, fmt_delta_pct, fmt_money, fmt_ns_pair, group_units

if TYPE_CHECKING:
    from kbase.comparison.result import Comparison, GateResult

TOP = 10
LISTED = (*CHANGED, KernelClass.SWAPPED, KernelClass.CANNOT_JUDGE)  # the rows the table lists, as kbase diff does
STATUS = {GateStatus.PASS: "PASS", GateStatus.FAIL: "FAIL", GateStatus.INCOMPARABLE: "INCOMPARABLE",
          GateStatus.WARN_ONLY: "FAIL (warn-only)"}


def finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def cost_text(c: Comparison, effect: float | None) -> str:
    """``+$3,950/month`` for a change of ``effect`` (a fraction of the iteration), "" without pricing."""
    if c.pricing is None or effect is None:
        return ""
    return f"{fmt_money(c.pricing.per_month(effect), c.pricing.currency)}/month"


def _summary(c: Comparison) -> str:
    t = c.result.totals
    classes = c.result.table["class"].tolist()
    counts = class_counts({k.value: classes.count(k.value) for k in LISTED})
    before, after = fmt_ns_pair(t.kernel.before, t.kernel.after)
    text = (f"kernel time per {t.unit} per GPU{unit_why(t.unit, t.unit_reason)} {before} -> {after} "
            f"({fmt_delta_pct(t.kernel.delta_pct)}); "
            f"{counts or 'no kernel changed'}")
    cost = c.cost
    if cost is not None:
        text += f"; {cost_text(c, cost.effect)} at {cost.pricing.gpus} GPUs" + (
            " (nothing beyond noise)" if cost.basis == "nothing beyond noise" else "")
    if c.result.mismatches:
        text = "INCOMPARABLE (" + "; ".join(c.result.mismatches) + "); " + text
    return text


def _pair(c: Comparison) -> str:
    """``before -> after`` as the sides were named (a revision with its commit, ``@ID``), each cut to 40."""
    return f"{clip(c.before.label, 40)} -> {clip(c.after.label, 40)}"


def comparison_line(c: Comparison) -> str:
    return inert(f"<Comparison {_pair(c)}: {_summary(c)}>")


def _changed_table(c: Comparison, caption: str, notes: list[str]) -> str:
    rows = [r for r in c.result.records() if r["class"] in LISTED]
    shown = rows[:TOP]
    times, delta = group_units((v for r in shown for v in sides(r)), (r["delta_ns"] for r in shown))
    wall = c.result.totals.iteration_wall.before
    headers = ["class", "kernel", "TC", "before/iter", "after/iter", "Δ/iter", "Δ%", "effect on iter"]
    if c.pricing is not None:
        headers.append("cost/month")
    cells = []
    for r in shown:
        b, a = sides(r)
        row = [KernelClass(r["class"]).label, f"{r['short_name']} {short_id(r['name'])}",
               TC_SYMBOL.get(r["tc_after"] or r["tc_before"] or "na", "-"), times(b), times(a), delta(r["delta_ns"]),
               row_delta_pct(r), f"{r['effect']:+.2%}" if finite(r["effect"]) else ABSENT]
        if c.pricing is not None:
            row.append(cost_text(c, iteration_effect(r["delta_ns"], wall)) or ABSENT)
        cells.append(row)
    if len(rows) > len(shown):
        notes = [*notes, f"{len(rows) - len(shown)} more changed kernel(s): .table (or .result.rows) has every row"]
    return html_table(headers, cells, caption=caption, notes=notes, numeric=(3, 4, 5, 6, 7, 8))


def step_lines(c: Comparison) -> list[str]:
    """The step's verdict as the diff judged it (``kbase diff``'s line, from the diff's ``budget`` object) and what
    grew; nothing recomputed. Empty when neither side has a budget (a side without one: the diff's note says so)."""
    b = c.result.budget
    if b is None:
        return []
    doc = budget_diff_doc(b)
    return [*step_verdict_lines(doc), f"what grew (GPU time budget per {doc['unit']} per GPU): {doc['explained']}"]


def comparison_html(c: Comparison) -> str:
    return _changed_table(c, f"{_pair(c)}: {_summary(c)}", step_lines(c) + c.notes + c.result.notes)


def _finding(f: Any) -> str:
    if f.kind in (FindingKind.STEP, FindingKind.STEP_NOT_JUDGED):  # the step, not a kernel: named as kbase gate does
        name = "step" if f.name == STEP_TIME else "busy share"
        return f"{name} {f.delta_pct:+.1f}%" if finite(f.delta_pct) else name
    return f"{clip(f.short_name, 50)} {f.delta_pct:+.1f}%" if finite(f.delta_pct) else clip(f.short_name, 50)


def _verdict(g: GateResult) -> str:
    v = g.verdict
    parts = [f"{STATUS.get(v.status, v.status)} (exit {v.code}):"]
    if v.failing:
        parts.append("failing: " + ", ".join(_finding(f) for f in v.failing[:5])
                     + (f", … ({len(v.failing)} in all)" if len(v.failing) > 5 else ""))
    if v.accepted:
        parts.append(f"{len(v.accepted)} accepted")
    if v.warnings:
        parts.append(f"{len(v.warnings)} warning(s)")
    return " ".join(parts[:2]) + "".join(f"; {p}" for p in parts[2:]) if len(parts) > 1 else parts[0][:-1]


def gate_line(g: GateResult) -> str:
    c = g.comparison
    return inert(f"<GateResult {_verdict(g)} — {_pair(c)}: {_summary(c)}>")


def gate_html(g: GateResult) -> str:
    c = g.comparison
    notes = [*step_lines(c), *(f"accepted: {a.finding.short_name} ({a.reason})" for a in g.verdict.accepted),
             *(f"incomparable: {m}" for m in g.verdict.mismatches), *c.notes, *c.result.notes]
    return _changed_table(c, f"gate: {_verdict(g)} — {_pair(c)}: {_summary(c)}", notes)

"""How the comparison side's results show themselves in a notebook: a one-line ``repr`` (what it is and its
headline numbers) and a small HTML table (``_repr_html_``, every name escaped by ``display.html_table``) for
``Comparison``, ``GateResult``, ``KernelHistory`` and ``StepsReport``, and their ``.table`` DataFrames. They format
what the objects hold, nothing recomputed: the verdict is the gate's, the numbers the diff's."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from kbase.analysis.classify import TC_SYMBOL
from kbase.analysis.cost import iteration_effect
from kbase.analysis.names import short_id
from kbase.comparison.result import row_delta_pct
from kbase.comparison.result import row_sides as sides
from kbase.comparison.side import unit_why
from kbase.display import clip, html_table, inert
from kbase.enums import GateStatus, KernelClass, class_counts
from kbase.units import ABSENT, column_unit, fmt_delta_pct, fmt_money, fmt_ns, fmt_ns_pair, group_units

if TYPE_CHECKING:
    import pandas as pd

    from kbase.comparison.history import StepsReport
    from kbase.comparison.result import Comparison, GateResult, KernelHistory

TOP = 10
CHANGED = (KernelClass.REGRESSED, KernelClass.REGRESSED_BELOW_FLOOR, KernelClass.IMPROVED, KernelClass.NEW,
           KernelClass.GONE)  # the changes the diff flags (a swap's kernels net out: not among them)
LISTED = (*CHANGED, KernelClass.SWAPPED, KernelClass.CANNOT_JUDGE)  # the rows the table lists, as kbase diff does
STATUS = {GateStatus.PASS: "PASS", GateStatus.FAIL: "FAIL", GateStatus.INCOMPARABLE: "INCOMPARABLE",
          GateStatus.WARN_ONLY: "FAIL (warn-only)"}


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def flagged_effects(c: Comparison) -> list[float]:
    """The effects on the iteration of the kernels the diff flags (an algorithm swap's rows net out)."""
    t = c.result.table
    flagged = {k.value for k in CHANGED}
    return [float(e) for cls, e, swap in zip(t["class"].tolist(), t["effect"].tolist(), t["swap"].tolist())
            if cls in flagged and not swap and _finite(e)]


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
               row_delta_pct(r), f"{r['effect']:+.2%}" if _finite(r["effect"]) else ABSENT]
        if c.pricing is not None:
            row.append(cost_text(c, iteration_effect(r["delta_ns"], wall)) or ABSENT)
        cells.append(row)
    if len(rows) > len(shown):
        notes = [*notes, f"{len(rows) - len(shown)} more changed kernel(s): .table (or .result.rows) has every row"]
    return html_table(headers, cells, caption=caption, notes=notes, numeric=(3, 4, 5, 6, 7, 8))


def step_lines(c: Comparison) -> list[str]:
    """The step's verdict as the diff judged it (``kbase diff``'s line, from the diff's ``budget`` object) and what
    grew; nothing recomputed. Empty when neither side has a budget (a side without one: the diff's note says so)."""
    from kbase.comparison.step import budget_diff_doc, step_verdict_lines

    b = c.result.budget
    if b is None:
        return []
    doc = budget_diff_doc(b)
    return [*step_verdict_lines(doc), f"what grew (GPU time budget per {doc['unit']} per GPU): {doc['explained']}"]


def comparison_html(c: Comparison) -> str:
    return _changed_table(c, f"{_pair(c)}: {_summary(c)}", step_lines(c) + c.notes + c.result.notes)


def _finding(f: Any) -> str:
    from kbase.comparison.gate import STEP_TIME, FindingKind

    if f.kind in (FindingKind.STEP, FindingKind.STEP_NOT_JUDGED):  # the step, not a kernel: named as kbase gate does
        name = "step" if f.name == STEP_TIME else "busy share"
        return f"{name} {f.delta_pct:+.1f}%" if _finite(f.delta_pct) else name
    return f"{clip(f.short_name, 50)} {f.delta_pct:+.1f}%" if _finite(f.delta_pct) else clip(f.short_name, 50)


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


# ------------------------------------------------------------------------------------------ one kernel's history


def _changes(rows: list[dict[str, Any]]) -> list[float | None]:
    """Per row: per-iteration time against the previous row of the same workload, in percent."""
    prev: dict[str, float | None] = {}
    out: list[float | None] = []
    for r in rows:
        before, now = prev.get(r["workload"]), r["per_iter_ns"]
        out.append((now - before) / before * 100.0 if before and now is not None else None)
        prev[r["workload"]] = now
    return out


def history_line(h: KernelHistory) -> str:
    where = f" ({h.workload})" if h.workload else " (every workload)"
    head = f"<KernelHistory {clip(h.short_name, 60)} {short_id(h.name)}{where}: {len(h.rows)} baseline(s)"
    if h.rows:
        last, change = h.rows[-1], _changes(h.rows)[-1]
        head += (f"; newest @{last['id']} ({str(last['commit'])[:12]}) {fmt_ns(last['per_iter_ns'])} per iteration "
                 f"per GPU ({fmt_delta_pct(change)} vs the previous)")
    return inert(head + ">")


def history_html(h: KernelHistory) -> str:
    rows = h.rows[-TOP:]
    changes = _changes(h.rows)[-TOP:]
    per_iter = column_unit(r["per_iter_ns"] for r in rows)
    avg = column_unit(r["avg_ns"] for r in rows)
    cells = [(f"@{r['id']}", str(r["commit"])[:12], _day(r.get("commit_date")), clip(r.get("subject") or "", 60),
              f"{r['count']:,}", avg(r["avg_ns"]), per_iter(r["per_iter_ns"]), fmt_delta_pct(ch))
             for r, ch in zip(rows, changes)]
    notes = [f"the newest {len(rows)} of {len(h.rows)}: .table has every row"] if len(h.rows) > len(rows) else []
    return html_table(["id", "commit", "date", "subject", "launches", "avg", "per iter/GPU", "Δ vs prev"], cells,
                      caption=history_line(h)[1:-1], notes=[f"kernel: {h.name}", *notes], numeric=(4, 5, 6, 7))


def _day(value: Any) -> str:
    return value.strftime("%Y-%m-%d") if hasattr(value, "strftime") else str(value or ABSENT)[:10]


def history_table(h: KernelHistory) -> pd.DataFrame:
    import pandas as pd

    columns = list(dict.fromkeys(k for r in h.rows for k in r)) or ["id", "commit", "created_at", "workload"]
    df = pd.DataFrame(h.rows, columns=columns)
    df["change_pct"] = _changes(h.rows)
    return df


# ------------------------------------------------------------------------------------------ steps


STEP_FIELDS = ["name", "short_name", "kind", "from_commit", "first_commit", "to_commit", "before_ns", "after_ns",
               "rel", "effect", "steps", "z"]


def steps_line(r: StepsReport) -> str:
    head = (f"<StepsReport {r.workload}: {len(r.steps)} step(s) over {r.baselines} baseline(s), "
            f"{len(r.commits)} commit(s)")
    if r.steps:
        s = r.steps[0]
        head += f"; largest: {s.kind} {clip(s.short_name, 50)} {s.rel:+.1%} at {s.first_commit[:12]}"
    return inert(head + ">")


def steps_html(r: StepsReport) -> str:
    shown = r.steps[:TOP]
    unit = column_unit(v for s in shown for v in (s.before_ns, s.after_ns))
    from kbase.analysis.names import display_map

    labels = display_map([(s.name, s.short_name) for s in r.steps])
    cells = []
    for s in shown:
        note = r.commit_notes.get(s.first_commit)
        cells.append((s.kind, labels[s.name], s.first_commit[:12], _day(note.date if note else None),
                      clip(note.subject if note else "", 60), unit(s.before_ns), unit(s.after_ns), f"{s.rel:+.1%}",
                      "-" if not _finite(s.effect) else f"{s.effect:+.2%}"))
    notes = list(r.notes) + ([f"{len(r.steps) - len(shown)} more: .table has every step"]
                             if len(r.steps) > len(shown) else [])
    return html_table(["kind", "kernel", "commit", "date", "subject", "before/iter", "after/iter", "change",
                       "effect on iter"], cells, caption=steps_line(r)[1:-1], notes=notes, numeric=(5, 6, 7, 8))


def steps_table(r: StepsReport) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for s in r.steps:
        note = r.commit_notes.get(s.first_commit)
        rows.append({**dataclasses.asdict(s), "subject": note.subject if note else "",
                     "commit_date": note.date if note else None})
    return pd.DataFrame(rows, columns=[*STEP_FIELDS, "subject", "commit_date"])

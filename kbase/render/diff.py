"""Render a comparison (and a gate verdict): the JSON document (schema ``kbase.diff/4``), the screen and
Markdown (the kernel table: ``render.diff_table``), CSV. The sentences — each kernel's diagnosis, what a
change is worth in Amdahl terms, the gate's reasons — are written in ``render.diff_sentences``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from kbase import jsonable
from kbase.analysis import columns as registry
from kbase.comparison.diff import CLASSES, DIFF_SCHEMA, ROW_COLUMNS  # noqa: F401 - ROW_COLUMNS re-exported
from kbase.comparison.gate import Verdict
from kbase.comparison.side import unit_of
from kbase.comparison.step import budget_diff_doc, step_verdict_lines
from kbase.enums import GateStatus, KernelClass, class_counts
from kbase.render import diff_table as table
from kbase.render.diff_sentences import (  # noqa: F401 - re-exported (their home before)
    MEASURED_BETWEEN_RUNS,
    amdahl_text,
    diagnosis,
    finding_text,
    step_finding_text,
    verdict_dict,
    verdict_lines,
    verdict_reasons,
    verdict_warnings,
)
from kbase.render.diff_table import COLUMNS, SHOWN_BY_DEFAULT  # noqa: F401 - re-exported (their home before)
from kbase.render.incomparable import incomparable_hint
from kbase.render.leaderboard import records, to_csv
from kbase.render.safe import md_text
from kbase.units import fmt_delta_pct, fmt_money, fmt_ns_change, fmt_ns_pair

if TYPE_CHECKING:
    from kbase.comparison.resolve import Resolved
    from kbase.comparison.result import Comparison
    from kbase.comparison.side import Side

# a kernel row's fields in JSON and CSV, declared in ``analysis.columns.DIFF`` (read on each call)
ROW_FIELDS = registry.diff_json_fields()


# ------------------------------------------------------------------------------------------ the document


def describe_side(r: Resolved, side: Side | None = None) -> dict[str, Any]:
    """``side``: the side as compared (in the comparison's unit), else as resolved."""
    s = side or r.side
    return {"label": s.label, "commit": r.commit, "baselines": r.baseline_ids, "unit": s.unit.value,
            "units": s.n_units, "gpus": s.n_gpus, "aligned": s.aligned, "workload": s.meta.workload,
            "gpu_models": s.meta.gpu_models, "window_spec": s.meta.window_spec}


def _num(x: Any) -> Any:
    """A number that is not finite (NaN; an infinite Δ% of a kernel from zero, which has no percentage) is null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _json_column(values: np.ndarray | None, n: int) -> list[Any]:
    """A row column as ``_num`` leaves each of its values: a float column's non-finite cells found by one numpy
    call (2,000 kernels x 30 columns were a Python call a cell); a column the table lacks is null."""
    if values is None:
        return [None] * n
    out = values.tolist()
    if values.dtype.kind == "f":
        for i in np.flatnonzero(~np.isfinite(values)).tolist():
            out[i] = None
    elif values.dtype.kind == "O":
        out = [_num(x) for x in out]
    return out


def diff_doc(comparison: Comparison, verdict: Verdict | None = None) -> dict[str, Any]:
    result = comparison.result
    unit = unit_of(result.totals.unit)
    classes = result.table["class"].tolist()
    counts = {c.value: classes.count(c.value) for c in CLASSES}
    own = [k for k in registry.diff_json_fields() if k not in ("diagnosis", "amdahl")]
    kernels = [dict(zip(own, values))
               for values in zip(*(_json_column(result.table.get(k), len(classes)) for k in own))]
    class_value = {c: KernelClass(c).value for c in set(classes)}  # (a value no class has fails here, as before)
    for row, r in zip(kernels, result.records()):  # the sentences read the raw values (NaN, not null)
        row["class"] = class_value[r["class"]]
        row["diagnosis"] = diagnosis(r, unit)
        row["amdahl"] = amdahl_text(r, unit)
    doc: dict[str, Any] = jsonable.clean({
        "schema": DIFF_SCHEMA,
        "version": 4,
        "unit": result.totals.unit,
        "unit_reason": result.totals.unit_reason,
        "before": describe_side(comparison.before, result.before),
        "after": describe_side(comparison.after, result.after),
        "comparable": not result.mismatches,
        "mismatches": result.mismatches,
        "notes": comparison.notes + result.notes,
        "totals": {k: v for k, v in jsonable.clean(result.totals).items() if v is not None},
        "counts": counts,
        "policy": result.policy.as_dict(),
    })
    cost = comparison.cost
    if cost is not None:  # what the change costs per month on the settings' fleet (``[tool.kbase] gpu_hour_cost``)
        doc["cost"] = jsonable.clean(cost.as_dict())
        for row in kernels:
            row["cost_per_month"] = cost.pricing.per_month(row["effect"] if isinstance(row["effect"], float) else None)
    doc["kernels"] = kernels  # plain values already (``records``, ``_num``): not walked again, 2,000 x 40 of them
    if result.ops is not None:  # null without op information on both sides (``comparison.ops``)
        from kbase.render.ops import ops_doc

        # JSON values already (``ops_doc``): not walked by ``jsonable.clean``, 2,000 op-kernel pairs of them
        doc["ops"] = ops_doc(result.ops, dict(zip(result.table["name"].tolist(), result.table["short_name"].tolist())))
    else:
        doc["ops"] = None
    doc["budget"] = jsonable.clean(budget_diff_doc(result.budget)) if result.budget is not None else None
    if verdict is not None:
        doc["verdict"] = jsonable.clean(verdict_dict(verdict))
    return doc


def diff_json(doc: dict[str, Any]) -> str:
    return jsonable.dumps(doc)


def diff_csv(comparison: Comparison) -> str:
    import pandas as pd  # CSV is written by pandas (the other formats never load it)

    rows = comparison.result.rows
    if not len(rows):
        return to_csv(pd.DataFrame(columns=registry.diff_json_fields()))
    out = rows.copy()
    recs = records(rows)
    unit = unit_of(comparison.result.totals.unit)
    out["diagnosis"] = [diagnosis(r, unit) for r in recs]
    out["amdahl"] = [amdahl_text(r, unit) for r in recs]
    out["class"] = [KernelClass(c).value for c in out["class"]]
    return to_csv(out[registry.diff_json_fields()])


# ------------------------------------------------------------------------------------------ screen and Markdown


def _head_lines(doc: dict[str, Any], judged: bool = True) -> list[str]:
    """The sides, their totals, the budget, the kernels by class and the notes. Not ``judged`` (an incomparable
    gate, whose verdict said why first): neither the incomparabilities again nor classes the gate did not judge."""
    lines = [f"INCOMPARABLE: {m}" for m in doc["mismatches"]] if judged else []
    hint = incomparable_hint(doc["mismatches"])
    if hint and judged:
        lines.append(f"INCOMPARABLE: to compare, {hint}")
    b, a = doc["before"], doc["after"]
    lines.append(f"before: {b['label']} — {b['units']:g} {b['unit']}(s) x {b['gpus']} GPU(s)"
                 + ("" if b["aligned"] else " [not aligned]"))
    lines.append(f"after:  {a['label']} — {a['units']:g} {a['unit']}(s) x {a['gpus']} GPU(s)"
                 + ("" if a["aligned"] else " [not aligned]"))
    t = doc["totals"]
    unit = doc["unit"]
    step_line = bool((doc.get("budget") or {}).get("step", {}).get("before_ns") is not None)
    step_label = "" if step_line else "CPU step wall time"  # the budget's step line says it, judged
    for key, label in (("iteration_wall", f"GPU wall per {unit}"), ("step_wall", step_label),
                       ("kernel", f"kernel time per {unit} per GPU"), ("compute", "  compute"),
                       ("communication", "  communication (NCCL)"), ("memory", "  memory")):
        if label and present(t.get(key)):
            before, after = fmt_ns_pair(t[key]["before"], t[key]["after"])
            lines.append(f"{label}: {before} -> {after} ({fmt_delta_pct(t[key]['delta_pct'])})")
    lines += budget_lines(doc.get("budget"))
    if judged:
        lines.append("kernels: " + (class_counts(doc["counts"]) or "none"))
    if "cost" in doc:
        lines.append(cost_line(doc["cost"]))
    lines += [f"note: {n}" for n in doc["notes"]]
    return lines


def budget_lines(b: dict[str, Any] | None) -> list[str]:
    """The step's verdict and the budget's change block by block (the diff's ``budget`` object)."""
    if not b:
        return []
    per = "iteration" if b["unit"] == "iteration" else "window"
    lines = step_verdict_lines(b)
    blocks = [("compute_ns", "compute"), ("communication_exposed_ns", "exposed communication"),
              ("memory_exposed_ns", "exposed memory"), ("idle_ns", "idle")]
    lines.append(f"GPU time budget per {per} per GPU:")
    for key, label in blocks:
        if b["before"][key] or b["after"][key]:
            before, after, delta = fmt_ns_change(b["before"][key], b["after"][key], b["delta_ns"][key])
            lines.append(f"  {label}: {before} -> {after} ({delta})")
    lines.append(f"  what grew: {b['explained']}")
    if b.get("amdahl"):
        lines.append(f"  {b['amdahl']}")
    return lines


def present(t: dict[str, Any] | None) -> bool:
    """Whether a total has something to say: known, and not absent on both sides (one GPU has no NCCL: its
    communication line is left out, not printed as ``0 ns -> 0 ns``)."""
    return t is not None and t["before"] is not None and bool(t["before"] or t["after"])


def cost_line(cost: dict[str, Any]) -> str:
    """``cost: +$3,952/month on 8 GPUs at $6.77/GPU-hour (flagged kernels: +10.00% of the iteration)``: the
    effect on the iteration x the fleet's GPU-hours per month (GPUs x 24 h x 30.4 d) x the price."""
    cur = cost["currency"]
    if cost["basis"] == "nothing beyond noise":
        what = "nothing beyond noise" + (f"; all kernel time {fmt_money(cost['total_per_month'], cur)} within noise"
                                         if cost.get("total_per_month") is not None else "")
    else:
        what = f"{cost['basis']}: {cost['effect']:+.2%} of the iteration"
    return (f"cost: {fmt_money(cost['per_month'], cur)}/month on {cost['gpus']} GPUs at "
            f"{fmt_money(cost['gpu_hour_cost'], cur, signed=False)}/GPU-hour ({what})")


def quiet_line(doc: dict[str, Any], verdict: Verdict | None = None) -> str:
    """The comparison in one line: the gate's verdict (or the kernel counts) and the total change."""
    t = doc["totals"].get("kernel") or {}
    total = f"kernel time per {doc['unit']} {fmt_delta_pct(t.get('delta_pct'))}" if t else ""
    counts = class_counts(doc["counts"], only=SHOWN_BY_DEFAULT)
    head = verdict_lines(verdict)[0] if verdict is not None else "incomparable" if doc["mismatches"] else "diff"
    if verdict is not None and verdict.status == GateStatus.INCOMPARABLE:  # why, and what to do, not the counts
        return "; ".join([head, *verdict_reasons(verdict)])
    cost = doc.get("cost")
    money = f"{fmt_money(cost['per_month'], cost['currency'])}/month" if cost else ""
    return "; ".join(x for x in (head, counts or "no changed kernels", total, money) if x)


_NO_OP_CHANGED = "no op changed beyond its noise (--all lists every op)"


def _no_op_rows(doc: dict[str, Any], show_all: bool, full_names: bool) -> bool:
    """The diff by op has op information and no row to show: a line says so, never an empty table header."""
    from kbase.render.ops import diff_op_cells

    return doc.get("ops") is not None and not diff_op_cells(doc["ops"], full_names, show_all)


NOT_JUDGED = ("kernel rows not shown: the gate judged none (the sides are not comparable; kbase diff lists them, "
              "--allow-incomparable gates them)")


def unjudged(verdict: Verdict | None) -> bool:
    """An incomparable gate: its verdict and reasons come first, and no row it did not judge follows."""
    return verdict is not None and verdict.status == GateStatus.INCOMPARABLE


def print_diff(doc: dict[str, Any], console: Any, show_all: bool = False, verdict: Verdict | None = None,
               wide: bool = False, full_names: bool = False, by_op: bool = False) -> None:
    """Head lines, the table fitted to the console's width (``wide``: every column; ``by_op``: the diff by op)
    and the verdict (first, and no table, when the gate found the sides incomparable)."""
    from kbase.render.layout import print_table  # rich: only for the screen

    def say(lines: list[str], style: str | None = None) -> None:
        for line in lines:
            console.print(line, highlight=False, markup=False,
                          style=style or ("bold red" if line.startswith("INCOMPARABLE") else None))

    if unjudged(verdict):
        say(verdict_lines(verdict), "bold")
        say(_head_lines(doc, judged=False) + [NOT_JUDGED])
        return
    say(_head_lines(doc))
    if by_op:
        from kbase.render.ops import print_diff_ops

        if _no_op_rows(doc, show_all, full_names):
            say([_NO_OP_CHANGED])
        else:
            print_diff_ops(doc, console, show_all, wide=wide, full_names=full_names)
        say(verdict_lines(verdict), "bold")
        return
    rows, hidden = table.visible(doc, show_all)
    if rows:
        colors = {"regressed": "red", "regressed_below_floor": "magenta", "improved": "green", "new": "yellow",
                  "gone": "cyan", "cannot_judge": "blue"}
        print_table(console, table.columns_of(doc), table.table_cells(rows, table.display(doc, full_names), doc),
                    wide=wide, title=table.diff_title(doc), row_styles=[colors.get(r["class"]) for r in rows])
        say(table.legend(rows) + ([table.hidden_line(hidden)] if hidden else []))
    else:
        say([table.nothing_changed(hidden)])
    say(verdict_lines(verdict), "bold")


def diff_md(doc: dict[str, Any], show_all: bool = False, verdict: Verdict | None = None,
            full_names: bool = False, by_op: bool = False) -> str:
    out = ["## kbase kernel diff", ""]
    if verdict is not None:
        lines = verdict_lines(verdict)
        verdict_md = ["**" + md_text(lines[0]) + "**"] + [f"- {md_text(line.strip())}" for line in lines[1:]]
        if unjudged(verdict):
            return "\n".join(out + verdict_md + [""] + [f"- {md_text(x)}" for x in _head_lines(doc, judged=False)]
                             + ["", f"_{md_text(NOT_JUDGED)}._"]) + "\n"
        out += [f"- {md_text(line)}" for line in _head_lines(doc)] + [""] + verdict_md
    else:
        out += [f"- {md_text(line)}" for line in _head_lines(doc)]
    if by_op:
        from kbase.render.ops import diff_op_md

        ops = ["", f"_{md_text(_NO_OP_CHANGED)}._"] if _no_op_rows(doc, show_all, full_names) else \
            diff_op_md(doc, show_all, full_names)
        return "\n".join(out + ops) + "\n"
    rows, hidden = table.visible(doc, show_all)
    if not rows:
        return "\n".join(out + ["", f"_{md_text(table.nothing_changed(hidden))}._"]) + "\n"
    columns = table.columns_of(doc)
    out += ["", "| " + " | ".join(c.header for c in columns) + " |", "|" + "---|" * len(columns)]
    for cells in table.table_cells(rows, table.display(doc, full_names), doc):
        out.append("| " + " | ".join(md_text(cells[c.key]) for c in columns) + " |")
    words = table.legend(rows)
    out += ["", *(f"- {md_text(line)}" for line in words)] if words else []
    if hidden:
        out.append(f"\n_{hidden} unchanged / within-noise kernel(s) not shown._")
    return "\n".join(out) + "\n"

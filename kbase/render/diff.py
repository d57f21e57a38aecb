"""Render a diff (and a gate verdict) as a rich table, JSON (schema ``kbase.diff/1``), Markdown
for a pull-request comment, CSV, or JUnit XML."""

from __future__ import annotations

import json
import math
from xml.sax.saxutils import escape, quoteattr

import pandas as pd

from kbase.analysis.classify import TC_SYMBOL
from kbase.compare.diff import CLASSES, DIFF_SCHEMA
from kbase.render.leaderboard import fmt_ns, records, to_csv

ROW_FIELDS = ["class", "swap", "name", "name_before", "match", "short_name", "category", "tc_before", "tc_after", "before",
              "after", "delta_ns", "delta_pct", "count_before", "count_after", "delta_count", "avg_before",
              "avg_after", "delta_avg_pct", "share_before", "share_after", "effect", "p_value", "test",
              "confidence", "ignored", "gated", "diagnosis", "amdahl"]
SHOWN_BY_DEFAULT = ("regressed", "improved", "new", "gone")


def _num(x):
    if x is None:
        return None
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    return x


def diff_doc(result, before_desc: dict, after_desc: dict, verdict=None, notes: list[str] | None = None) -> dict:
    rows = result.rows
    counts = {c: int((rows["class"] == c).sum()) if len(rows) else 0 for c in CLASSES}
    doc = {
        "schema": DIFF_SCHEMA,
        "version": 1,
        "unit": result.totals["unit"],
        "before": before_desc,
        "after": after_desc,
        "comparable": not result.mismatches,
        "mismatches": result.mismatches,
        "notes": (notes or []) + result.notes,
        "totals": json.loads(json.dumps(result.totals, default=lambda o: _num(float(o)))),
        "counts": counts,
        "policy": result.policy.as_dict(),
        "kernels": [{k: _num(r.get(k)) for k in ROW_FIELDS} for r in records(rows)] if len(rows) else [],
    }
    if verdict is not None:
        doc["verdict"] = verdict.as_dict()
    return doc


def diff_json(doc: dict) -> str:
    return json.dumps(doc, indent=2, default=str, ensure_ascii=False)


def diff_csv(result) -> str:
    cols = [c for c in ROW_FIELDS if c in result.rows.columns]
    return to_csv(result.rows[cols] if len(result.rows) else pd.DataFrame(columns=ROW_FIELDS))


def _pct(x) -> str:
    if x is None or (isinstance(x, float) and (math.isnan(x))):
        return "-"
    if x in ("inf", "-inf") or (isinstance(x, float) and math.isinf(x)):  # diff_doc writes infinities as strings
        return "new"
    return f"{x:+.1f}%"


def _share(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1%}"


def _head_lines(doc: dict) -> list[str]:
    lines = []
    for m in doc["mismatches"]:
        lines.append(f"INCOMPARABLE: {m}")
    b, a = doc["before"], doc["after"]
    lines.append(f"before: {b['label']} — {b['units']:g} {b['unit']}(s) x {b['gpus']} GPU(s)"
                 + ("" if b["aligned"] else " [not aligned]"))
    lines.append(f"after:  {a['label']} — {a['units']:g} {a['unit']}(s) x {a['gpus']} GPU(s)"
                 + ("" if a["aligned"] else " [not aligned]"))
    t = doc["totals"]
    unit = doc["unit"]
    for key, label in (("iteration_wall", f"GPU wall per {unit}"), ("step_wall", "CPU step wall time"),
                       ("kernel", f"kernel time per {unit} per GPU"), ("compute", "  compute"),
                       ("communication", "  communication (NCCL)"), ("memory", "  memory")):
        if key in t and t[key]["before"] is not None:
            lines.append(f"{label}: {fmt_ns(t[key]['before'])} -> {fmt_ns(t[key]['after'])} ({_pct(t[key]['delta_pct'])})")
    c = doc["counts"]
    lines.append("kernels: " + ", ".join(f"{n} {k}" for k, n in c.items()))
    lines += [f"note: {n}" for n in doc["notes"]]
    return lines


def _cells(r: dict) -> list[str]:
    tc = TC_SYMBOL.get(r["tc_after"] or r["tc_before"] or "na", "-")
    label = r["short_name"] + (" [matched by family]" if r["match"] == "family" else "")
    return [
        r["class"] + (" (low conf.)" if r["confidence"] == "low" and r["class"] == "within noise" else "")
        + (" [ignored]" if r["ignored"] else "") + (" (swap)" if r.get("swap") else ""),
        label[:80], tc, fmt_ns(r["before"]), fmt_ns(r["after"]), fmt_ns(r["delta_ns"]), _pct(r["delta_pct"]),
        f"{r['count_before']:.1f}->{r['count_after']:.1f}", _pct(r["delta_avg_pct"]),
        f"{_share(r['share_before'])}->{_share(r['share_after'])}",
        "-" if r["effect"] is None else f"{r['effect']:+.2%}",
        "-" if r["p_value"] is None else f"{r['p_value']:.2g}",
        r["diagnosis"], r["amdahl"] if r["class"] in ("regressed", "improved", "new", "gone") else "",
    ]


HEADERS = ["class", "kernel", "TC", "before/iter", "after/iter", "Δ/iter", "Δ%", "launches/iter", "Δavg/launch",
           "share", "effect on iter", "p", "diagnosis", "Amdahl"]


def _visible(doc: dict, show_all: bool) -> tuple[list[dict], int]:
    rows = doc["kernels"]
    if show_all:
        return rows, 0
    shown = [r for r in rows if r["class"] in SHOWN_BY_DEFAULT or (r["confidence"] == "low" and r["class"] == "within noise"
                                                                    and (r["delta_pct"] or 0) >= 5)]
    return shown, len(rows) - len(shown)


def verdict_lines(verdict) -> list[str]:
    if verdict is None:
        return []
    head = {"pass": "PASS", "fail": "FAIL", "incomparable": "INCOMPARABLE", "warn-only": "FAIL (warn-only: exit 0)"}
    out = [f"gate: {head[verdict.status]} (exit {verdict.code})"]
    out += [f"  {r}" for r in verdict.reasons]
    out += [f"  accepted: {a['name']} (pattern {a['pattern']}, {a['reason']}, expires {a['expires'] or 'never'})" for a in verdict.accepted]
    out += [f"  warning: {w}" for w in verdict.warnings]
    return out


def print_diff(doc: dict, console, show_all: bool = False, verdict=None) -> None:
    from rich.table import Table

    for line in _head_lines(doc):
        style = "bold red" if line.startswith("INCOMPARABLE") else None
        console.print(line, style=style, highlight=False, markup=False)
    rows, hidden = _visible(doc, show_all)
    t = Table(title="Kernel diff (per iteration per GPU; sorted by effect on iteration time)", header_style="bold")
    for h in HEADERS:
        t.add_column(h, overflow="fold", max_width=60 if h in ("kernel", "Amdahl", "diagnosis") else None)
    colors = {"regressed": "red", "improved": "green", "new": "yellow", "gone": "cyan"}
    for r in rows:
        t.add_row(*_cells(r), style=colors.get(r["class"]))
    console.print(t)
    if hidden:
        console.print(f"{hidden} unchanged / within-noise kernel(s) not shown (--all shows them)", highlight=False)
    for line in verdict_lines(verdict):
        console.print(line, highlight=False, markup=False, style="bold")


def diff_md(doc: dict, show_all: bool = False, verdict=None) -> str:
    out = ["## kbase kernel diff", ""]
    out += [f"- {line}" for line in _head_lines(doc)]
    if verdict is not None:
        out += ["", "**" + verdict_lines(verdict)[0] + "**"] + [f"- {line.strip()}" for line in verdict_lines(verdict)[1:]]
    rows, hidden = _visible(doc, show_all)
    out += ["", "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    for r in rows:
        out.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in _cells(r)) + " |")
    if hidden:
        out.append(f"\n_{hidden} unchanged / within-noise kernel(s) not shown._")
    return "\n".join(out) + "\n"


def junit_xml(doc: dict, verdict) -> str:
    rows = [r for r in doc["kernels"] if r["class"] in ("regressed", "new")]
    failing = {r["name"] for r in verdict.failing}
    cases = []
    for r in rows:
        body = ""
        if r["name"] in failing:
            msg = f"{r['short_name']} {r['class']} {_pct(r['delta_pct'])} per iteration; {r['amdahl']}"
            body = f"<failure message={quoteattr(msg)}>{escape(r['diagnosis'])}</failure>"
        cases.append(f'  <testcase classname="kbase.gate" name={quoteattr(r["name"])}>{body}</testcase>')
    if verdict.status == "incomparable":
        cases.append('  <testcase classname="kbase.gate" name="comparability"><error message='
                     + quoteattr("; ".join(verdict.reasons)) + "/></testcase>")
    if any(f["name"].startswith("(total") for f in verdict.failing):
        cases.append('  <testcase classname="kbase.gate" name="total kernel time per iteration"><failure message='
                     + quoteattr(verdict.reasons[-1]) + "/></testcase>")
    if not cases:
        cases.append('  <testcase classname="kbase.gate" name="no kernel regression"/>')
    nfail = sum("<failure" in c for c in cases)
    nerr = sum("<error" in c for c in cases)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="kbase gate" tests="{len(cases)}" '
            f'failures="{nfail}" errors="{nerr}">\n' + "\n".join(cases) + "\n</testsuite>\n")

"""Render by op: the leaderboard grouped by the op that launched each kernel (``kbase top --by op``) and the
diff by op (``kbase diff --by op``), as a screen table, JSON, CSV and Markdown. Each op row is followed by
its kernels (the drill-down), indented on screen and in Markdown, nested in JSON, one row each in CSV."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kbase import jsonable
from kbase.analysis.names import display_names
from kbase.enums import KernelClass
from kbase.render.columns import Column
from kbase.render.safe import md_text
from kbase.units import ABSENT, column_unit, fmt_delta_pct, fmt_pct, group_units

if TYPE_CHECKING:
    from kbase.analysis.leaderboard import Leaderboard

OP_LEADERBOARD_SCHEMA = "kbase.op_leaderboard/1"
NO_OP_LABEL = "(no op)"  # kernels launched outside every op range, or whose launch call is not in the capture
KERNELS_SHOWN = 5  # kernels under each op on screen and in Markdown (JSON and CSV: all)
INDENT = "  └ "


def no_ops_note(fmt: str, notes: list[str] | None = None) -> str:
    """Why a leaderboard has no op information: its own note when attribution was left out (a baseline an
    earlier kbase stored past its cap on pairs x iterations, which the sparse split no longer has), else no op
    ranges in the profile."""
    left_out = next((n for n in notes or [] if n.startswith("kernel time by op left out")), None)
    if left_out:
        return f"no op information: {left_out}; kbase top --by op ({fmt}) lists none"
    return (f"no op information: the profile has no op ranges (PyTorch profiler cpu_op events, NVTX ranges) "
            f"around its kernel launches; kbase top --by op ({fmt}) lists none")


def _left_out(lb: Leaderboard) -> bool:
    return any(n.startswith("kernel time by op left out") for n in lb.notes)


def _label(op: str | None) -> str:
    return NO_OP_LABEL if op is None else op


# ------------------------------------------------------------------------------------------ top --by op


def op_rows(lb: Leaderboard) -> list[dict[str, Any]]:
    """The leaderboard grouped by op (``analysis.ops.op_board``); empty without op information."""
    from kbase.analysis.ops import op_board

    if lb.ops is None:
        return []
    shorts = dict(zip(lb.column("name").tolist(), lb.column("short_name").tolist()))
    return op_board(lb.ops, lb.summary, shorts)


def op_leaderboard_json(lb: Leaderboard, limit: int | None = None, extra: dict[str, Any] | None = None) -> str:
    rows = op_rows(lb)
    shown = rows if not limit or limit <= 0 else rows[:limit]
    return jsonable.dumps({"schema": OP_LEADERBOARD_SCHEMA, **(extra or {}), "summary": lb.summary,
                           "notes": lb.notes if lb.ops is not None or _left_out(lb)
                           else [*lb.notes, no_ops_note("json")],
                           "truncated": len(shown) < len(rows), "omitted": len(rows) - len(shown), "ops": shown})


OP_CSV_COLUMNS = ["op", "op_total_ns", "op_share_kernel", "kernel", "short_name", "count", "total_ns", "avg_ns",
                  "per_iter_ns", "count_per_iter", "share_window", "share_kernel", "share_op"]


def op_leaderboard_csv(lb: Leaderboard, limit: int | None = None) -> str:
    """One row per (op, kernel), with its op's total and share (the op empty: launched by no op)."""
    from kbase.render.leaderboard import rows_csv

    rows = op_rows(lb)
    shown = rows if not limit or limit <= 0 else rows[:limit]
    out = [{"op": r["op"], "op_total_ns": r["total_ns"], "op_share_kernel": r["share_kernel"], "kernel": k["name"],
            **{c: k[c] for c in OP_CSV_COLUMNS[4:]}} for r in shown for k in r["kernel_rows"]]
    return rows_csv(OP_CSV_COLUMNS, out)


OP_COLUMNS = [
    Column("rank", "#", 0),
    Column("op", "Op / kernel", 0, min_width=28, want_width=44, max_width=90, justify="left", shrink=True,
           keep_tail=True),
    Column("kernels", "Kernels", 3),
    Column("count", "Count", 2),
    Column("total", "Total", 0),
    Column("avg", "Avg", 3),
    Column("per_iter", "/iter/GPU", 0),
    Column("share_window", "%window", 4),
    Column("share_kernel", "%kernel", 0),
    Column("share_op", "%op", 1),
]


def _board_cells(rows: list[dict[str, Any]], full_names: bool) -> list[dict[str, str]]:
    """The op rows, each followed by its first ``KERNELS_SHOWN`` kernels; each time column in one unit over the
    rows shown (``units.column_unit``)."""
    shown = [(r, r["kernel_rows"][:KERNELS_SHOWN]) for r in rows]
    every = [x for r, ks in shown for x in (r, *ks)]
    unit = {c: column_unit(x[c] for x in every) for c in ("total_ns", "avg_ns", "per_iter_ns")}
    out = []
    for rank, (r, ks) in enumerate(shown, 1):
        out.append({"rank": str(rank), "op": _label(r["op"]), "kernels": str(r["kernels"]), "count": f"{r['count']:,}",
                    "total": unit["total_ns"](r["total_ns"]), "avg": unit["avg_ns"](r["avg_ns"]),
                    "per_iter": unit["per_iter_ns"](r["per_iter_ns"]), "share_window": fmt_pct(r["share_window"]),
                    "share_kernel": fmt_pct(r["share_kernel"]), "share_op": ""})
        labels = display_names([k["name"] for k in ks], [k["short_name"] for k in ks], full=full_names)
        for k, label in zip(ks, labels):
            out.append({"rank": "", "op": INDENT + label, "kernels": "", "count": f"{k['count']:,}",
                        "total": unit["total_ns"](k["total_ns"]), "avg": unit["avg_ns"](k["avg_ns"]),
                        "per_iter": unit["per_iter_ns"](k["per_iter_ns"]), "share_window": fmt_pct(k["share_window"]),
                        "share_kernel": fmt_pct(k["share_kernel"]), "share_op": fmt_pct(k["share_op"])})
        if len(r["kernel_rows"]) > KERNELS_SHOWN:
            more = f"{INDENT}… {len(r['kernel_rows']) - KERNELS_SHOWN} more kernel(s)"
            out.append({"rank": "", "op": more, **{c.key: "" for c in OP_COLUMNS if c.key not in ("rank", "op")}})
    return out


def _more_note(rows: list[dict[str, Any]]) -> str | None:
    """What the kernels under each op leave out, and where they all are."""
    if any(len(r["kernel_rows"]) > KERNELS_SHOWN for r in rows):
        return f"each op shows its {KERNELS_SHOWN} largest kernels (--format json or csv lists all)"
    return None


def op_leaderboard_md(lb: Leaderboard, limit: int | None = 20, full_names: bool = False) -> str:
    from kbase.render.leaderboard import _summary_lines

    rows = op_rows(lb)
    shown = rows if not limit or limit <= 0 else rows[:limit]
    out = ["### Kernel leaderboard by op", ""]
    out += [f"- {md_text(line)}" for line in _summary_lines(lb.summary) + lb.notes]
    if lb.ops is None:
        return "\n".join(out + ["", f"_{md_text(no_ops_note('md', lb.notes))}_"]) + "\n"
    out += ["", "| " + " | ".join(c.header for c in OP_COLUMNS) + " |", "|" + "---|" * len(OP_COLUMNS)]
    out += ["| " + " | ".join(md_text(cells.get(c.key, "")) for c in OP_COLUMNS) + " |"
            for cells in _board_cells(shown, full_names)]
    if (more := _more_note(shown)) is not None:
        out.append(f"\n_{md_text(more)}._")
    if len(shown) < len(rows):
        out.append(f"\n_{len(rows) - len(shown)} more op(s) not shown (truncated; use --limit 0 for all)._")
    return "\n".join(out) + "\n"


def print_op_leaderboard(lb: Leaderboard, console: Any, limit: int | None = 20, wide: bool = False,
                         full_names: bool = False) -> None:
    from kbase.render.layout import print_table
    from kbase.render.leaderboard import _summary_lines

    rows = op_rows(lb)
    shown = rows if not limit or limit <= 0 else rows[:limit]
    for line in _summary_lines(lb.summary):
        console.print(line, highlight=False, markup=False)
    for note in lb.notes:
        console.print(f"note: {note}", style="yellow", highlight=False, markup=False)
    if lb.ops is None:
        console.print(no_ops_note("table", lb.notes), style="yellow", highlight=False, markup=False)
        return
    print_table(console, OP_COLUMNS, _board_cells(shown, full_names), wide=wide,
                title="Kernel leaderboard by op (each op's kernels below it; %op: share of the op's time)")
    if (more := _more_note(shown)) is not None:
        console.print(more, highlight=False, markup=False)
    if len(shown) < len(rows):
        console.print(f"truncated: {len(rows) - len(shown)} more op(s) not shown (--limit 0 for all)", highlight=False)


# ------------------------------------------------------------------------------------------ diff --by op


def ops_doc(result_ops: Any, short_names: dict[str, str]) -> list[dict[str, Any]]:
    """The ``ops`` list of the diff document: each op's row (``comparison.ops.OP_COLUMNS``; classes snake_case)
    and its kernels (per (op, kernel) pair: before, after, Δ, launches per iteration per GPU). Made of JSON
    values only (the tables' ``tolist`` gives Python scalars, classes are stored as their values, ``_num`` nulls
    NaN and inf): the document holds it as it is (tests/render/test_diff_doc_values.py)."""
    out = []
    for r in result_ops.records():
        row = {k: _num(v) for k, v in r.items()}
        row["kernels_changed"] = int(r["kernels_changed"])
        row["kernel_rows"] = [{"name": k["kernel"], "short_name": short_names.get(k["kernel"], k["kernel"]),
                               **{c: _num(k[c]) for c in ("before", "after", "delta_ns", "count_before",
                                                          "count_after")}}
                              for k in result_ops.kernels_of(r["op"])]
        out.append(row)
    return out


def _num(x: Any) -> Any:
    """Not a finite number (NaN; the infinite Δ% of an op new on the after side): null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


DIFF_OP_COLUMNS = [
    Column("class", "class", 0, justify="left"),
    Column("op", "op / kernel", 0, min_width=24, want_width=40, max_width=80, justify="left", shrink=True,
           keep_tail=True),
    Column("before", "before/iter", 2),
    Column("after", "after/iter", 2),
    Column("delta", "Δ/iter", 0),
    Column("delta_pct", "Δ%", 0),
    Column("effect", "effect", 1),
    Column("launches", "launches/iter", 4),
    Column("mde", "MDE", 1),
    Column("swap", "kernels", 3, justify="left"),
]


def diff_op_columns(doc: dict[str, Any]) -> list[Column]:
    """``DIFF_OP_COLUMNS`` headed in the diff's unit (``/iter``, ``/run``, ``/s``): ops are compared in the
    kernels' unit."""
    from dataclasses import replace

    from kbase.comparison.side import unit_of

    short = unit_of(doc.get("unit")).short
    return [replace(c, header=c.header.replace("/iter", short)) for c in DIFF_OP_COLUMNS]


def _class_label(r: dict[str, Any]) -> str:
    return KernelClass(r["class"]).label + (" [ignored]" if r.get("ignored") else "")


def _sides(x: dict[str, Any]) -> tuple[float | None, float | None]:
    """An op's (or an op's kernel's) time before and after, None on a side where it has none (a new op, a kernel
    new to the op): shown as ``units.ABSENT``, never as a zero."""
    b, a = x["before"], x["after"]
    return (None if not b and a else b), (None if not a and b else a)


def _delta_pct(x: dict[str, Any]) -> str:
    """Δ%: ``new`` without a before side (no percentage exists), never ``inf``."""
    return "new" if _sides(x)[0] is None and x["after"] else fmt_delta_pct(x["delta_pct"])


def diff_op_cells(ops: list[dict[str, Any]], full_names: bool = False, show_all: bool = False) -> list[dict[str, str]]:
    """Each op row, then (for a changed op, or with ``show_all``) its kernels whose time changed most; before and
    after in one unit, Δ in one, signed (``units.column_unit`` over the rows shown)."""
    changed = (KernelClass.REGRESSED, KernelClass.REGRESSED_BELOW_FLOOR, KernelClass.IMPROVED, KernelClass.NEW,
               KernelClass.GONE)
    shown = []
    for r in ops:
        if not show_all and r["class"] not in changed and not r["reshuffled"]:
            continue
        ks = [k for k in r["kernel_rows"] if abs(k["delta_ns"] or 0) > 0 or show_all]
        labels = display_names([k["name"] for k in ks], [k["short_name"] for k in ks], full=full_names)
        shown.append((r, list(zip(ks, labels))[:KERNELS_SHOWN]))
    every = [x for r, ks in shown for x in (r, *(k for k, _ in ks))]
    times, delta = group_units((v for x in every for v in _sides(x)), (x["delta_ns"] for x in every))
    out = []
    for r, ks in shown:
        mde = r.get("mde_rel")
        before, after = _sides(r)
        out.append({"class": _class_label(r), "op": ("(swap) " if r["reshuffled"] else "") + _label(r["op"]),
                    "before": times(before), "after": times(after),
                    "delta": delta(r["delta_ns"]), "delta_pct": _delta_pct(r),
                    "effect": ABSENT if r["effect"] is None else f"{r['effect']:+.2%}",
                    "launches": f"{(r['count_before'] or 0):.1f}->{(r['count_after'] or 0):.1f}",
                    "mde": ABSENT if mde is None else f"{mde:.1%}",
                    "swap": (f"{r['kernels_changed']} of {r['kernels']} changed" if r["reshuffled"]
                             else f"{r['kernels']}")})
        for k, label in ks:
            before, after = _sides(k)
            out.append({"class": "", "op": INDENT + label, "before": times(before), "after": times(after),
                        "delta": delta(k["delta_ns"]),
                        "delta_pct": _delta_pct({**k, "delta_pct": k["delta_ns"] / k["before"] * 100 if k["before"]
                                                 else None}),
                        "effect": "", "launches": f"{(k['count_before'] or 0):.1f}->{(k['count_after'] or 0):.1f}",
                        "mde": "", "swap": ""})
    return out


def diff_op_md(doc: dict[str, Any], show_all: bool = False, full_names: bool = False) -> list[str]:
    ops = doc.get("ops")
    if ops is None:
        return ["", "_no op information on both sides (a side stored before op attribution, or a profile without "
                "op ranges): the diff by op needs both_"]
    columns = diff_op_columns(doc)
    out = ["", "### By op", "", "| " + " | ".join(c.header for c in columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(md_text(c.get(col.key, "")) for col in columns) + " |"
            for c in diff_op_cells(ops, full_names, show_all)]
    return out


def print_diff_ops(doc: dict[str, Any], console: Any, show_all: bool = False, wide: bool = False,
                   full_names: bool = False) -> None:
    from kbase.render.layout import print_table

    ops = doc.get("ops")
    if ops is None:
        console.print("no op information on both sides (a side stored before op attribution, or a profile without "
                      "op ranges): the diff by op needs both", style="yellow", highlight=False, markup=False)
        return
    cells = diff_op_cells(ops, full_names, show_all)
    from kbase.comparison.side import unit_of

    print_table(console, diff_op_columns(doc), cells, wide=wide,
                title=f"Diff by op ({unit_of(doc.get('unit')).per} per GPU; each op's kernels that changed below it)")
    hidden = sum(1 for r in ops if not show_all and r["class"] not in (
        "regressed", "regressed_below_floor", "improved", "new", "gone") and not r["reshuffled"])
    if hidden:
        console.print(f"{hidden} unchanged / within-noise op(s) not shown (--all shows them)", highlight=False)


def diff_op_csv(doc: dict[str, Any]) -> str:
    from kbase.render.leaderboard import rows_csv

    cols = ["class", "op", "bare", "reshuffled", "swap", "gated", "before", "after", "delta_ns", "delta_pct",
            "count_before", "count_after", "effect", "z", "p_value", "noise_source", "mde_rel", "kernels",
            "kernels_changed"]
    return rows_csv(cols, [{c: r[c] for c in cols} for r in doc.get("ops") or []])

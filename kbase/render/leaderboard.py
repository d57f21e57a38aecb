"""Last stage — render a leaderboard as a rich table, JSON, CSV or Markdown.

Data stays in nanoseconds; only the screen formats use readable units.
"""

from __future__ import annotations

import io
import json
import math

import pandas as pd

from kbase.analysis.classify import TC_SYMBOL
from kbase.errors import InputError

FORMATS = ("table", "json", "csv", "md")
LEADERBOARD_SCHEMA = "kbase.leaderboard/1"


def check_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r}: unknown format (choose one of {', '.join(FORMATS)})")
    return fmt


def fmt_ns(ns: float | int | None) -> str:
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def fmt_pct(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{100 * x:.{digits}f}%"


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def _clean(v):
    if isinstance(v, float) and math.isnan(v):
        return None
    if hasattr(v, "item"):
        v = v.item()
        if isinstance(v, float) and math.isnan(v):
            return None
    return v


def records(table: pd.DataFrame) -> list[dict]:
    return [{c: _clean(v) for c, v in row.items()} for row in table.to_dict("records")]


def cut(table: pd.DataFrame, limit: int | None) -> tuple[pd.DataFrame, int]:
    if limit is None or limit <= 0 or len(table) <= limit:
        return table, 0
    return table.head(limit), len(table) - limit


def leaderboard_json(lb, limit: int | None = None, extra: dict | None = None) -> str:
    shown, omitted = cut(lb.table, limit)
    doc = {
        "schema": LEADERBOARD_SCHEMA,
        **(extra or {}),
        "summary": lb.summary,
        "notes": lb.notes,
        "truncated": omitted > 0,
        "omitted": omitted,
        "kernels": records(shown),
    }
    return json.dumps(doc, indent=2, default=_json_default, ensure_ascii=False)


def to_csv(df: pd.DataFrame) -> str:
    """CSV text of ``df``. pandas' minimal quoting only quotes fields holding ``"\\n"`` (its line
    terminator): a kernel name with a carriage return would split its row for every CSV reader, so
    then every field is quoted."""
    import csv

    texts = df.select_dtypes(include=["object", "category", "string"])
    has_cr = any(texts[c].map(lambda v: isinstance(v, str) and "\r" in v).any() for c in texts.columns)
    buf = io.StringIO()
    df.to_csv(buf, index=False, quoting=csv.QUOTE_ALL if has_cr else csv.QUOTE_MINIMAL)
    return buf.getvalue()


def leaderboard_csv(lb, limit: int | None = None) -> str:
    shown, _ = cut(lb.table, limit)
    return to_csv(shown)


def _summary_lines(s: dict) -> list[str]:
    lines = [
        f"source: {s['source']} ({s['exporter']}); GPU: {', '.join(s['gpu_models'])} x {s['gpus']}",
        f"window: {s['window']}",
        f"share denominator: {s['share_denominator']}",
        f"compute {fmt_pct(s['compute_share'])} | communication (NCCL) {fmt_pct(s['communication_share'])} | "
        f"memory {fmt_pct(s['memory_share'])} | all kernels {fmt_pct(s['busy_share'])} of window GPU time"
        + (" (streams overlap)" if (s["busy_share"] or 0) > 1 else ""),
    ]
    if s.get("kernel_ns_per_iter") is not None:
        lines.append(f"kernel time per iteration per GPU: {fmt_ns(s['kernel_ns_per_iter'])} over {s['iterations']} iteration(s)")
    lines.append("shape: " + "; ".join(s["shape"]))
    if s.get("unattributed_no_launch"):
        lines.append(f"unattributed: {s['unattributed_no_launch']} kernel(s) whose launch call is outside the capture")
    return lines


def _row_cells(r: dict, per_gpu: bool) -> list[str]:
    flags = []
    if r["fragmented"]:
        flags.append("fragmented")
    if r["min_ns"] > 0 and r["max_ns"] / r["min_ns"] >= 3 and r["count"] >= 3:
        flags.append(f"unstable {r['max_ns'] / r['min_ns']:.0f}x")
    cells = [str(r["gpu"])] if per_gpu else []
    return cells + [
        r["short_name"][:90],
        {"compute": "comp", "communication": "comm", "memory": "mem"}.get(r["category"], r["category"]),
        TC_SYMBOL[r["tc"]],
        f"{r['count']:,}",
        fmt_ns(r["total_ns"]),
        fmt_ns(r["avg_ns"]),
        fmt_ns(r["median_ns"]),
        fmt_ns(r["min_ns"]),
        fmt_ns(r["max_ns"]),
        fmt_ns(r["std_ns"]),
        fmt_ns(r["per_iter_ns"]),
        fmt_pct(r["share_window"]),
        fmt_pct(r["share_kernel"]),
        f"{r['amdahl_ceiling']:.3f}x",
        " ".join(flags),
    ]


HEADERS = ["Kernel", "Cat", "TC", "Count", "Total", "Avg", "Med", "Min", "Max", "Std", "/iter/GPU",
           "%window", "%kernel", "Amdahl max", "Flags"]


def leaderboard_md(lb, limit: int | None = 20) -> str:
    shown, omitted = cut(lb.table, limit)
    per_gpu = "gpu" in shown.columns
    head = (["GPU"] if per_gpu else []) + HEADERS
    out = ["### Kernel leaderboard", ""] + [f"- {line}" for line in _summary_lines(lb.summary) + lb.notes] + [""]
    out.append("| # | " + " | ".join(head) + " |")
    out.append("|" + "---|" * (len(head) + 1))
    for i, r in enumerate(records(shown), 1):
        cells = [c.replace("|", "\\|") for c in _row_cells(r, per_gpu)]
        out.append(f"| {i} | " + " | ".join(cells) + " |")
    if omitted:
        out.append(f"\n_{omitted} more kernel(s) not shown (truncated; use --limit 0 for all)._")
    return "\n".join(out) + "\n"


def print_leaderboard(lb, console, limit: int | None = 20, title: str = "Kernel leaderboard") -> None:
    from rich.table import Table

    shown, omitted = cut(lb.table, limit)
    per_gpu = "gpu" in shown.columns
    for line in _summary_lines(lb.summary):
        console.print(line, highlight=False, markup=False)
    for note in lb.notes:
        console.print(f"note: {note}", style="yellow", highlight=False, markup=False)
    table = Table(title=title, show_lines=False, header_style="bold")
    table.add_column("#", justify="right")
    for h in (["GPU"] if per_gpu else []) + HEADERS:
        justify = "left" if h in ("Kernel", "Cat", "TC", "Flags", "GPU") else "right"
        if h == "Kernel":
            table.add_column(h, justify=justify, overflow="fold", min_width=28, max_width=90)
        else:
            table.add_column(h, justify=justify, no_wrap=True)
    for i, r in enumerate(records(shown), 1):
        table.add_row(str(i), *_row_cells(r, per_gpu))
    console.print(table)
    if omitted:
        console.print(f"truncated: {omitted} more kernel(s) not shown (--limit 0 for all)", highlight=False)
    console.print("TC: ✓ tensor cores  - not eligible  ⚠ matmul/conv without a tensor-core path", style="dim")

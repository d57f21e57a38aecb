"""Last stage — render a leaderboard as a rich table, JSON, CSV or Markdown.

Data stays in nanoseconds; only the screen formats use readable units.
"""

from __future__ import annotations

import io
import math
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from kbase import jsonable
from kbase.analysis.classify import TC_SYMBOL
from kbase.render.safe import md_text
from kbase.render.units import fmt_ns, fmt_pct

if TYPE_CHECKING:
    from kbase.analysis.leaderboard import Leaderboard, LeaderboardSummary

LEADERBOARD_SCHEMA = "kbase.leaderboard/1"


def records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts of Python scalars (NaN stays NaN: cells show "-", JSON writes null)."""
    return table.to_dict("records")


def cut(table: pd.DataFrame, limit: int | None) -> tuple[pd.DataFrame, int]:
    if limit is None or limit <= 0 or len(table) <= limit:
        return table, 0
    return table.head(limit), len(table) - limit


def leaderboard_json(lb: Leaderboard, limit: int | None = None, extra: dict[str, Any] | None = None) -> str:
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
    return jsonable.dumps(doc)


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


def _summary_lines(s: LeaderboardSummary) -> list[str]:
    lines = [
        f"source: {s.source} ({s.exporter}); GPU: {', '.join(s.gpu_models)} x {s.gpus}",
        f"window: {s.window}",
        f"share denominator: {s.share_denominator}",
        f"compute {fmt_pct(s.compute_share)} | communication (NCCL) {fmt_pct(s.communication_share)} | "
        f"memory {fmt_pct(s.memory_share)} | all kernels {fmt_pct(s.busy_share)} of window GPU time"
        + (" (streams overlap)" if (s.busy_share or 0) > 1 else ""),
    ]
    if s.kernel_ns_per_iter is not None:
        lines.append(f"kernel time per iteration per GPU: {fmt_ns(s.kernel_ns_per_iter)} over {s.iterations} "
                     "iteration(s)")
    lines.append("shape: " + "; ".join(s.shape))
    if s.unattributed_no_launch:
        lines.append(f"unattributed: {s.unattributed_no_launch} kernel(s) whose launch call is outside the capture")
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
        "∞" if not math.isfinite(r["amdahl_ceiling"]) else f"{r['amdahl_ceiling']:.3f}x",
        " ".join(flags),
    ]


HEADERS = ["Kernel", "Cat", "TC", "Count", "Total", "Avg", "Med", "Min", "Max", "Std", "/iter/GPU",
           "%window", "%kernel", "Amdahl max", "Flags"]


def leaderboard_md(lb, limit: int | None = 20) -> str:
    shown, omitted = cut(lb.table, limit)
    per_gpu = "gpu" in shown.columns
    head = (["GPU"] if per_gpu else []) + HEADERS
    out = ["### Kernel leaderboard", ""] + [f"- {md_text(line)}" for line in _summary_lines(lb.summary) + lb.notes]
    out.append("")
    out.append("| # | " + " | ".join(head) + " |")
    out.append("|" + "---|" * (len(head) + 1))
    for i, r in enumerate(records(shown), 1):
        cells = [md_text(c) for c in _row_cells(r, per_gpu)]
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
        justify: Literal["left", "right"] = "left" if h in ("Kernel", "Cat", "TC", "Flags", "GPU") else "right"
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

"""How a leaderboard (``Leaderboard``, ``LeaderboardRows``) shows itself in a notebook: a one-line ``repr``
(what it is and its headline numbers) and a small HTML table of its top kernels (``_repr_html_``), every name
escaped (``display.html_table``). Both format what the leaderboard holds; ``.table`` has every row and column."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kbase.analysis.board import board_of
from kbase.analysis.classify import TC_SYMBOL
from kbase.analysis.names import display_names
from kbase.display import clip, html_table, inert
from kbase.units import column_unit, fmt_ns, fmt_pct

if TYPE_CHECKING:
    from kbase.analysis.board import AnyLeaderboard

TOP = 10


def leaderboard_line(lb: AnyLeaderboard, kind: str = "Leaderboard") -> str:
    b = board_of(lb)
    s = b.summary
    parts = [f"{len(b.rows):,} kernels"]
    if s.kernel_ns_per_iter is not None:
        parts.append(f"{fmt_ns(s.kernel_ns_per_iter)} kernel time per iteration per GPU over {s.iterations} "
                     "iteration(s)")
    else:
        parts.append(f"{fmt_ns(s.total_kernel_ns)} kernel time in the window (no iterations)")
    parts.append(f"{s.gpus} GPU(s) {', '.join(s.gpu_models)}".rstrip())
    if b.rows:
        top = b.rows[0]
        parts.append(f"top: {clip(str(top['short_name']), 60)} {fmt_pct(top['share_kernel'])} of kernel time")
    return inert(f"<{kind}: " + "; ".join(parts) + ">")


def leaderboard_html(lb: AnyLeaderboard, caption: str | None = None) -> str:
    b = board_of(lb)
    rows = b.rows[:TOP]
    total = column_unit(r["total_ns"] for r in rows)
    avg = column_unit(r["avg_ns"] for r in rows)
    per_iter = column_unit(r["per_iter_ns"] for r in rows)
    # as the command line's table: a #id (and template arguments) where two kernels share a short name
    names = display_names([str(r["name"]) for r in b.rows], [str(r["short_name"]) for r in b.rows], first=len(rows))
    cells = [(i, names[i - 1], TC_SYMBOL.get(r["tc"], "-"), f"{r['count']:,}", total(r["total_ns"]),
              avg(r["avg_ns"]), fmt_pct(r["share_kernel"]), per_iter(r["per_iter_ns"]))
             for i, r in enumerate(rows, 1)]
    notes = [f"share denominator: {b.summary.share_denominator}; window: {b.summary.window}"]
    if len(b.rows) > len(rows):
        notes.append(f"{len(b.rows) - len(rows):,} more kernel(s): .table has every row")
    return html_table(["#", "kernel", "TC", "Count", "Total", "Avg", "%kernel", "/iter/GPU"], cells,
                      caption=caption if caption is not None else leaderboard_line(lb)[1:-1], notes=notes,
                      numeric=(0, 3, 4, 5, 6, 7))

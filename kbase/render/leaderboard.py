"""Last stage — render a leaderboard as a rich table, JSON, CSV or Markdown.

Data stays in nanoseconds; only the screen formats use readable units.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kbase import jsonable
from kbase.analysis import columns as registry
from kbase.analysis.board import AnyLeaderboard, LeaderboardRows, board_of, records  # noqa: F401 - records re-exported
from kbase.analysis.columns import Stat
from kbase.analysis.names import display_names, short_id
from kbase.enums import TC_SYMBOL
from kbase.render.columns import Column
from kbase.render.safe import md_text
from kbase.units import ColumnUnit, column_unit, fmt_ns, fmt_pct

if TYPE_CHECKING:
    import pandas as pd

    from kbase.analysis.diagnosis import Annotation
    from kbase.analysis.summary import LeaderboardSummary

# Renderers take a leaderboard as rows (``analysis.board``): a computed Leaderboard is converted at the
# boundary, a stored one comes as rows from the store, so ``kbase show`` never needs pandas.

LEADERBOARD_SCHEMA = "kbase.leaderboard/1"


def cut(rows: list[dict[str, Any]], limit: int | None) -> tuple[list[dict[str, Any]], int]:
    if limit is None or limit <= 0 or len(rows) <= limit:
        return rows, 0
    return rows[:limit], len(rows) - limit


def row_notes(b: LeaderboardRows, rows: list[dict[str, Any]]) -> list[Annotation]:
    """``analysis.diagnosis.annotate`` of ``rows`` (some of ``b``'s): the TC reason with its fix and the
    diagnosis. The per-iteration bounds are read only when a row's Max/median needs them."""
    from kbase.analysis.diagnosis import annotate

    s = b.summary
    return annotate(rows, s.gpu_models, b.bounds if s.aligned else None, s.iterations)


def leaderboard_json(lb: AnyLeaderboard, limit: int | None = None, extra: dict[str, Any] | None = None) -> str:
    b = board_of(lb)
    shown, omitted = cut(b.rows, limit)
    kernels = [r | a._asdict() for r, a in zip(shown, row_notes(b, shown))]
    doc = {
        "schema": LEADERBOARD_SCHEMA,
        **(extra or {}),
        "summary": b.summary,
        "notes": b.notes,
        "truncated": omitted > 0,
        "omitted": omitted,
        "kernels": kernels,
    }
    return jsonable.dumps(doc)


def to_csv(df: pd.DataFrame) -> str:
    """CSV text of ``df``. pandas' minimal quoting only quotes fields holding ``"\\n"`` (its line
    terminator): a kernel name with a carriage return would split its row for every CSV reader, so
    then every field is quoted."""
    import csv

    from kbase.render.safe import csv_text

    texts = df.select_dtypes(include=["object", "category", "string"])
    if len(texts.columns):
        df = df.assign(**{c: texts[c].map(csv_text) for c in texts.columns})
        texts = df[texts.columns]
    has_cr = any(texts[c].map(lambda v: isinstance(v, str) and "\r" in v).any() for c in texts.columns)
    buf = io.StringIO()
    df.to_csv(buf, index=False, quoting=csv.QUOTE_ALL if has_cr else csv.QUOTE_MINIMAL)
    return buf.getvalue()


def rows_csv(columns: list[str], rows: list[dict[str, Any]]) -> str:
    """``to_csv`` of rows, byte for byte as pandas writes the same table (floats as ``repr``, NaN and
    None empty, text through ``csv_text``; every field quoted when a text holds a carriage return)."""
    import csv

    from kbase.render.safe import csv_text

    def cell(v: Any) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        if isinstance(v, str):
            return csv_text(v)
        return repr(v) if isinstance(v, float) else str(v)

    cells = [[cell(r.get(c)) for c in columns] for r in rows]
    has_cr = any("\r" in v for row in cells for v in row)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL if has_cr else csv.QUOTE_MINIMAL)
    w.writerow(columns)
    w.writerows(cells)
    return buf.getvalue()


# What a row says beyond its columns (``analysis.diagnosis.Annotation``): in JSON, CSV and the tables alike.
NOTE_COLUMNS = ["tc_reason", "diagnosis", "diagnosis_reason"]


def leaderboard_csv(lb: AnyLeaderboard, limit: int | None = None) -> str:
    b = board_of(lb)
    shown, _ = cut(b.rows, limit)
    return rows_csv(b.columns + NOTE_COLUMNS, [r | n._asdict() for r, n in zip(shown, row_notes(b, shown))])


def _summary_lines(s: LeaderboardSummary) -> list[str]:
    lines = [
        f"source: {s.source} ({s.exporter}); GPU: {', '.join(s.gpu_models)} x {s.gpus}",
        f"window: {s.window}",
    ]
    if s.budget:
        from kbase.analysis.budget_blocks import budget_from_stored
        from kbase.render.budget import budget_summary_lines

        b = budget_from_stored(s.budget)
        lines.append(f"GPU time budget (denominator: {b.denominator}):")
        lines += ["  " + line for line in budget_summary_lines(b)]
        lines.append(f"share denominator (kernel columns): {s.share_denominator}")
        lines.append(f"all kernels {fmt_pct(s.busy_share)} of that window's GPU time"
                     + (" (streams overlap: the budget counts each instant once)" if (s.busy_share or 0) > 1 else ""))
    else:  # stored before the budget existed
        lines += [f"share denominator: {s.share_denominator}",
                  f"compute {fmt_pct(s.compute_share)} | communication (NCCL) {fmt_pct(s.communication_share)} | "
                  f"memory {fmt_pct(s.memory_share)} | all kernels {fmt_pct(s.busy_share)} of window GPU time"
                  + (" (streams overlap)" if (s.busy_share or 0) > 1 else "")]
    if s.kernel_ns_per_iter is not None:
        lines.append(f"kernel time per iteration per GPU: {fmt_ns(s.kernel_ns_per_iter)} over {s.iterations} "
                     "iteration(s)")
    lines.append("shape: " + "; ".join(s.shape))
    if s.unattributed_no_launch:
        lines.append(f"unattributed: {s.unattributed_no_launch} kernel(s) whose launch call is outside the capture")
    return lines


def _flags(r: dict) -> str:
    flags = []
    if r["fragmented"]:
        flags.append("fragmented")
    if r["min_ns"] > 0 and r["max_ns"] / r["min_ns"] >= 3 and r["count"] >= 3:
        flags.append(f"unstable {r['max_ns'] / r['min_ns']:.0f}x")
    return " ".join(flags)


# The screen table (``analysis.columns.LEADERBOARD``, by place): priority 0 never drops — rank, name and the four
# reads (TC, Count, Total, Avg); the larger the number, the sooner a column drops as the terminal narrows: at 120
# columns Min–Max, %kernel and the diagnosis join, then %window, time per iteration, Amdahl and the rest. The
# reason is --wide only.
def _table() -> list[tuple[Stat, Column]]:
    """The columns as declared now (read on each call, so a declaration is all a new column needs)."""
    key = (id(registry.LEADERBOARD), id(registry.GPU))
    if key not in _TABLES:
        _TABLES.clear()
        _TABLES[key] = registry.table((registry.GPU, *registry.LEADERBOARD))
    return _TABLES[key]


_TABLES: dict[tuple[int, int], list[tuple[Stat, Column]]] = {}


COLUMNS = [c for _, c in _table()]
HEADERS = [c.header for c in COLUMNS if c.key not in ("rank", "gpu")]


def _time_columns() -> dict[str, str]:
    """Screen key -> row field of the columns shown in a time unit (``Stat.cell`` "time")."""
    return {c.key: s.name for s, c in _table() if s.cell == "time"}


def column_units(rows: list[dict]) -> dict[str, ColumnUnit]:
    """One unit per time column of the shown ``rows`` (``units.column_unit``); Min–Max shares one for both ends."""
    units = {key: column_unit(r[field] for r in rows) for key, field in _time_columns().items()}
    units["minmax"] = column_unit(r[f] for r in rows for f in ("min_ns", "max_ns"))
    return units


def row_cells(r: dict, rank: int, display: str, note: Annotation | None = None,
              units: dict[str, ColumnUnit] | None = None) -> dict[str, str]:
    """One leaderboard row as the screen and Markdown show it, keyed by ``COLUMNS``' keys; ``units``: the time
    columns' (``column_units`` of the shown rows; default: this row's own). Columns with a generic ``Stat.cell``
    are formatted from their declaration; the rest here."""
    from kbase.analysis.diagnosis import LABELS

    u = units or column_units([r])
    cells = {c.key: registry.cell_text(s, r[s.name], u.get(c.key)) for s, c in _table() if s.cell and s.name in r}
    cells |= {
        "rank": str(rank),
        "kernel": display,
        "cat": {"compute": "comp", "communication": "comm", "memory": "mem"}.get(r["category"], r["category"]),
        "tc": TC_SYMBOL[r["tc"]],
        "minmax": u["minmax"].range(r["min_ns"], r["max_ns"]),
        "amdahl": "∞" if not math.isfinite(r["amdahl_ceiling"]) else f"{r['amdahl_ceiling']:.3f}x",
        "flags": _flags(r),
        "diag": LABELS.get(note.diagnosis, "") if note is not None and note.diagnosis else "",
        "why": f"{note.tc_reason}; {note.diagnosis_reason}" if note is not None else "",
    }
    if "gpu" in r:
        cells["gpu"] = str(r["gpu"])
    cells["kernel_id"] = short_id(r["name"])
    return cells


def _rows(b: LeaderboardRows, shown: list[dict[str, Any]], full_names: bool,
          notes: list[Annotation]) -> list[dict[str, str]]:
    """The shown rows' cells; short names that collide anywhere in the leaderboard are told apart."""
    all_names = [r["name"] for r in b.rows]  # collisions count over every row; labels only for the shown
    names = display_names(all_names, [r["short_name"] for r in b.rows], full=full_names, first=len(shown))
    by_name = dict(zip(all_names, names))
    units = column_units(shown)
    return [row_cells(r, i, by_name.get(r["name"], r["short_name"]), n, units)
            for i, (r, n) in enumerate(zip(shown, notes), 1)]


def fix_lines(rows: Iterable[tuple[str, str]]) -> list[str]:
    """(tc, tc reason) of each shown row, by rank: one line per distinct reason of the ``⚠`` rows, naming them
    (``⚠ #1 #3: fp32 GEMM…; fix…``). The table, Markdown and the report's leaderboard print these."""
    by_reason: dict[str, list[str]] = {}
    for i, (tc, reason) in enumerate(rows, 1):
        if tc == "fallback":
            by_reason.setdefault(reason, []).append(f"#{i}")
    return [f"⚠ {' '.join(ranks)}: {reason}" for reason, ranks in by_reason.items()]


def _columns(per_gpu: bool) -> list[Column]:
    return [c for _, c in _table() if per_gpu or c.key != "gpu"]


def leaderboard_md(lb: AnyLeaderboard, limit: int | None = 20, full_names: bool = False) -> str:
    b = board_of(lb)
    shown, omitted = cut(b.rows, limit)
    cols = [c for c in _columns("gpu" in b.columns) if not c.wide_only]  # the reasons follow as a list
    out = ["### Kernel leaderboard", ""] + [f"- {md_text(line)}" for line in _summary_lines(b.summary) + b.notes]
    out.append("")
    out.append("| " + " | ".join(c.header for c in cols) + " |")
    out.append("|" + "---|" * len(cols))
    notes = row_notes(b, shown)
    for cells in _rows(b, shown, full_names, notes):
        out.append("| " + " | ".join(md_text(cells.get(c.key, "")) for c in cols) + " |")
    if omitted:
        out.append(f"\n_{omitted} more kernel(s) not shown (truncated; use --limit 0 for all)._")
    from kbase.analysis.diagnosis import LEGEND

    fixes = fix_lines((r["tc"], n.tc_reason) for r, n in zip(shown, notes))
    told = [f"#{i}: {n.diagnosis_reason}" for i, n in enumerate(notes, 1) if n.diagnosis]
    out += [""] + [f"- {md_text(line)}" for line in fixes + told + [LEGEND]]
    return "\n".join(out) + "\n"


def print_leaderboard(lb: AnyLeaderboard, console: Any, limit: int | None = 20, title: str = "Kernel leaderboard",
                      wide: bool = False, full_names: bool = False) -> None:
    """The summary lines and the table, fitted to the console's width (``wide``: every column)."""
    from kbase.render.layout import print_table

    b = board_of(lb)
    shown, omitted = cut(b.rows, limit)
    for line in _summary_lines(b.summary):
        console.print(line, highlight=False, markup=False)
    for note in b.notes:
        console.print(f"note: {note}", style="yellow", highlight=False, markup=False)
    notes = row_notes(b, shown)
    fitted = print_table(console, _columns("gpu" in b.columns), _rows(b, shown, full_names, notes), wide=wide,
                         title=title)
    if omitted:
        console.print(f"truncated: {omitted} more kernel(s) not shown (--limit 0 for all)", highlight=False)
    for line in fix_lines((r["tc"], n.tc_reason) for r, n in zip(shown, notes)):
        console.print(line, highlight=False, markup=False)
    console.print("TC: ✓ tensor cores  - not eligible  ⚠ matmul/conv without a tensor-core path", style="dim",
                  highlight=False, markup=False)
    if any(c.key == "diag" for c in fitted.columns):
        from kbase.analysis.diagnosis import LEGEND

        console.print(LEGEND, style="dim", highlight=False, markup=False)


"""The per-kernel columns of the leaderboard and of the diff, each declared once: its row field (the JSON and
CSV name), what it means (docs/json-schema.md's field lists are generated from it), its unit, where its value
comes from (``Kind``), the screen column that shows it and how that column formats it.

Everything that lists these columns reads them from here: ``kbase.analysis.summary.COLUMNS`` (the leaderboard's
rows, JSON and CSV), ``kbase.store.codec.kernel_blobs`` (which columns the kernel blobs keep and which derive on read),
``kbase.comparison.diff.ROW_COLUMNS``, ``kbase.render.diff.ROW_FIELDS`` and the screen tables
(``kbase.render.leaderboard.COLUMNS``, ``kbase.render.diff_table.COLUMNS``). A new statistic is one ``Stat`` in
``LEADERBOARD`` (or ``DIFF``) plus its computation: a ``compute`` here when it follows from other columns, else
in ``kbase.analysis.kernel_stats.group_stats`` (or ``compute_diff``'s rows). docs/architecture.md has the worked
example. Plain data: the store and the renderers import it without numpy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from kbase.units import ColumnUnit, fmt_ns, fmt_pct


@dataclass(frozen=True)
class Column:
    """A screen table's column (``kbase.render.layout`` fits and prints it); declared here, apart from rich, so
    a module can declare its columns without loading it (``kbase.render.columns`` re-exports it)."""

    key: str
    header: str
    priority: int = 0  # 0: never dropped; larger numbers drop first
    min_width: int = 3  # a shrinkable column is never cut below this
    want_width: int | None = None  # columns of larger priority numbers drop before this one is cut below this
    max_width: int | None = None  # the default view cuts longer cells here (with an ellipsis)
    justify: Literal["left", "right"] = "right"
    shrink: bool = False  # may be cut (with an ellipsis) to fit: names and sentences
    keep_tail: bool = False  # cut in the middle so the end survives (a name's "#a1b2c3" id)
    tiebreak: str | None = None  # a row key holding an id, appended where cutting makes two cells look alike
    wide_only: bool = False  # a long text (a reason): shown with --wide only, never squeezed into a narrow table


class Kind(Enum):
    """Where a column's value comes from, and so what the store keeps of it."""

    NAME = "name"  # a text of the kernel's name, kept once per name in the store (``kernel_name``), not in a blob
    STORED = "stored"  # kept in the kernel blobs (``blob``), exactly
    DERIVED = "derived"  # computed on read from stored columns (kept, whole, only where it does not so derive)
    ROW = "row"  # a diff row's field, computed by ``compute_diff`` (a diff is never stored)
    RENDERED = "rendered"  # added by the renderer (a sentence, a price): in JSON and CSV, never in the rows
    DISPLAY = "display"  # a screen column only, made from other fields (rank, the name shown, min–max)


# How a screen column formats its field, where that is generic (``""``: the renderer's own cell, by key):
# "time": ns in one unit over the shown rows (``units.column_unit``); "pct": ``units.fmt_pct``; "count": 1,234.
Cell = Literal["", "time", "pct", "count"]


@dataclass(frozen=True)
class Stat:
    """One per-kernel column. ``name``: the row key, also the JSON and CSV field; ``description``: what docs say
    (empty: the name says it); ``unit``: ``ns``, ``fraction``, ``launches``, ``x`` (a factor), ``flag`` (read as
    bool) or ``""`` (text); ``json``: written to JSON and CSV (False: kept in the rows only); ``blob``: which
    kernel blob keeps a ``STORED`` or ``DERIVED`` leaderboard column (``levels``: what history reads, else ``board``);
    ``integer``: stored and read as int64; ``compute``: the column from the others (numpy arrays by name),
    where it follows from them: ``build_leaderboard`` and the store's read both call it; ``column``: the screen
    column showing it, ``place`` its position there (tables sort by it), ``cell`` how it formats the value."""

    name: str
    description: str = ""
    unit: str = ""
    kind: Kind = Kind.STORED
    json: bool = True
    blob: Literal["", "levels", "board"] = ""
    integer: bool = False
    compute: Callable[[Mapping[str, Any]], Any] | None = None
    column: Column | None = None
    place: int = 0
    cell: Cell = ""


def _col(key: str, header: str, priority: int, **layout: Any) -> Column:
    return Column(key, header, priority, **layout)


# The leaderboard: row (JSON, CSV) order. A per-GPU view has "gpu" first (``GPU``).
LEADERBOARD: tuple[Stat, ...] = (
    Stat("rank", kind=Kind.DISPLAY, json=False, column=_col("rank", "#", 0), place=10),
    Stat("kernel", kind=Kind.DISPLAY, json=False, place=30,
         column=_col("kernel", "Kernel", 0, min_width=28, want_width=32, max_width=90, justify="left", shrink=True,
                     keep_tail=True, tiebreak="kernel_id")),
    Stat("name", "full demangled name", kind=Kind.NAME),
    Stat("short_name", kind=Kind.NAME),
    Stat("family", "template and argument lists stripped", kind=Kind.NAME),
    Stat("category", "`compute` / `communication` / `memory`", kind=Kind.NAME,
         column=_col("cat", "Cat", 7, justify="left"), place=140),
    Stat("tc", "`tc` uses tensor cores, `na` not eligible, `fallback` eligible but fell back", kind=Kind.NAME,
         column=_col("tc", "TC", 0, justify="left"), place=40),
    Stat("gpus", unit="GPUs", blob="board", integer=True),
    Stat("count", unit="launches", blob="levels", integer=True, column=_col("count", "Count", 0), place=50,
         cell="count"),
    Stat("total_ns", unit="ns", blob="levels", integer=True, column=_col("total", "Total", 0), place=60, cell="time"),
    Stat("avg_ns", unit="ns", kind=Kind.DERIVED, blob="levels", column=_col("avg", "Avg", 0), place=70, cell="time"),
    Stat("median_ns", unit="ns", blob="board", column=_col("med", "Med", 8), place=150, cell="time"),
    Stat("min_ns", unit="ns", blob="board", integer=True),
    Stat("max_ns", unit="ns", blob="board", integer=True),
    Stat("minmax", kind=Kind.DISPLAY, json=False, column=_col("minmax", "Min–Max", 1), place=80),
    Stat("std_ns", unit="ns", blob="board", column=_col("std", "Std", 9), place=160, cell="time"),
    Stat("per_iter_ns", unit="ns", kind=Kind.DERIVED, blob="levels", column=_col("per_iter", "/iter/GPU", 5),
         place=120, cell="time"),
    Stat("count_per_iter", unit="launches", kind=Kind.DERIVED, blob="board"),
    Stat("share_window", "of window length × GPUs", unit="fraction", kind=Kind.DERIVED, blob="levels",
         column=_col("share_window", "%window", 4), place=110, cell="pct"),
    Stat("share_kernel", "of total kernel time", unit="fraction", kind=Kind.DERIVED, blob="board",
         column=_col("share_kernel", "%kernel", 2), place=90, cell="pct"),
    Stat("amdahl_ceiling", "1 / (1 − share)", unit="x", kind=Kind.DERIVED, blob="board",
         column=_col("amdahl", "Amdahl max", 6), place=130),
    Stat("fragmented", "≥ 500 launches per iteration at < 10 µs each", unit="flag", blob="board"),
    Stat("diag", kind=Kind.DISPLAY, json=False, column=_col("diag", "Diagnosis", 3, justify="left"), place=100),
    Stat("flags", kind=Kind.DISPLAY, json=False, place=170,
         column=_col("flags", "Flags", 10, min_width=10, justify="left", shrink=True)),
    Stat("why", kind=Kind.DISPLAY, json=False, column=_col("why", "Why (TC; diagnosis)", 11, justify="left",
                                                           wide_only=True), place=180),
)
# the per-GPU view's first field, and its table column
GPU = Stat("gpu", "the GPU, in a per-GPU view", kind=Kind.DISPLAY, integer=True,
           column=_col("gpu", "GPU", 0, justify="left"), place=20)


# The diff's kernel rows: ``compute_diff``'s order; JSON and CSV write those with ``json``, then the rendered ones.
# Its screen table by ``place``: priority 0 never drops (what changed, which kernel, by how much per iteration);
# larger numbers drop first as the terminal narrows. The name is never cut under 30 characters while the terminal
# has room for it.
DIFF: tuple[Stat, ...] = (
    Stat("class", "the kernel's class: `regressed`, `regressed_below_floor`, `improved`, `new`, `gone`, `swapped`, "
         "`unchanged`, `within_noise`, `cannot_judge`", kind=Kind.ROW, column=_col("class", "class", 0,
                                                                                   justify="left"), place=10),
    Stat("swap", "part of an algorithm swap: not gated per kernel", kind=Kind.ROW),
    Stat("kernel", kind=Kind.DISPLAY, json=False, place=20,
         column=_col("kernel", "kernel", 0, min_width=30, want_width=40, max_width=80, justify="left", shrink=True,
                     keep_tail=True, tiebreak="kernel_id")),
    Stat("name", "full demangled name, the after side's", kind=Kind.ROW),
    Stat("name_before", "the before side's name: another where matched by family; null when new", kind=Kind.ROW),
    Stat("match", "how the pair was matched: `name`, `family`, `new`, `gone`", kind=Kind.ROW),
    Stat("short_name", kind=Kind.ROW),
    Stat("family", kind=Kind.ROW, json=False),
    Stat("category", kind=Kind.ROW),
    Stat("tc", kind=Kind.DISPLAY, json=False, column=_col("tc", "TC", 9, justify="left"), place=30),
    Stat("tc_before", kind=Kind.ROW),
    Stat("tc_after", kind=Kind.ROW),
    Stat("before", "time per unit per GPU before; 0: not there", unit="ns", kind=Kind.ROW,
         column=_col("before", "before/iter", 2), place=40),
    Stat("after", "time per unit per GPU after; 0: not there", unit="ns", kind=Kind.ROW,
         column=_col("after", "after/iter", 2), place=50),
    Stat("delta_ns", unit="ns", kind=Kind.ROW, column=_col("delta", "Δ/iter", 0), place=60),
    Stat("delta_pct", "null with no time before", unit="%", kind=Kind.ROW, column=_col("delta_pct", "Δ%", 0),
         place=70),
    Stat("launches", kind=Kind.DISPLAY, json=False, column=_col("launches", "launches/iter", 5), place=80),
    Stat("count_before", "launches per unit per GPU", unit="launches", kind=Kind.ROW),
    Stat("count_after", unit="launches", kind=Kind.ROW),
    Stat("delta_count", unit="launches", kind=Kind.ROW),
    Stat("avg_before", "mean launch", unit="ns", kind=Kind.ROW),
    Stat("avg_after", unit="ns", kind=Kind.ROW),
    Stat("delta_avg_pct", unit="%", kind=Kind.ROW, column=_col("delta_avg", "Δavg/launch", 4), place=90),
    Stat("share", kind=Kind.DISPLAY, json=False, column=_col("share", "share", 6), place=100),
    Stat("share_before", "of its side's unit time", unit="fraction", kind=Kind.ROW),
    Stat("share_after", unit="fraction", kind=Kind.ROW),
    Stat("effect", "Δ / the before side's unit time", unit="fraction", kind=Kind.ROW,
         column=_col("effect", "effect", 1), place=110),
    Stat("p_value", kind=Kind.ROW, column=_col("p", "p", 3), place=130),
    Stat("test", kind=Kind.ROW),
    Stat("enough", kind=Kind.ROW, json=False),
    Stat("confidence", "`ok`, or `low`: too few samples", kind=Kind.ROW),
    Stat("ignored", "matched by `ignore`", kind=Kind.ROW),
    Stat("gated", "whether the row can fail the gate", kind=Kind.ROW),
    Stat("rel", kind=Kind.ROW),
    Stat("z", kind=Kind.ROW),
    Stat("noise_source", kind=Kind.ROW, column=_col("noise", "noise", 3, justify="left"), place=150),
    Stat("noise_rel", kind=Kind.ROW),
    # MDE: beside each flagged kernel on the first screen at 120 columns
    Stat("mde_rel", "the smallest change the test detects; null: nothing measured", unit="fraction",
         kind=Kind.ROW, column=_col("mde", "MDE", 1), place=140),
    Stat("mde_ns", unit="ns", kind=Kind.ROW),
    Stat("run_noise_source", "`history`, `repeat`, `assumed`", kind=Kind.ROW),
    Stat("run_noise_rel", "sd per capture", unit="fraction", kind=Kind.ROW),
    Stat("op", "the op holding most of the kernel's time; null without op information", kind=Kind.ROW),
    Stat("own_class", kind=Kind.ROW, json=False),
    Stat("diagnosis", "a sentence: what changed", kind=Kind.RENDERED, place=160,
         column=_col("diagnosis", "diagnosis", 7, min_width=20, max_width=60, justify="left", shrink=True)),
    Stat("amdahl", "a sentence: what the change bounds", kind=Kind.RENDERED, place=170,
         column=_col("amdahl", "Amdahl", 8, min_width=20, max_width=60, justify="left", shrink=True)),
    Stat("cost_per_month", "its `effect` priced, only when the fleet is priced; negative: a saving",
         kind=Kind.RENDERED, column=_col("cost", "cost/month", 2), place=120),
)


# ------------------------------------------------------------------------------------------ what reads them


def row_fields() -> list[str]:
    """The leaderboard row's fields, in order (``summary.COLUMNS``)."""
    return [s.name for s in LEADERBOARD if s.kind in (Kind.NAME, Kind.STORED, Kind.DERIVED)]


def computed(stats: tuple[Stat, ...] | None = None) -> list[tuple[str, Callable[[Mapping[str, Any]], Any]]]:
    """(name, compute) of the columns computed from the others (``Stat.compute``), in order: the leaderboard's
    (``stats`` None) or ``DIFF``'s."""
    return [(s.name, s.compute) for s in (LEADERBOARD if stats is None else stats) if s.compute is not None]


def stored(blob: str) -> list[Stat]:
    """The leaderboard columns a kernel blob holds (stored, or derived on read and kept where they do not
    derive), in row order."""
    return [s for s in LEADERBOARD if s.blob == blob and s.kind in (Kind.STORED, Kind.DERIVED)]


def table(stats: tuple[Stat, ...]) -> list[tuple[Stat, Column]]:
    """A screen table's columns with their stats, by place: ``table((GPU, *LEADERBOARD))``, ``table(DIFF)``."""
    return [(s, s.column) for s in sorted(stats, key=lambda s: s.place) if s.column is not None]


def diff_row_columns() -> list[str]:
    """The diff's row columns (``comparison.diff.ROW_COLUMNS``), in order."""
    return [s.name for s in DIFF if s.kind == Kind.ROW]


def diff_json_fields() -> list[str]:
    """The fields of a diff's kernel row in JSON and CSV (``render.diff.ROW_FIELDS``): the rows' own, then the
    rendered ones (``cost_per_month`` only when the fleet is priced)."""
    return [s.name for s in DIFF if s.json and s.name != "cost_per_month"]


def field_list(stats: tuple[Stat, ...], width: int = 110) -> str:
    """docs/json-schema.md's list of a row's JSON fields, each with what it means: ``name`` (description), ...,
    wrapped at ``width`` (``tests/test_columns.py`` keeps the page equal to it)."""
    import textwrap

    text = ", ".join(f"`{s.name}`" + (f" ({s.description})" if s.description else "")
                     for s in stats if s.json and s.kind != Kind.DISPLAY)
    return "\n".join(textwrap.wrap(f"Kernel row fields: {text}.", width, break_on_hyphens=False))


def field_names(stats: tuple[Stat, ...], lead: str, width: int = 110) -> str:
    """The names alone, in a schema sketch's braces (``cost_per_month?``: only when the fleet is priced)."""
    import textwrap

    names = ", ".join(s.name + ("?" if s.name == "cost_per_month" else "")
                      for s in stats if s.json and s.kind != Kind.DISPLAY)
    return "\n".join(textwrap.wrap(names, width, initial_indent=lead, subsequent_indent=" " * len(lead),
                                    break_on_hyphens=False))


def cell_text(stat: Stat, value: Any, unit: ColumnUnit | None) -> str:
    """A screen cell where its ``Stat.cell`` says how (``unit``: the column's time unit over the shown rows; None:
    the value's own). Cells without one are each table's own (``render.leaderboard.row_cells``)."""
    if stat.cell == "time":
        return unit(value) if unit is not None else fmt_ns(value)
    if stat.cell == "pct":
        return fmt_pct(value)
    if stat.cell == "count":
        return f"{value:,}"
    raise ValueError(f"column {stat.name}: no generic cell {stat.cell!r}")

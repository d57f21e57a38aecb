"""Tables that fit the terminal: a column spec with priorities, and a layout that degrades by them.

Every screen table (the ``top``/``show`` leaderboard, the ``diff``/``gate`` table) is a list of
``Column`` specs and rows of plain strings keyed by column. ``fit`` chooses the columns and widths for
a terminal width: columns with priority 0 always stay (the kernel name and the numbers answering "what
grew"); the others drop, highest priority number first, until the rest fits; the shrinkable columns
(names, sentences) are then cut to the space left, always with an ellipsis. No cell ever wraps, so a
row is one line. ``wide=True`` keeps every column at its natural width (the caller widens the console);
a ``wide_only`` column (a sentence such as a reason) shows only then.

Another column (e.g. a noise figure) slots in by adding a ``Column`` with a priority and a key in the rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len, set_cell_size
from rich.text import Text

from kbase.render.columns import Column  # re-exported: the spec lives apart from rich
from kbase.render.safe import inert

if TYPE_CHECKING:
    from rich.table import Table

ELLIPSIS = "…"


@dataclass
class Fitted:
    columns: list[Column]
    widths: dict[str, int]
    dropped: list[Column] = field(default_factory=list)
    width: int = 0  # the table's width on screen

    def note(self, width: int = 10_000) -> str | None:
        """One line (cut to ``width``) saying what was left out, or None."""
        if not self.dropped:
            return None
        names = ", ".join(c.header for c in self.dropped)
        return ellipsize(f"hidden at this width (--wide shows them): {names}", width)


def table_overhead(n_columns: int) -> int:
    """Screen columns a table uses besides its cells (``make_table``: three between columns, none at the edges)."""
    return max(n_columns - 1, 0) * 3


def ellipsize(text: str, width: int, keep_tail: bool = False) -> str:
    """``text`` cut to ``width`` screen cells with an ellipsis; ``keep_tail`` keeps a trailing
    ``#id`` (or, failing that, the end) and cuts the middle."""
    if width <= 0:
        return ""
    if cell_len(text) <= width:
        return text
    if width == 1:
        return ELLIPSIS
    if keep_tail:
        head, sep, tail = text.rpartition(" #")
        suffix = sep + tail if sep and cell_len(sep + tail) + 2 <= width else ""
        if not suffix:
            half = (width - 1) // 2
            return set_cell_size(text, width - 1 - half) + ELLIPSIS + _tail(text, half)
        return set_cell_size(head, width - 1 - cell_len(suffix)) + ELLIPSIS + suffix
    return set_cell_size(text, width - 1) + ELLIPSIS


def _tail(text: str, width: int) -> str:
    out = ""
    for ch in reversed(text):
        if cell_len(ch + out) > width:
            break
        out = ch + out
    return out


def _natural(col: Column, rows: Sequence[Mapping[str, str]], wide: bool) -> int:
    w = max([cell_len(col.header)] + [cell_len(inert(r.get(col.key, ""))) for r in rows])
    if col.max_width is not None and not wide:
        w = min(w, max(col.max_width, cell_len(col.header)))
    return w


def fit(columns: Sequence[Column], rows: Sequence[Mapping[str, str]], width: int, wide: bool = False) -> Fitted:
    """The columns kept and their widths for a terminal ``width`` (``wide``: all, uncut)."""
    natural = {c.key: _natural(c, rows, wide) for c in columns}
    if wide:
        kept = list(columns)
        return Fitted(kept, natural, [], sum(natural.values()) + table_overhead(len(kept)))
    fitting = [c for c in columns if not c.wide_only]  # a wide-only column (a reason) is never squeezed in

    def least(c: Column) -> int:
        return min(natural[c.key], max(c.min_width, cell_len(c.header) if not c.shrink else 1)) if c.shrink \
            else natural[c.key]

    def wanted(c: Column) -> int:
        return max(least(c), min(natural[c.key], c.want_width or 0))

    kept = list(fitting)
    dropped: list[Column] = [c for c in columns if c.wide_only]
    # drop by priority (highest number first; among equals, the rightmost) until the wanted widths fit
    order = sorted((c for c in fitting if c.priority > 0), key=lambda c: (-c.priority, -fitting.index(c)))
    for c in order:
        if sum(wanted(k) for k in kept) + table_overhead(len(kept)) <= width:
            break
        if max((k.priority for k in kept if k.want_width and wanted(k) > least(k)), default=0) > c.priority and \
                sum(least(k) for k in kept) + table_overhead(len(kept)) <= width:
            break  # only columns more important than this one want more room: cut those instead
        kept.remove(c)
        dropped.append(c)
    widths = {c.key: least(c) for c in kept}
    room = width - table_overhead(len(kept)) - sum(widths.values())
    for c in reversed(kept):  # a terminal too narrow even so: cut shrinkable columns below their minimum
        if c.shrink and room < 0:
            cut = min(-room, widths[c.key] - min(widths[c.key], 8))
            widths[c.key] -= cut
            room += cut
    for c in kept:  # shrinkable columns grow back, left to right (the kernel name first)
        if c.shrink and room > 0:
            extra = min(room, natural[c.key] - widths[c.key])
            widths[c.key] += extra
            room -= extra
    dropped.sort(key=lambda c: list(columns).index(c))
    return Fitted(kept, widths, dropped, sum(widths.values()) + table_overhead(len(kept)))


def make_table(fitted: Fitted, rows: Sequence[Mapping[str, str]], *, title: str | None = None,
               row_styles: Sequence[str | None] | None = None) -> Table:
    """A rich table of the fitted columns; every cell is inert ``Text`` (no markup), cut to its width."""
    from rich import box
    from rich.table import Table  # only where ``table_text`` cannot lay the table out (``_plain_layout``)

    t = Table(title=Text(inert(title)) if title is not None else None, box=box.SIMPLE_HEAD, show_edge=False,
              pad_edge=False, padding=(0, 1), header_style="bold", title_justify="left", expand=False)
    for c in fitted.columns:
        w = fitted.widths[c.key]
        t.add_column(Text(ellipsize(c.header, w)), justify=c.justify, no_wrap=True, overflow="ellipsis",
                     min_width=w, max_width=w, width=w)
    texts = {c.key: cut_cells(c, rows, fitted.widths[c.key]) for c in fitted.columns}
    for i in range(len(rows)):
        style = row_styles[i] if row_styles else None
        t.add_row(*[Text(texts[c.key][i]) for c in fitted.columns], style=style or "")
    return t


def cut_cells(col: Column, rows: Sequence[Mapping[str, str]], width: int) -> list[str]:
    """The column's cells cut to ``width``; where two different cells come out alike, those get the
    row's ``tiebreak`` id at the end (kept visible) so that the rows stay distinguishable."""
    full = [inert(r.get(col.key, "")) for r in rows]
    out = [ellipsize(v, width, col.keep_tail) for v in full]
    if col.tiebreak is None:
        return out
    seen: dict[str, set[str]] = {}
    for v, o in zip(full, out):
        seen.setdefault(o, set()).add(v)
    for i, (v, o) in enumerate(zip(full, out)):
        tag = inert(rows[i].get(col.tiebreak, ""))
        if len(seen[o]) > 1 and tag and not v.endswith(tag):
            out[i] = ellipsize(f"{v} {tag}", width, keep_tail=True)
    return out


def table_text(fitted: Fitted, rows: Sequence[Mapping[str, str]], *, title: str | None = None,
               row_styles: Sequence[str | None] | None = None) -> Text:
    """``make_table``'s lines, laid out directly: every width is fixed and every cell already cut, so the
    table is plain padding (rich's table layout took ~45 ms of a ~0.2 s ``kbase top``). The same
    characters as rich prints; on a terminal the same styles (header bold, a row's style over its cells
    and padding, none on the separators)."""
    cols = fitted.columns
    widths = [fitted.widths[c.key] for c in cols]
    last = len(cols) - 1

    def add_line(out: Text, cells: list[str], style: str) -> None:
        for i, (c, w, v) in enumerate(zip(cols, widths, cells)):
            if i:
                out.append(" ")  # the box's (blank) column separator: never styled
            if c.justify != "left":
                v = v.rstrip()  # rich strips a right-justified cell's trailing whitespace
            pad = " " * (w - cell_len(v))
            body = (v + pad) if c.justify == "left" else (pad + v)
            out.append((" " if i else "") + body + (" " if i < last else ""), style=style or None)

    out = Text()
    if title is not None:
        head = inert(title)
        out.append(head + " " * (fitted.width - cell_len(head)) + "\n")
    add_line(out, [ellipsize(c.header, w) for c, w in zip(cols, widths)], "bold")
    out.append("\n" + "─" * fitted.width)
    texts = [cut_cells(c, rows, w) for c, w in zip(cols, widths)]
    for i in range(len(rows)):
        out.append("\n")
        add_line(out, [t[i] for t in texts], (row_styles[i] if row_styles else None) or "")
    return out


def _plain_layout(fitted: Fitted, title: str | None, width: int) -> bool:
    """Whether ``table_text`` lays the table out as rich would: it fits the console, the title fits the
    table on one line (rich would wrap it), and there is a column."""
    return bool(fitted.columns) and fitted.width <= width and (
        title is None or ("\n" not in title and cell_len(inert(title)) <= fitted.width))


def print_table(console: Any, columns: Sequence[Column], rows: Sequence[Mapping[str, str]], *, wide: bool = False,
                title: str | None = None, row_styles: Sequence[str | None] | None = None) -> Fitted:
    """Fit, print, and print the note of what was dropped (one line)."""
    fitted = fit(columns, rows, console.width, wide)
    if _plain_layout(fitted, title, max(console.width, fitted.width) if wide else console.width):
        console.print(table_text(fitted, rows, title=title, row_styles=row_styles), soft_wrap=True)
    else:  # a console narrower than even the fitted table (rich then squeezes every column), a long title
        _print_rich(console, fitted, make_table(fitted, rows, title=title, row_styles=row_styles), wide)
    note = fitted.note(console.width)
    if note:
        console.print(note, style="dim", highlight=False, markup=False)
    return fitted


def _print_rich(console: Any, fitted: Fitted, table: Table, wide: bool) -> None:
    if wide and fitted.width > console.width:  # asked for: rows longer than the terminal (e.g. for `less -S`)
        old = console.width
        console.width = fitted.width
        try:
            console.print(table, crop=False)
        finally:
            console.width = old
    else:
        console.print(table)

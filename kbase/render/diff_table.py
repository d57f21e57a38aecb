"""The diff's kernel table as the screen and Markdown show it (``render.diff`` prints it).

One row per shown kernel: its class by its word (``KernelClass.label``: ``swapped``, never ``regressed`` for a
kernel an algorithm swap covers), its name, and before, after and Δ in one unit (``units.group_units``: at most
four digits before the point, no ``+3941.0 µs`` beside milliseconds); a side where the kernel does not exist is
``units.ABSENT``, never a zero, and Δ% of a kernel with no before is ``new``, never ``inf``. At 80 columns the
class, the name (at least 30 characters), Δ and Δ% stay; the other columns drop by priority (``render.layout``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from kbase.analysis import columns as registry
from kbase.analysis.columns import Stat
from kbase.analysis.names import display_names, short_id
from kbase.comparison.result import row_delta_pct, row_sides
from kbase.comparison.side import unit_of
from kbase.enums import TC_SYMBOL, KernelClass
from kbase.render.columns import Column
from kbase.units import ABSENT, ColumnUnit, fmt_delta_pct, fmt_money, fmt_p, group_units

SHOWN_BY_DEFAULT = (KernelClass.REGRESSED, KernelClass.REGRESSED_BELOW_FLOOR, KernelClass.IMPROVED, KernelClass.NEW,
                    KernelClass.GONE, KernelClass.SWAPPED, KernelClass.CANNOT_JUDGE)
# the words a table's legend defines when its rows use them (the others say what they mean)
EXPLAINED = (KernelClass.SWAPPED, KernelClass.REGRESSED_BELOW_FLOOR, KernelClass.CANNOT_JUDGE)


def _share(x: Any) -> str:
    return ABSENT if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.1%}"


def _mde(r: dict[str, Any]) -> str:
    """The smallest change this kernel's test detects (80% power), between-process noise included."""
    m = r.get("mde_rel")
    if not isinstance(m, (int, float)) or isinstance(m, bool) or not math.isfinite(m):
        return ABSENT
    return f"{m:.1%}"


def _noise(r: dict[str, Any]) -> str:
    """The noise source behind the test, and where its between-process part came from when not the same."""
    src, run = r.get("noise_source"), r.get("run_noise_source")
    if not src:
        return ABSENT
    return src if not run or run == src else f"{src}+{run}"


def _generic(stat: Stat, value: Any, times: ColumnUnit) -> str:
    """A declared column's cell where its ``Stat.cell`` says how (times in the table's unit)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ABSENT
    return times(value) if stat.cell == "time" else registry.cell_text(stat, value, None)


def class_text(r: dict[str, Any]) -> str:
    """The class column's cell: the class's word, and whether the test had too few samples or the row is ignored."""
    label = KernelClass(r["class"]).label
    return (label + (" (low conf.)" if r["confidence"] == "low" and r["class"] == KernelClass.WITHIN_NOISE else "")
            + (" [ignored]" if r["ignored"] else ""))


def legend(rows: list[dict[str, Any]]) -> list[str]:
    """What the less obvious class words of ``rows`` mean, one line each (``KernelClass.meaning``)."""
    used = {r["class"] for r in rows}
    return [f"{c.label}: {c.meaning}" for c in EXPLAINED if c.value in used]


def table_cells(rows: list[dict[str, Any]], display: dict[str, str], doc: dict[str, Any]) -> list[dict[str, str]]:
    """The shown diff rows keyed by ``COLUMNS``' keys: before, after and Δ in one unit over the shown rows."""
    times, delta = group_units((v for r in rows for v in row_sides(r)), (r["delta_ns"] for r in rows))
    currency = doc["cost"]["currency"] if "cost" in doc else "$"
    return [row_cells(r, display[r["name"]], times, delta, currency) for r in rows]


def row_cells(r: dict[str, Any], display: str, times: ColumnUnit, delta: ColumnUnit,
              currency: str = "$") -> dict[str, str]:
    """One diff row, its times in the table's units (``table_cells``), keyed by ``COLUMNS``' keys."""
    tc = TC_SYMBOL.get(r["tc_after"] or r["tc_before"] or "na", "-")
    before, after = row_sides(r)
    effect = r["effect"]
    generic = {c.key: _generic(s, r.get(s.name), times) for s, c in _table() if s.cell}
    return generic | {
        "class": class_text(r),
        "kernel": display + (" [family]" if r["match"] == "family" else ""),
        "kernel_id": short_id(r["name"]),
        "tc": tc, "before": times(before), "after": times(after),
        "delta": delta(r["delta_ns"]),
        "cost": fmt_money(r.get("cost_per_month"), currency) if r["class"] in SHOWN_BY_DEFAULT else "",
        "delta_pct": row_delta_pct(r),
        "launches": f"{r['count_before']:.1f}->{r['count_after']:.1f}",
        "delta_avg": fmt_delta_pct(r["delta_avg_pct"]),
        "share": f"{_share(r['share_before'])}->{_share(r['share_after'])}",
        "effect": f"{effect:+.2%}" if isinstance(effect, (int, float)) and math.isfinite(effect) else ABSENT,
        "p": fmt_p(r["p_value"]),
        "diagnosis": r["diagnosis"],
        "mde": _mde(r),
        "noise": _noise(r),
        "amdahl": r["amdahl"] if r["class"] in SHOWN_BY_DEFAULT else "",
    }


def _table() -> list[tuple[Stat, Column]]:
    """The screen table, declared in ``analysis.columns.DIFF`` (read on each call): priority 0 never drops (what
    changed, which kernel, by how much per iteration); larger numbers drop first as the terminal narrows."""
    return registry.table(registry.DIFF)


COLUMNS = [c for _, c in _table()]


def columns_of(doc: dict[str, Any]) -> list[Column]:
    """``COLUMNS``, the cost column only when the settings price the fleet (``gpu_hour_cost`` and ``gpus``),
    headers in the comparison's unit."""
    short = unit_of(doc.get("unit")).short
    return [replace(c, header=c.header.replace("/iter", short)) for _, c in _table()
            if c.key != "cost" or "cost" in doc]


def diff_title(doc: dict[str, Any]) -> str:
    unit = unit_of(doc.get("unit"))
    return f"Kernel diff ({unit.per} per GPU; sorted by effect on {unit.value} time)"


def display(doc: dict[str, Any], full_names: bool) -> dict[str, str]:
    """Each kernel's name as shown: short, told apart where short names collide in this diff."""
    kernels = doc["kernels"]
    names = [k["name"] for k in kernels]
    return dict(zip(names, display_names(names, [k["short_name"] for k in kernels], full=full_names)))


def visible(doc: dict[str, Any], show_all: bool) -> tuple[list[dict[str, Any]], int]:
    """The rows a table shows (``show_all``: every one) and how many it leaves out."""
    rows = doc["kernels"]
    if show_all:
        return rows, 0
    shown = [r for r in rows if r["class"] in SHOWN_BY_DEFAULT or (r["confidence"] == "low"
                                                                 and r["class"] == KernelClass.WITHIN_NOISE
                                                                 and isinstance(r["delta_pct"], (int, float))
                                                                 and r["delta_pct"] >= 5)]
    return shown, len(rows) - len(shown)


def nothing_changed(hidden: int) -> str:
    """The line in place of an empty table."""
    if not hidden:
        return "no kernels to compare"
    return (f"no kernel changed beyond its noise: {hidden} unchanged / within-noise kernel(s) "
            "(--all lists them)")


def hidden_line(hidden: int) -> str:
    return f"{hidden} unchanged / within-noise kernel(s) not shown (--all shows them)"

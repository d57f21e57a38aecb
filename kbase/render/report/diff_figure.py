"""The report's diff page figure: the waterfall from the before side's kernel time per iteration to the after
side's, one bar per changed kernel (the largest |Δ| first) and one for every other kernel together, as plain
Plotly dicts (``report.figures`` holds the shared fonts, colours and layout)."""

from __future__ import annotations

import math

from kbase.display import clip_balanced
from kbase.render.report.figures import CLASS_COLOR, base_layout, time_unit
from kbase.render.report.labels import NARROW_NAME, distinct_labels
from kbase.render.report.safe import plot_text


def _num(x) -> float:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else 0.0


def waterfall_rows(doc: dict, limit: int = 25) -> tuple[list[dict], float]:
    """The kernels drawn as steps of the waterfall (changed ones by |Δ|, at most ``limit``) and the
    Δ of all the others together, so the bars add up from the before total to the after total."""
    from kbase.render.diff_table import SHOWN_BY_DEFAULT  # the rows kbase diff shows: swapped ones too

    changed = [r for r in doc["kernels"] if r["class"] in SHOWN_BY_DEFAULT]
    changed.sort(key=lambda r: -abs(_num(r["delta_ns"])))
    shown = changed[:limit]
    t = doc["totals"]["kernel"]
    rest = _num(t["after"]) - _num(t["before"]) - sum(_num(r["delta_ns"]) for r in shown)
    return shown, rest


def _word(cls: str) -> str:
    """A class as every output words it (``KernelClass.label``)."""
    from kbase.enums import KernelClass

    return KernelClass(cls).label


def diff_figure(doc: dict, limit: int = 25) -> dict:
    """Waterfall of the kernel time per unit (the diff's) per GPU from before to after, one bar per changed
    kernel (coloured by class), the rest as one bar."""
    from kbase.comparison.side import unit_of

    u = unit_of(doc.get("unit"))
    rows, rest = waterfall_rows(doc, limit)
    t = doc["totals"]["kernel"]
    before, after = _num(t["before"]), _num(t["after"])
    label, div = time_unit(max(before, after))
    wall = _num(doc["totals"].get("iteration_wall", {}).get("before"))
    ys: list[str] = []
    xs: list[float] = []
    bases: list[float] = []
    colors: list[str] = []
    texts: list[str] = []
    hovers: list[str] = []
    raw: list[str] = []  # the labels before escaping: a narrow axis cuts these, then escapes
    ys.append("before: all kernels")
    xs.append(before / div)
    bases.append(0)
    colors.append(CLASS_COLOR["total"])
    texts.append(f"{before / div:.3f} {label}")
    hovers.append(f"kernel time {u.per} per GPU, before: {before / div:.3f} {label}")
    running = before
    labels = distinct_labels([(r["name"], r["short_name"]) for r in rows], limit=48)
    for i, r in enumerate(rows, 1):
        d = _num(r["delta_ns"])
        cls = "swap" if r.get("swap") else r["class"]
        ys.append(f"{i}. {plot_text(labels[r['name']])}")
        raw.append(f"{i}. {labels[r['name']]}")
        xs.append(d / div)
        bases.append(running / div)
        running += d
        colors.append(CLASS_COLOR.get(cls, "#999"))
        eff = f"{_num(r['effect']):+.2%}" if r["effect"] is not None else "-"
        texts.append(f"{d / div:+.3f} {label} ({eff})")
        hovers.append("<br>".join([
            f"<b>{_word(r['class'])}</b>: {plot_text(r['name'], 100)}",
            f"Δ {u.per} {d / div:+.3f} {label}" + (f" ({_num(r['delta_pct']):+.1f}%)"
                                                         if isinstance(r["delta_pct"], (int, float)) else ""),
            f"effect on {u.whole} {eff}",
            f"launches{u.short} {_num(r['count_before']):.1f} → {_num(r['count_after']):.1f}",
            plot_text(r.get("diagnosis") or ""), plot_text(r.get("amdahl") or "")]))
    if abs(rest) > 0 or not rows:
        ys.append(f"other kernels ({len(doc['kernels']) - len(rows)})")
        xs.append(rest / div)
        bases.append(running / div)
        running += rest
        colors.append(CLASS_COLOR["other"])
        texts.append(f"{rest / div:+.3f} {label}")
        hovers.append("unchanged, within-noise and smaller changes together")
    ys.append("after: all kernels")
    xs.append(after / div)
    bases.append(0)
    colors.append(CLASS_COLOR["total"])
    texts.append(f"{after / div:.3f} {label}")
    hovers.append(f"kernel time {u.per} per GPU, after: {after / div:.3f} {label}")
    lo, hi = waterfall_range([b + x for b, x in zip(bases[1:-1], xs[1:-1])] + bases[1:-1],
                             before / div, after / div, (wall or before) / div)
    trace = {"type": "bar", "orientation": "h", "y": ys, "x": xs, "base": bases, "marker": {"color": colors},
             "text": texts, "textposition": "outside", "cliponaxis": False, "hovertext": hovers,
             "hovertemplate": "%{hovertext}<extra></extra>", "name": f"Δ {u.per}"}
    layout = base_layout(max(340, 34 * len(ys) + 130))
    layout.update({
        "hovermode": "closest", "showlegend": False, "bargap": 0.25,
        "yaxis": {"autorange": "reversed", "automargin": True, "tickfont": {"size": 11}},
        "xaxis": {"title": {"text": f"kernel time {u.per} per GPU ({label}); axis starts at "
                                    f"{lo:.2f}, not 0"}, "range": [lo, hi], "gridcolor": "#eee"},
        "margin": {"l": 20, "r": 40, "t": 30, "b": 60}})
    notes = []
    if wall:
        notes.append({"xref": "paper", "yref": "paper", "x": 1, "y": 1.02, "showarrow": False, "xanchor": "right",
                      "yanchor": "bottom", "text": f"{u.value} (GPU wall) before: {wall / div:.3f} {label}"})
    if not rows:  # nothing changed beyond noise: say so, on an axis of the iteration's scale (not zoomed to noise)
        notes.append({"xref": "paper", "yref": "paper", "x": 0.5, "y": 0.5, "showarrow": False,
                      "font": {"size": 16, "color": "#555"}, "bgcolor": "rgba(255,255,255,0.85)",
                      "text": f"no change: no kernel changed beyond noise ({_pct_text(t.get('delta_pct'))} "
                              "kernel time)"})
    layout["annotations"] = notes
    plain = [ys[0], *raw, *ys[len(raw) + 1:]]  # the totals and "other kernels" hold no profile text
    ticks = {"tickmode": "array", "tickvals": ys, "ticktext": [plot_text(clip_balanced(y, NARROW_NAME)) for y in plain]}
    narrow = {"layout": {"margin": {"l": 12, "r": 12, "t": 30, "b": 56}, "yaxis": ticks,
                         "xaxis": {"title": {"text": f"{label}{u.short}/GPU (not from 0)"}},
                         "annotations": [{**a, "text": "no change beyond noise", "font": {"size": 13}}
                                         if a["x"] == 0.5 else {**a, "text": f"wall {wall / div:.3f} {label}"}
                                         for a in notes]},
              "traces": [{"textposition": "none"}]}
    return {"data": [trace], "layout": layout, "narrow": narrow}


def _pct_text(x) -> str:
    return f"{x:+.1f}%" if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else "±0%"


def waterfall_range(ends: list[float], before: float, after: float, iteration: float) -> tuple[float, float]:
    """The waterfall's axis: the bars' ends with room for their labels, and at least 1% of the iteration
    (``iteration``: its GPU wall time, else the kernel time) on either side of the totals, so that an
    unchanged pair is drawn at the iteration's scale, not zoomed until its noise fills the chart."""
    points = ends + [before, after]
    lo, hi = min(points), max(points)
    pad = (hi - lo) * 0.35
    need = 0.01 * abs(iteration)
    return max(min(lo - pad, min(before, after) - need), 0.0), max(hi + pad, max(before, after) + need)

"""The GPU time budget's figures (docs/budget.md), as plain plotly dicts like ``figures``: the four blocks
(compute, exposed communication, exposed memory, idle) as stacked bars that add up to each window, and the step
time beside them.

- ``budget_trend_figure``: a bar per commit over the history (per iteration per GPU) and the step time's series;
  a commit without a stored budget draws no bar (the page says so);
- ``budget_iterations_figure``: a leaderboard's iterations, each bar 100% of that iteration's window per GPU,
  the step time on a second axis;
- ``budget_diff_figure``: the diff's two sides (``doc["budget"]``), block by block.

Every figure carries ``narrow`` overrides for a phone (``figures.NARROW_PX``), as the others do.
"""

from __future__ import annotations

from typing import Any

from kbase.render.report.figures import (
    CATEGORY_COLOR,
    MAX_POINTS,
    _buckets,
    _hover_refs,
    _mean,
    _scaled,
    _setup_changes,
    _x,
    base_layout,
    time_unit,
)
from kbase.render.report.labels import NARROW_PLOT_PX, commit_ticks
from kbase.render.report.model import BudgetView, ReportData

# (field of BudgetBar, field of the diff's budget object, legend name, short legend name for a phone)
BLOCKS = (("compute_ns", "compute_ns", "compute", "compute"),
          ("communication_ns", "communication_exposed_ns", "exposed communication", "comm."),
          ("memory_ns", "memory_exposed_ns", "exposed memory", "memory"),
          ("idle_ns", "idle_ns", "idle", "idle"))
COLOR = {"compute_ns": CATEGORY_COLOR["compute"], "communication_ns": CATEGORY_COLOR["communication"],
         "memory_ns": CATEGORY_COLOR["memory"], "idle_ns": "#bdbdbd"}
STEP_COLOR = "#111111"
LEGEND = {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom", "traceorder": "normal"}  # above the plot


def _legend_narrow(n: int) -> dict:
    """Short legend names on a phone: one override per trace."""
    return {"traces": [{"name": short} for _, _, _, short in BLOCKS][:n]}


def budget_trend_figure(data: ReportData, max_points: int = MAX_POINTS) -> dict:
    """The budget per commit: the four blocks stacked per iteration per GPU (a commit without a stored budget has
    no bar), the step time as a line over them (where the commits have iteration markers)."""
    commits = data.commits
    n = len(commits)
    starts = _buckets(n, max_points)
    xs = _x(starts, n)
    bars = [p.budget for p in commits]
    series = {f: _mean([None if b is None else getattr(b, f) for b in bars], starts) for f, *_ in BLOCKS}
    step = _mean([None if b is None else b.step_ns for b in bars], starts)
    windows = [sum(v for v in vals if v is not None) for vals in zip(*series.values())]
    label, div = time_unit(max([*windows, *(v for v in step if v is not None)], default=0.0))
    refs = _hover_refs(commits, starts)
    traces: list[dict[str, Any]] = []
    for f, _, name, _ in BLOCKS:
        traces.append({"type": "bar", "name": name, "x": xs, "y": _scaled(series[f], div),
                       "marker": {"color": COLOR[f], "line": {"width": 0}},
                       "hovertemplate": f"{name}: %{{y:.3f}} {label}<extra></extra>"})
    traces.append({"type": "scatter", "mode": "lines+markers" if len(xs) <= 200 else "lines", "name": "step time",
                   "x": xs, "y": _scaled(step, div), "connectgaps": False, "customdata": refs,
                   "line": {"color": STEP_COLOR, "width": 2}, "marker": {"size": 4},
                   "hovertemplate": "<b>%{customdata[0]}</b>  %{customdata[1]}<br>%{customdata[2]}<br>"
                                    f"<b>step %{{y:.3f}} {label}</b><extra></extra>"})
    layout = base_layout(440)
    layout.update({
        "barmode": "stack", "bargap": 0.15 if n <= 200 else 0.0, "hovermode": "x unified",
        "shapes": _setup_changes(commits),
        "xaxis": {"title": {"text": "commit (oldest → newest)"}, "showgrid": False, **commit_ticks(commits, xs)},
        "yaxis": {"title": {"text": f"per iteration per GPU ({label})"}, "rangemode": "tozero", "gridcolor": "#eee"},
        "legend": LEGEND,
        "margin": {"l": 70, "r": 20, "t": 50, "b": 70}})
    narrow = {"layout": {"height": 420, "margin": {"l": 56, "r": 12, "t": 56, "b": 56},
                         "legend": {"font": {"size": 10}},
                         "xaxis": {"title": {"text": "commit"}, "automargin": True, "tickangle": 0,
                                   **commit_ticks(commits, xs, 3, inset=True, plot_px=NARROW_PLOT_PX)},
                         "yaxis": {"title": {"text": f"{label}/iter/GPU"}}},
              **_legend_narrow(len(BLOCKS))}
    return {"data": traces, "layout": layout, "narrow": narrow}


def budget_iterations_figure(view: BudgetView) -> dict:
    """One bar per iteration, the four blocks as shares of that iteration's window (each bar 100%), hover in time;
    the step time per iteration on the right axis."""
    its = view.iterations or [view.total]
    xs = [it.label for it in its]
    label, div = time_unit(max([it.window_ns for it in its] + [it.step_ns or 0.0 for it in its]))
    traces: list[dict[str, Any]] = []
    for f, _, name, _ in BLOCKS:
        share = [100.0 * getattr(it, f) / it.window_ns if it.window_ns else None for it in its]
        traces.append({"type": "bar", "name": name, "x": xs, "y": share,
                       "customdata": [getattr(it, f) / div for it in its], "marker": {"color": COLOR[f]},
                       "hovertemplate": f"iteration %{{x}}: {name} %{{y:.1f}}% (%{{customdata:.3f}} {label} per GPU)"
                                        "<extra></extra>"})
    has_step = any(it.step_ns is not None for it in its)
    if has_step:
        src = "host step range" if view.step_source == "host" else "GPU window"
        traces.append({"type": "scatter", "mode": "lines+markers", "name": "step time", "x": xs, "yaxis": "y2",
                       "y": [None if it.step_ns is None else it.step_ns / div for it in its],
                       "line": {"color": STEP_COLOR, "width": 2}, "marker": {"size": 5},
                       "hovertemplate": f"iteration %{{x}}: step %{{y:.3f}} {label} ({src})<extra></extra>"})
    unit = "iteration" if view.unit == "iteration" else "window"
    layout = base_layout(380)
    layout.update({
        "barmode": "stack", "bargap": 0.2, "hovermode": "closest",
        "legend": LEGEND,
        "xaxis": {"title": {"text": unit}, "type": "category", "showgrid": False},
        "yaxis": {"title": {"text": f"% of each {unit}'s GPU window"}, "range": [0, 100], "gridcolor": "#eee",
                  "ticksuffix": "%"},
        "margin": {"l": 70, "r": 70 if has_step else 20, "t": 50, "b": 60}})
    if has_step:
        layout["yaxis2"] = {"title": {"text": f"step time ({label})"}, "overlaying": "y", "side": "right",
                            "rangemode": "tozero", "showgrid": False}
    narrow_layout: dict[str, Any] = {
        "height": 380, "margin": {"l": 48, "r": 48 if has_step else 12, "t": 56, "b": 50},
        "legend": {"font": {"size": 10}}, "xaxis": {"nticks": 6, "tickangle": 0},
        "yaxis": {"title": {"text": f"% of {unit}"}}}
    if has_step:
        narrow_layout["yaxis2"] = {"title": {"text": f"step {label}", "standoff": 6}, "nticks": 4, "tickformat": ".0f",
                                   "automargin": True}
    return {"data": traces, "layout": layout, "narrow": {"layout": narrow_layout, **_legend_narrow(len(BLOCKS))}}


def budget_diff_figure(budget: dict[str, Any]) -> dict:
    """The diff's two sides as two stacked bars of the four blocks (per iteration per GPU), the step (when judged
    from iterations) as a marker on each."""
    sides = [("before", budget["before"]), ("after", budget["after"])]
    step = budget.get("step") or {}
    steps = [step.get("before_ns"), step.get("after_ns")]
    label, div = time_unit(max([s["window_ns"] or 0.0 for _, s in sides] + [v or 0.0 for v in steps]))
    per = "iteration" if budget.get("unit") == "iteration" else "window"
    ys = [name for name, _ in sides]
    traces: list[dict[str, Any]] = []
    for _, key, name, _ in BLOCKS:
        d = budget["delta_ns"][key]
        traces.append({"type": "bar", "orientation": "h", "name": name, "y": ys,
                       "x": [(s[key] or 0.0) / div for _, s in sides], "marker": {"color": COLOR[_field(key)]},
                       "hovertemplate": f"%{{y}}: {name} %{{x:.3f}} {label} (Δ {'+' if d >= 0 else '-'}"
                                        f"{abs(d) / div:.3f} {label})<extra></extra>"})
    if step.get("before_ns") is not None:
        traces.append({"type": "scatter", "mode": "markers", "name": "step time", "y": ys,
                       "x": [None if v is None else v / div for v in steps],
                       "marker": {"color": STEP_COLOR, "symbol": "line-ns-open", "size": 26, "line": {"width": 3}},
                       "hovertemplate": f"%{{y}}: step %{{x:.3f}} {label}<extra></extra>"})
    layout = base_layout(270)
    layout.update({
        "barmode": "stack", "bargap": 0.3, "hovermode": "closest",
        "legend": LEGEND,
        "yaxis": {"autorange": "reversed", "automargin": True},
        "xaxis": {"title": {"text": f"per {per} per GPU ({label})"}, "gridcolor": "#eee", "rangemode": "tozero"},
        "margin": {"l": 20, "r": 20, "t": 50, "b": 56}})
    narrow = {"layout": {"height": 300, "margin": {"l": 12, "r": 12, "t": 64, "b": 50},
                         "legend": {"font": {"size": 10}},
                         "xaxis": {"title": {"text": f"{label}/{per[:4]}/GPU"}, "nticks": 5}},
              **_legend_narrow(len(BLOCKS))}
    return {"data": traces, "layout": layout, "narrow": narrow}


def _field(key: str) -> str:
    """The ``BudgetBar`` field of a diff budget key (``communication_exposed_ns`` -> ``communication_ns``)."""
    return next(f for f, k, _, _ in BLOCKS if k == key)

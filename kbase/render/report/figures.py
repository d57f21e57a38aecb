"""Plotly figures of the report as plain dicts (``{"data": [...], "layout": {...}}``), no plotly import.

The diff's waterfall is ``report.diff_figure``'s. Each figure is drawn by ``assets/report.js`` with the
vendored ``plotly-basic`` bundle (scatter and bar traces only). Every string from a profile or from git goes
through ``safe.plot_text``.
Long histories are aggregated into at most ``max_points`` buckets of consecutive commits (mean per
bucket; hover names the bucket's first and last commit), so a 10,000-commit trend draws as fast as
a 1,000-commit one.

Each figure also carries ``narrow``: what changes on a narrow screen (a phone, under ``NARROW_PX``):
``layout`` overrides (no side legend, short axis titles, three ticks, names cut short) and per-trace
overrides (``traces``); ``report.js`` applies them by the chart's width, so a chart keeps a usable
plot height and no two labels collide at 390 px as at 1280 px.
"""

from __future__ import annotations

import numpy as np

from kbase.display import clip_balanced
from kbase.render.report.labels import NARROW_NAME, NARROW_PLOT_PX, commit_ticks, distinct_labels
from kbase.render.report.model import CommitPoint, KernelSeries, LeaderboardView, ReportData, StepMarker
from kbase.render.report.safe import clip, plot_text

MAX_POINTS = 1000
PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#eeca3b", "#9d755d", "#ff9da6",
           "#79706e", "#bab0ac", "#439894"]
OTHER_COLOR = "#c7c7c7"
CLASS_COLOR = {"regressed": "#d62728", "regressed_below_floor": "#e377c2", "improved": "#2ca02c", "new": "#ff7f0e",
               "gone": "#1f77b4", "swap": "#9467bd", "other": "#9e9e9e", "total": "#555555",
               "cannot_judge": "#17becf"}
TC_LABEL = {"tc": "✓ tensor cores", "fallback": "⚠ matmul/conv on CUDA cores (no tensor-core path)",
            "na": "- not tensor-core work"}
TC_COLOR = {"tc": "#2ca02c", "fallback": "#ff7f0e", "na": "#9e9e9e"}
CATEGORY_COLOR = {"compute": "#4c78a8", "communication": "#f58518", "memory": "#b279a2", "idle": "#e0e0e0"}
FONT = {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 12}
NARROW_PX = 640  # report.js: a chart narrower than this takes its figure's ``narrow`` overrides
STEP_LABEL_PX = 16  # width of a step's number label


def time_unit(max_ns: float) -> tuple[str, float]:
    """(label, divisor) that shows ``max_ns`` with a few digits before the point."""
    if max_ns >= 1e6:
        return "ms", 1e6
    if max_ns >= 1e3:
        return "µs", 1e3
    return "ns", 1.0


def _buckets(n: int, max_points: int) -> np.ndarray:
    """Start index of each bucket of consecutive commits (one commit per bucket when n fits)."""
    if n <= max_points:
        return np.arange(n)
    return np.unique(np.linspace(0, n, max_points + 1).astype(np.int64)[:-1])


def _mean(values: list[float | None], starts: np.ndarray) -> list[float | None]:
    """Mean of each bucket, ignoring missing values (None where a bucket has none)."""
    a = np.array([np.nan if v is None else v for v in values], dtype=float)
    if len(starts) == len(a):
        return values
    ok = ~np.isnan(a)
    sums = np.add.reduceat(np.where(ok, a, 0.0), starts)
    counts = np.add.reduceat(ok.astype(np.int64), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = sums / counts
    return [None if c == 0 else float(v) for v, c in zip(m, counts)]


def _scaled(values: list[float | None], div: float) -> list[float | None]:
    return [None if v is None else v / div for v in values]


def _short(commit: str) -> str:
    return commit[:12]


def _hover_refs(commits: list[CommitPoint], starts: np.ndarray) -> list[list[str]]:
    """customdata per point: [commit(s), date, subject] of the commit or the bucket."""
    ends = np.r_[starts[1:], len(commits)] - 1
    out = []
    for s, e in zip(starts.tolist(), ends.tolist()):
        first, last = commits[s].ref, commits[e].ref
        if s == e:
            out.append([_short(last.commit) + (" (bisect)" if last.bisect else ""),
                        (last.date or "")[:16].replace("T", " "), plot_text(clip(last.subject, 90)) or "(no subject)"])
        else:
            out.append([f"{_short(first.commit)} … {_short(last.commit)}",
                        f"{(first.date or '')[:10]} … {(last.date or '')[:10]}",
                        f"mean of {e - s + 1} commits"])
    return out


def _x(starts: np.ndarray, n: int) -> list[int]:
    """x of each bucket: its last commit's position (so a step at commit i lands on its bucket)."""
    return (np.r_[starts[1:], n] - 1).tolist()


def step_levels(steps: list[StepMarker], n: int) -> list[int]:
    """A row (0, 1, 2, ...) per step label, so that labels of steps closer than a label's width on a narrow
    chart (``NARROW_PLOT_PX`` for ``n`` commits) sit one above the other instead of on top of each other."""
    gap = max(1.0, n * STEP_LABEL_PX / NARROW_PLOT_PX)
    taken: list[tuple[float, int]] = []
    levels = [0] * len(steps)
    for i in sorted(range(len(steps)), key=lambda k: steps[k].index):
        used = {lvl for x, lvl in taken if abs(x - steps[i].index) < gap}
        levels[i] = next(lvl for lvl in range(len(steps) + 1) if lvl not in used)
        taken.append((steps[i].index, levels[i]))
    return levels


def _step_shapes(steps: list[StepMarker], n: int, kernel: str | None = None) -> tuple[list, list, int]:
    """Vertical lines for the steps of ``kernel`` (None: every step, for the trend), each labelled with its
    number in the page's steps table (the full label is in the table and the hover), and the rows of labels."""
    shapes, notes = [], []
    mine = [(k, s) for k, s in enumerate(steps, 1) if kernel is None or s.kernel == kernel]
    levels = step_levels([s for _, s in mine], n)
    for (k, s), level in zip(mine, levels):
        color = CLASS_COLOR["regressed"] if s.delta_pct > 0 else CLASS_COLOR["improved"]
        x = s.index - 0.5  # between the last commit before the step and the first after it
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1,
                       "line": {"color": color, "width": 1.5, "dash": "dash"}})
        notes.append({"x": x, "y": 1.0, "xref": "x", "yref": "paper", "yanchor": "bottom", "showarrow": False,
                      "yshift": 2 + 15 * level, "font": {"color": color, "size": 11}, "text": f"{k}",
                      "hovertext": plot_text(s.label or f"step {s.delta_pct:+.0f}%")})
    return shapes, notes, (max(levels) + 1 if levels else 0)


def _setup_changes(commits: list[CommitPoint]) -> list[dict]:
    out = []
    for i in range(1, len(commits)):
        if commits[i].ref.fingerprint != commits[i - 1].ref.fingerprint:
            out.append({"type": "line", "xref": "x", "yref": "paper", "x0": i - 0.5, "x1": i - 0.5, "y0": 0, "y1": 1,
                        "line": {"color": "#777", "width": 1, "dash": "dot"}})
    return out


def base_layout(height: int) -> dict:
    return {"height": height, "font": FONT, "margin": {"l": 70, "r": 20, "t": 40, "b": 60},
            "plot_bgcolor": "#fff", "paper_bgcolor": "#fff", "hoverlabel": {"align": "left", "namelength": -1}}


def trend_figure(data: ReportData, stack: int = 8, max_points: int = MAX_POINTS) -> dict:
    """Kernel time per iteration per GPU over commits: the top ``stack`` kernels stacked, the rest as
    "other", the total as a line, steps and setup changes as vertical lines."""
    commits = data.commits
    n = len(commits)
    starts = _buckets(n, max_points)
    total = _mean([p.kernel_ns for p in commits], starts)
    label, div = time_unit(max((v for v in total if v is not None), default=0.0))
    xs = _x(starts, n)
    traces = []
    shown = np.zeros(len(starts))
    labels = distinct_labels([(k.name, k.short_name) for k in data.kernels])
    for i, k in enumerate(data.kernels[:stack]):
        y = _mean(k.per_iter_ns, starts)
        shown += np.array([v or 0.0 for v in y])
        name = plot_text(labels[k.name])
        traces.append({"type": "scatter", "mode": "lines", "stackgroup": "kernels", "name": name, "x": xs,
                       "y": _scaled([v or 0.0 for v in y], div),
                       "line": {"width": 0.5, "color": PALETTE[i % len(PALETTE)]},
                       "hovertemplate": f"{name}: %{{y:.3f}} {label}<extra></extra>"})
    other = [None if t is None else max(t - s, 0.0) for t, s in zip(total, shown.tolist())]
    traces.append({"type": "scatter", "mode": "lines", "stackgroup": "kernels", "name": "other kernels", "x": xs,
                   "y": _scaled([v or 0.0 for v in other], div), "line": {"width": 0.5, "color": OTHER_COLOR},
                   "hovertemplate": f"other kernels: %{{y:.3f}} {label}<extra></extra>"})
    traces.append({"type": "scatter", "mode": "lines+markers" if len(xs) <= 200 else "lines", "name": "total",
                   "x": xs, "y": _scaled(total, div), "line": {"color": "#111", "width": 2}, "marker": {"size": 4},
                   "customdata": _hover_refs(commits, starts),
                   "hovertemplate": "<b>%{customdata[0]}</b>  %{customdata[1]}<br>%{customdata[2]}<br>"
                                    f"<b>total %{{y:.3f}} {label}</b><extra></extra>"})
    shapes, notes, rows = _step_shapes(data.steps, n)
    top = 24 + 15 * rows
    layout = base_layout(560)
    layout.update({
        "hovermode": "x unified", "shapes": shapes + _setup_changes(commits), "annotations": notes,
        "xaxis": {"title": {"text": "commit (oldest → newest)"}, "showgrid": False, **commit_ticks(commits, xs)},
        "yaxis": {"title": {"text": f"kernel time per iteration per GPU ({label})"}, "rangemode": "tozero",
                  "gridcolor": "#eee"},
        "legend": {"orientation": "v", "x": 1.01, "y": 1, "font": {"size": 11}},
        "margin": {"l": 70, "r": 260, "t": top, "b": 70}})
    narrow = {"height": 340 + top, "showlegend": False, "margin": {"l": 56, "r": 12, "t": top, "b": 56},
              "xaxis": {"title": {"text": "commit"}, "automargin": True, "tickangle": 0,
                        **commit_ticks(commits, xs, 3, inset=True, plot_px=NARROW_PLOT_PX)},
              "yaxis": {"title": {"text": f"{label} per iteration per GPU"}}}
    return {"data": traces, "layout": layout, "narrow": {"layout": narrow}}


def kernel_figure(data: ReportData, k: KernelSeries, max_points: int = MAX_POINTS) -> dict:
    """One kernel over commits: time per iteration (with the iteration spread as a band), launches per
    iteration, and time per launch, on three stacked panels sharing the commit axis."""
    commits = data.commits
    n = len(commits)
    starts = _buckets(n, max_points)
    xs = _x(starts, n)
    per_iter = _mean(k.per_iter_ns, starts)
    label, div = time_unit(max((v for v in per_iter if v is not None), default=0.0))
    per_launch = _mean(k.ns_per_launch, starts)
    l_label, l_div = time_unit(max((v for v in per_launch if v is not None), default=0.0))
    refs = _hover_refs(commits, starts)
    head = "<b>%{customdata[0]}</b>  %{customdata[1]}<br>%{customdata[2]}<br>"
    color = TC_COLOR.get(k.tc, "#4c78a8") if k.tc != "na" else "#4c78a8"
    traces = [
        {"type": "scatter", "mode": "lines", "x": xs, "y": _scaled(_mean(k.band_low_ns, starts), div),
         "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False, "yaxis": "y"},
        {"type": "scatter", "mode": "lines", "x": xs, "y": _scaled(_mean(k.band_high_ns, starts), div),
         "fill": "tonexty", "fillcolor": "rgba(76,120,168,0.18)", "line": {"width": 0}, "hoverinfo": "skip",
         "name": "iteration spread (p10–p90)", "yaxis": "y"},
        {"type": "scatter", "mode": "lines+markers", "x": xs, "y": _scaled(per_iter, div), "name": "time per iteration",
         "line": {"color": color, "width": 2}, "marker": {"size": 5}, "customdata": refs, "yaxis": "y",
         "hovertemplate": head + f"time per iteration %{{y:.3f}} {label}<extra></extra>"},
        {"type": "scatter", "mode": "lines+markers", "x": xs, "y": _mean(k.launches_per_iter, starts),
         "name": "launches per iteration", "line": {"color": "#f58518"}, "marker": {"size": 4}, "customdata": refs,
         "yaxis": "y2", "hovertemplate": head + "launches per iteration %{y:.1f}<extra></extra>"},
        {"type": "scatter", "mode": "lines+markers", "x": xs, "y": _scaled(per_launch, l_div),
         "name": "time per launch", "line": {"color": "#54a24b"}, "marker": {"size": 4}, "customdata": refs,
         "yaxis": "y3", "hovertemplate": head + f"time per launch %{{y:.3f}} {l_label}<extra></extra>"},
    ]
    shapes, notes, rows = _step_shapes(data.steps, n, kernel=k.name)
    top = 24 + 15 * rows
    layout = base_layout(720)
    layout.update({
        "hovermode": "closest", "shapes": shapes, "annotations": notes, "showlegend": True,
        "legend": {"orientation": "h", "y": -0.12},
        "xaxis": {"anchor": "y3", "showgrid": False, **commit_ticks(commits, xs)},
        "yaxis": {"domain": [0.56, 1.0], "title": {"text": f"per iteration ({label})"}, "gridcolor": "#eee",
                  "automargin": True},
        "yaxis2": {"domain": [0.29, 0.51], "title": {"text": "launches / iter"}, "gridcolor": "#eee",
                   "rangemode": "tozero", "automargin": True},
        "yaxis3": {"domain": [0.0, 0.24], "title": {"text": f"per launch ({l_label})"}, "gridcolor": "#eee",
                   "automargin": True},
        "margin": {"l": 70, "r": 20, "t": top, "b": 60}})
    narrow = {"height": 820, "margin": {"l": 56, "r": 12, "t": top, "b": 96},
              "legend": {"orientation": "h", "y": -0.06, "yanchor": "top", "font": {"size": 10}},
              "xaxis": {"automargin": True, "tickangle": 0,
                        **commit_ticks(commits, xs, 3, inset=True, plot_px=NARROW_PLOT_PX)},
              "yaxis": {"title": {"text": f"{label}/iter"}, "automargin": True},
              "yaxis2": {"title": {"text": "launches/iter"}, "automargin": True},
              "yaxis3": {"title": {"text": f"{l_label}/launch"}, "automargin": True}}
    return {"data": traces, "layout": layout, "narrow": {"layout": narrow}}


def leaderboard_figures(view: LeaderboardView, top: int = 20) -> tuple[dict, dict]:
    """(where the iteration goes: one stacked bar against the iteration wall; the top kernels coloured
    by tensor-core state)."""
    wall = view.wall_ns if view.wall_ns == view.wall_ns else 0.0
    parts = {"compute": view.compute_ns, "communication": view.communication_ns, "memory": view.memory_ns}
    busy = sum(parts.values())
    parts["idle"] = max(wall - busy, 0.0)
    label, div = time_unit(max(wall, busy))
    bars = []
    for cat, v in parts.items():
        share = v / wall if wall else 0.0
        bars.append({"type": "bar", "orientation": "h", "y": ["iteration"], "x": [v / div], "name": cat,
                     "marker": {"color": CATEGORY_COLOR[cat]}, "text": [f"{cat} {share:.0%}"],
                     "textposition": "inside", "insidetextanchor": "middle",
                     "hovertemplate": f"{cat}: %{{x:.3f}} {label} ({share:.1%} of the iteration)<extra></extra>"})
    where = {"data": bars, "layout": {  # the legend above the bar: below, it would meet the axis title
        **base_layout(230), "barmode": "stack", "hovermode": "closest",
        "legend": {"orientation": "h", "x": 0, "y": 1.04, "yanchor": "bottom"},
        "xaxis": {"title": {"text": f"per iteration per GPU ({label}); dashed line: iteration wall time"},
                  "gridcolor": "#eee"},
        "yaxis": {"showticklabels": False}, "margin": {"l": 20, "r": 20, "t": 44, "b": 60},
        "shapes": [{"type": "line", "xref": "x", "yref": "paper", "x0": wall / div, "x1": wall / div, "y0": 0,
                    "y1": 1, "line": {"color": "#111", "dash": "dash", "width": 2}}] if wall else []},
        "narrow": {"layout": {"height": 260, "margin": {"l": 12, "r": 12, "t": 64, "b": 56},
                              "legend": {"font": {"size": 10}},
                              "xaxis": {"title": {"text": f"{label}/iter/GPU; dashed: wall"}}},
                   "traces": [{"textposition": "none"} for _ in bars]}}
    rows = view.rows[:top]
    labels = distinct_labels([(r.name, r.short_name) for r in rows], limit=48)
    label_k, div_k = time_unit(max((r.per_iter_ns or 0.0 for r in rows), default=0.0))
    traces = []
    for state in ("tc", "fallback", "na"):
        mine = [r for r in rows if r.tc == state]
        if not mine:
            continue
        traces.append({
            "type": "bar", "orientation": "h", "name": TC_LABEL[state], "marker": {"color": TC_COLOR[state]},
            "y": [_kernel_label(rows.index(r) + 1, r, labels) for r in mine],
            "x": [(r.per_iter_ns or 0.0) / div_k for r in mine],
            "customdata": [[plot_text(r.name, 100), r.category, f"{(r.share_window or 0):.1%}",
                            f"{r.amdahl_ceiling:.3f}x" if r.amdahl_ceiling else "∞"] for r in mine],
            "hovertemplate": "%{customdata[0]}<br>%{customdata[1]}, " + TC_LABEL[state]
                             + f"<br>%{{x:.3f}} {label_k} per iteration, %{{customdata[2]}} of the window"
                             "<br>Amdahl ceiling %{customdata[3]}<extra></extra>"})
    order = [_kernel_label(i, r, labels) for i, r in enumerate(rows, 1)]
    height = max(300, 26 * len(rows) + 110)
    top_fig = {"data": traces, "layout": {
        **base_layout(height), "barmode": "overlay", "hovermode": "closest",
        "legend": {"orientation": "h", "y": 1.08, "x": 0},
        "yaxis": {"categoryorder": "array", "categoryarray": order, "autorange": "reversed", "automargin": True,
                  "tickfont": {"size": 11}},
        "xaxis": {"title": {"text": f"time per iteration per GPU ({label_k})"}, "gridcolor": "#eee"},
        "margin": {"l": 20, "r": 20, "t": 40, "b": 50}},
        "narrow": {"layout": {"height": height + 70, "margin": {"l": 12, "r": 12, "t": 70, "b": 50},
                              "legend": {"y": 1.0, "yanchor": "bottom", "font": {"size": 10}},
                              "yaxis": {"tickmode": "array", "tickvals": order,
                                        "ticktext": [_kernel_label(i, r, labels, NARROW_NAME)
                                                     for i, r in enumerate(rows, 1)]},
                              "xaxis": {"title": {"text": f"{label_k}/iter/GPU"}}}}}
    return where, top_fig


def _kernel_label(rank: int, r, labels: dict[str, str], width: int = 0) -> str:
    """A kernel's axis label (rank, tensor-core symbol, label), cut to ``width`` (0: not cut) before it is escaped."""
    symbol = {"tc": "✓", "fallback": "⚠", "na": "-"}.get(r.tc, "-")
    text = f"{rank}. {symbol} {labels[r.name]}"
    return plot_text(clip_balanced(text, width) if width else text)

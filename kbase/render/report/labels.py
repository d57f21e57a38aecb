"""Labels of the report's charts and tables that must never collide: commit ticks spaced for the plot's width
(``commit_ticks``: at 390 px as at 1280 px) and kernel labels as the command line's tables show them
(``distinct_labels``: a ``#id`` where short names collide, brackets balanced where a name is cut)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from kbase.analysis.names import display_names, short_id
from kbase.display import clip_balanced

if TYPE_CHECKING:
    from kbase.render.report.model import CommitPoint

NARROW_PLOT_PX = 300  # about the plot width of a chart at 390 px (for spacing step labels and commit ticks)
NARROW_NAME = 22  # characters of a kernel name on a narrow axis


def distinct_labels(kernels: list[tuple[str, str]], limit: int = 40) -> dict[str, str]:
    """A readable label per full name from (full name, short name) pairs, as the command line's tables show it
    (``analysis.names.display_names``): the short name, and where several kernels share it
    (``vectorized_elementwise_kernel`` x 4) its template arguments and ``#id``; cut to ``limit`` characters with
    brackets balanced and the ``#id`` kept (``display.clip_balanced``), so two kernels never share a label. Plain
    text: escape it for its context."""
    if not kernels:
        return {}
    names = list(dict.fromkeys(n for n, _ in kernels))
    short = dict(kernels)
    shown = dict(zip(names, display_names(names, [short[n] for n in names])))
    out = {n: clip_balanced(shown[n], limit) for n in names}
    seen: dict[str, list[str]] = {}
    for n in names:
        seen.setdefault(out[n], []).append(n)
    for same in (g for g in seen.values() if len(g) > 1):  # distinct names cut to one label: their #ids tell them
        for n in same:
            label = shown[n] if " #" in shown[n] else f"{shown[n]} {short_id(n)}"
            out[n] = clip_balanced(label, limit)
    return out


TICK_PX = 84  # room for one commit tick (a 7-character hash over a date, 12 px type) and the gap to the next
WIDE_PLOT_PX = 900  # about the plot width of a chart at 1280 px


def commit_ticks(commits: list[CommitPoint], xs: list[int], count: int = 8, inset: bool = False,
                 plot_px: float = WIDE_PLOT_PX) -> dict:
    """At most ``count`` commit ticks (hash and date), evenly spread and never closer than ``TICK_PX`` on a plot
    ``plot_px`` wide (fewer ticks where the commits are too close: five commits on a phone get two); ``inset``
    (a narrow chart): the axis padded by half a commit on either side, and no tick at the ends once the commits
    outnumber the ticks (a label centred on the first commit would reach over the y axis's labels)."""
    if not xs:
        return {}
    n = len(xs)
    gap = max(1, math.ceil(TICK_PX * n / plot_px))  # commits between two ticks: the x axis holds ~n slots
    for k in range(min(count, n), 0, -1):
        spots = (np.arange(k) + 0.5) / k * (n - 1) if inset and n > k else np.linspace(0, n - 1, k)
        picks = sorted(set(np.floor(spots + 0.5).astype(int).tolist()))
        if len(picks) == k and all(b - a >= gap for a, b in zip(picks, picks[1:])):
            break
    vals = [xs[i] for i in picks]
    text = [f"{commits[v].ref.commit[:7]}<br>{(commits[v].ref.date or '')[:10]}" for v in vals]
    out: dict = {"tickmode": "array", "tickvals": vals, "ticktext": text}
    if inset:
        half = (xs[-1] - xs[0]) / max(n - 1, 1) / 2 if n > 1 else 0.5
        out["range"] = [xs[0] - half, xs[-1] + half]
    return out

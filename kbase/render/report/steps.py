"""Step markers for the report: ``kbase.comparison.changepoints`` run over the series the report draws
(the total kernel time and each drawn kernel), placed at the first commit of each new level."""

from __future__ import annotations

import math

from kbase.comparison.changepoints import Creep, series_steps
from kbase.render.report.model import ReportData, StepMarker


def find_steps(data: ReportData) -> list[StepMarker]:
    """Steps (and creeps, as one marker at their first step) of the total and of every drawn kernel."""
    commits = [p.ref.commit for p in data.commits]
    where = {c: i for i, c in enumerate(commits)}
    series: list[tuple[str | None, str, list[float | None]]] = [(None, "total", [p.kernel_ns for p in data.commits])]
    series += [(k.name, k.short_name, k.per_iter_ns) for k in data.kernels]
    out = []
    for name, label, values in series:
        levels = [math.nan if v is None else float(v) for v in values]
        for found, _frm, first, _to in series_steps(levels, commits):
            kind = "creep" if isinstance(found, Creep) else "step"
            out.append(StepMarker(index=where[first], kernel=name, delta_pct=100.0 * found.rel,
                                  label=f"{kind} {found.rel:+.1%}: {label}"))
    return out

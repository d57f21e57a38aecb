"""``kbase report``: a static HTML site of a workload's history, a diff and a leaderboard.

- ``model``: the input, as plain dataclasses (``ReportData`` and its parts);
- ``kbase.report_data`` (``kbase.api.reporting``) builds it: the diff is ``kbase.gate``'s, the steps ``kbase.steps``';
- ``site.build_report(data, out_dir)``: writes the folder (pages, vendored plotly-basic, manifest).

Nothing heavy is imported here: ``import kbase.render.report`` costs only the dataclasses.
"""

from __future__ import annotations

from kbase.render.report.model import (  # noqa: F401 - the package's public data contract
    REPORT_SCHEMA,
    CommitPoint,
    CommitRef,
    KernelSeries,
    LeaderboardRow,
    LeaderboardView,
    ReportData,
    StepDiff,
    StepMarker,
)


def build_report(data, out_dir, **options):
    """See :func:`kbase.render.report.site.build_report`."""
    from kbase.render.report.site import build_report as _build

    return _build(data, out_dir, **options)

"""Front door, the HTML report: everything it draws, each part from the call that answers the same question
on the command line — the diff page is ``kbase.gate`` of its pair (acceptances, history noise, policy,
incomparable boundaries: the same settings), the step markers are ``kbase.steps`` — so the report cannot
state another verdict than the CLI. ``kbase.render.report`` only formats what this returns."""

from __future__ import annotations

import dataclasses
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.settings import Settings

if TYPE_CHECKING:
    from kbase.comparison.history import StepsReport
    from kbase.comparison.result import GateResult
    from kbase.render.report.model import CommitPoint, ReportData, StepMarker
    from kbase.store.engine import Store

from kbase.api.common import _store

FLAGGED_KERNELS = 10  # kernels the diff flags that get a series (and a page) even when not among the top


def report_data(settings: Settings | None = None, *, workload: str | None = None, branch: str | None = None,
                last: int | None = None, before: int = -2, after: int = -1, allow_incomparable: bool = False,
                history_ref: str | None = None, steps_last: int = 50, top_kernels: int | None = None,
                today: date | None = None, store: Store | None = None) -> ReportData:
    """What the report of a workload's history draws: a point per commit (the newest ``last``; of ``branch``
    when given) with the series of the ``top_kernels`` largest kernels; the gate of the commits at positions
    ``before`` -> ``after`` (the latest pair by default) exactly as ``kbase.gate`` of those commits with
    these settings (``allow_incomparable``, ``history_ref``, ``today`` as there); the steps ``kbase.steps``
    finds over the last ``steps_last`` baselines of the workload's line; the leaderboard of ``after``.
    ``workload``: default the settings' when stored, else the store's only one."""
    from kbase.api.comparing import gate
    from kbase.api.kernels import steps
    from kbase.api.trend import (
        TOP_KERNELS,
        commit_points,
        git_subjects,
        kernel_series,
        leaderboard_view,
        pick_workload,
        top_kernel_ids,
    )
    from kbase.errors import InputError, KbaseError
    from kbase.render.report.model import ReportData
    from kbase.store.reader import EngineReader

    settings = settings or Settings.load()
    with _store(settings, store, readonly=True) as st:
        reader = EngineReader(st.engine)
        if workload is None and settings.workload in reader.workloads():
            workload = settings.workload
        workload = pick_workload(reader, workload)
        settings = dataclasses.replace(settings, workload=workload)  # the gate and steps judge this workload
        points = commit_points(reader, workload, branch, {}, last)
        if not points:
            where = f" on branch {branch!r}" if branch else ""
            raise InputError(f"no baselines of workload {workload!r}{where} in the store")
        n = len(points)
        for flag, pos in (("before", before), ("after", after)):
            if not -n <= pos < n:
                raise InputError(f"no commit at position {pos} of the {n} in this history", field=flag, value=pos)
        subjects = git_subjects(settings.repo, [p.ref.commit for p in points])
        for p in points:
            p.ref = dataclasses.replace(p.ref, subject=subjects.get(p.ref.commit, p.ref.subject))
        data = ReportData(workload=workload, branch=branch, commits=points, kernels=[], notes=_history_notes(points),
                          title=workload + (f" @ {branch}" if branch else ""),
                          generated_at=datetime.now(UTC).isoformat(timespec="seconds"))
        if n >= 2:
            try:
                data.gate = gate(points[before].ref.commit, points[after].ref.commit, settings,
                                 allow_incomparable=allow_incomparable, history_ref=history_ref, today=today, store=st)
            except KbaseError as exc:  # what kbase gate of the pair would say, in place of the diff page
                data.notes.append(f"no diff page: kbase gate {points[before].ref.commit[:12]} "
                                  f"{points[after].ref.commit[:12]} says: {exc.message}")
        found = steps(settings, last=steps_last, store=st)
        data.steps = step_markers(found, points)
        data.notes += [f"steps: {note}" for note in found.notes]
        shown = [*_flagged(data.gate), *dict.fromkeys(s.kernel for s in data.steps if s.kernel)]
        ids = top_kernel_ids(reader, points, TOP_KERNELS if top_kernels is None else top_kernels, shown)
        data.kernels = kernel_series(reader, workload, points, ids)
        data.leaderboard = leaderboard_view(reader, points[after if n >= 2 else -1].ref)
    return data


def _history_notes(points: list[CommitPoint]) -> list[str]:
    notes = []
    if len({p.ref.fingerprint for p in points}) > 1:
        notes.append("the GPU model/count or window changed within this history: dotted lines mark where (no step "
                     "or diff is measured across such a change)")
    if len({p.unit for p in points}) > 1:
        notes.append("some captures have no iteration marker: those points are per window-second")
    return notes


def _flagged(result: GateResult | None) -> list[str]:
    """The kernels the diff flags (regressed, below the gate floor, improved, new, gone), in the diff's order
    (regressions first, then by effect on the iteration)."""
    from kbase.enums import KernelClass

    if result is None:
        return []
    flagged = {KernelClass.REGRESSED, KernelClass.REGRESSED_BELOW_FLOOR, KernelClass.IMPROVED, KernelClass.NEW,
               KernelClass.GONE}
    table = result.comparison.result.table
    names = [n for n, c in zip(table["name"].tolist(), table["class"].tolist()) if c in flagged]
    return names[:FLAGGED_KERNELS]


def step_markers(found: StepsReport, points: list[CommitPoint]) -> list[StepMarker]:
    """``kbase steps``' steps (and creeps, at their first step) as markers at the first commit of each new
    level; a step whose commit the drawn history does not hold is not drawn."""
    from kbase.render.report.model import StepMarker

    where = {p.ref.commit: i for i, p in enumerate(points)}
    return [StepMarker(index=where[s.first_commit], kernel=s.name, delta_pct=100.0 * s.rel,
                       label=f"{s.kind} {s.rel:+.1%}: {s.short_name}")
            for s in found.steps if s.first_commit in where]


def report(out: Path | str, settings: Settings | None = None, *, overwrite: bool = False, **options) -> list[Path]:
    """The static HTML report of ``report_data(settings, **options)``, written into ``out``; returns the pages
    written (index first)."""
    from kbase.render.report import build_report

    return build_report(report_data(settings, **options), Path(out), overwrite=overwrite)

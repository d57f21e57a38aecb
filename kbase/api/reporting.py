"""Front door, the HTML report: everything it draws, each part from the call that answers the same question
on the command line — the diff page is ``kbase.gate`` of its pair (acceptances, history noise, policy,
incomparable boundaries: the same settings), the step markers are ``kbase.steps`` — so the report cannot
state another verdict than the CLI. ``kbase.render.report`` only formats what this returns."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.settings import Settings

if TYPE_CHECKING:
    from kbase.comparison.history import StepsReport
    from kbase.comparison.result import GateResult
    from kbase.render.report.model import CommitPoint, ReportData, StepDiff, StepMarker
    from kbase.store.engine import Store
    from kbase.store.read.reader import StoreReader

from kbase.api.common import _store

FLAGGED_KERNELS = 10  # kernels the diff flags that get a series (and a page) even when not among the top
STEP_PAGES = 10  # detected steps (distinct commit pairs, largest effect first) that get a diff page
POSITION = re.compile(r"-?\d{1,9}")  # --before -2: a position in the drawn history, not a revision
CHANGE_WALK = 12  # pairs of consecutive commits the default diff page looks back over for one that differs


def report_data(settings: Settings | None = None, *, workload: str | None = None, branch: str | None = None,
                last: int | None = None, before: int | str | None = None, after: int | str | None = None,
                allow_incomparable: bool = False, history_ref: str | None = None, steps_last: int = 50,
                top_kernels: int | None = None, step_pages: int = STEP_PAGES, today: date | None = None,
                store: Store | None = None) -> ReportData:
    """What the report of a workload's history draws: a point per commit (the newest ``last``; of ``branch``
    when given) with the series of the ``top_kernels`` largest kernels; the gate of ``before`` -> ``after``
    (positions in that history — the latest pair by default — or git revisions or ``@ID``s) exactly as
    ``kbase.gate`` of them with these settings (``allow_incomparable``, ``history_ref``, ``today`` as there);
    the steps ``kbase.steps`` finds over the last ``steps_last`` baselines of the workload's line, and for the
    ``step_pages`` largest (distinct commit pairs) ``kbase.gate`` of the step's commits; the leaderboard of
    ``after``.
    ``workload``: default the one the settings mean (``workload_for``: named, else the store's only one)."""
    from kbase.api.common import with_workload
    from kbase.api.comparing import gate
    from kbase.api.kernels import steps
    from kbase.api.report_budget import commit_budgets, trend_budget_note
    from kbase.api.trend import (
        TOP_KERNELS,
        commit_points,
        git_subjects,
        kernel_series,
        leaderboard_view,
        top_kernel_ids,
    )
    from kbase.errors import InputError, KbaseError
    from kbase.render.report.model import ReportData

    settings = settings or Settings.load()
    with _store(settings, store, readonly=True) as st:
        reader = st.reader
        settings = with_workload(settings, reader, workload)  # the gate and steps judge this workload
        workload = settings.workload
        points = commit_points(reader, workload, branch, {}, last)
        if not points:
            where = f" on branch {branch!r}" if branch else ""
            raise InputError(f"no baselines of workload {workload!r}{where} in the store")
        n = len(points)
        auto = before is None and after is None
        before, after = -2 if before is None else before, -1 if after is None else after
        positional = all(isinstance(v, int) or POSITION.fullmatch(v.strip()) for v in (before, after))
        pair = [_side(value, flag, points) for flag, value in (("before", before), ("after", after))] \
            if n >= 2 or not positional else None
        budget_note = trend_budget_note(commit_budgets(reader, points), points)  # each commit's stored budget
        subjects = git_subjects(settings.repo, [p.ref.commit for p in points])
        for p in points:
            p.ref = dataclasses.replace(p.ref, subject=subjects.get(p.ref.commit, p.ref.subject))
        data = ReportData(workload=workload, branch=branch, commits=points, kernels=[], notes=_history_notes(points),
                          title=workload + (f" @ {branch}" if branch else ""),
                          budget_notes=[budget_note] if budget_note else [],
                          generated_at=datetime.now(UTC).isoformat(timespec="seconds"))

        def gate_of(a: str, b: str) -> GateResult:  # kbase gate of a pair, with the report's settings
            return gate(a, b, settings, allow_incomparable=allow_incomparable, history_ref=history_ref, today=today,
                        store=st)

        if auto and n >= 2:
            data.gate, data.pair_notes = latest_change(points, gate_of, reader, allow_incomparable)
            data.notes += data.pair_notes
        elif pair is not None:
            try:
                data.gate = gate_of(*pair)
            except KbaseError as exc:  # what kbase gate of the pair would say, in place of the diff page
                if not positional:  # a revision or @ID the user named: their error, as kbase gate's (exit 2)
                    raise
                data.notes.append(f"no diff page: kbase gate {pair[0][:12]} {pair[1][:12]} says: {exc.message}")
        found = steps(settings, last=steps_last, store=st)
        data.steps = step_markers(found, points)
        data.notes += [f"steps: {note}" for note in found.notes]
        data.step_diffs = step_diffs(data, step_pages, gate_of)
        shown = [*_flagged(data.gate), *dict.fromkeys(s.kernel for s in data.steps if s.kernel)]
        ids = top_kernel_ids(reader, points, TOP_KERNELS if top_kernels is None else top_kernels, shown)
        data.kernels = kernel_series(reader, points, ids)
        data.leaderboard = leaderboard_view(reader, _after_point(data, points).ref)
    return data


def latest_change(points: list[CommitPoint], gate_of: Callable[[str, str], GateResult], reader: StoreReader,
                  allow_incomparable: bool = False) -> tuple[GateResult | None, list[str]]:
    """The default diff page: ``kbase.gate`` of the newest pair of consecutive drawn commits whose gate shows a
    change (``shows_change``), looking back over at most ``CHANGE_WALK`` pairs; pairs that hold the same captures
    (the same files with the same windows) are passed over unread, and so are pairs across a GPU/window change
    (their gate says INCOMPARABLE) unless ``allow_incomparable``. None of them differing: the latest pair. With
    notes saying which pair the page shows and why."""
    from kbase.enums import GateStatus
    from kbase.errors import KbaseError

    def captures(p: CommitPoint) -> set[tuple[str, str]]:
        return {(b.source_sha256, b.window_spec) for b in (reader.baseline(i) for i in p.ref.baseline_ids)}

    latest: GateResult | None = None
    passed: list[str] = []
    for i in range(len(points) - 1, max(len(points) - 1 - CHANGE_WALK, 0), -1):
        a, b = points[i - 1], points[i]
        label = f"{a.ref.commit[:12]} -> {b.ref.commit[:12]}"
        if a.ref.fingerprint != b.ref.fingerprint and not allow_incomparable:
            passed.append(f"{label} (GPU model/count or window changed)")
            continue
        if captures(a) == captures(b):
            passed.append(f"{label} (the same capture(s) at both commits)")
            continue
        try:
            result = gate_of(a.ref.commit, b.ref.commit)
        except KbaseError as exc:
            passed.append(f"{label} (kbase gate says: {exc.message})")
            continue
        if result.verdict.status == GateStatus.INCOMPARABLE and not allow_incomparable:
            passed.append(f"{label} (incomparable)")
            continue
        latest = latest or result
        if shows_change(result):
            if not passed and i == len(points) - 1:
                return result, []
            return result, [f"diff page: {label}, the latest pair of commits whose gate shows a change; newer pairs "
                            f"passed over: {'; '.join(passed)}"]
        passed.append(f"{label} (no change)")
    if latest is None:
        try:
            latest = gate_of(points[-2].ref.commit, points[-1].ref.commit)
        except KbaseError as exc:
            return None, [f"no diff page: kbase gate {points[-2].ref.commit[:12]} {points[-1].ref.commit[:12]} says: "
                          f"{exc.message}"]
    return latest, [f"diff page: none of the {len(passed)} newest pair(s) of commits shows a change; it shows the "
                    "latest comparable pair"]


def shows_change(result: GateResult) -> bool:
    """Whether a gate's page shows a change: a verdict other than a plain PASS, a kernel or op the diff flags
    (regressed, below the gate floor, improved, new, gone), or a judged change of the step time (busy share)."""
    from kbase.enums import KernelClass

    v = result.verdict
    if v.code != 0 or v.failing or v.warnings or v.accepted or _flagged(result):
        return True
    changed = {KernelClass.REGRESSED, KernelClass.REGRESSED_BELOW_FLOOR, KernelClass.IMPROVED, KernelClass.NEW,
               KernelClass.GONE}
    ops = result.comparison.result.ops
    if ops is not None and any(c in changed for c in ops.table["class"].tolist()):
        return True
    budget = result.comparison.result.budget
    judged = [j for j in ((budget.step, budget.busy) if budget is not None else ()) if j is not None]
    return any(j.regressed or j.improved for j in judged)


def _side(value: int | str, flag: str, points: list[CommitPoint]) -> str:
    """What ``kbase.gate`` is given for one side of the diff page: the commit at a position of the drawn history
    (``-2``), else the revision or ``@ID`` as written (the gate resolves it, or says why not)."""
    from kbase.errors import InputError

    if isinstance(value, str) and not POSITION.fullmatch(value.strip()):
        if not value.strip():
            raise InputError("empty revision", field=flag, value=value)
        return value.strip()
    pos, n = int(value), len(points)
    if not -n <= pos < n:
        raise InputError(f"no commit at position {pos} of the {n} in this history (or give a git revision or "
                         "@ID)", field=flag, value=value)
    return points[pos].ref.commit


def _after_point(data: ReportData, points: list[CommitPoint]) -> CommitPoint:
    """The drawn commit whose leaderboard the report shows: the diff page's after side when drawn, else the newest."""
    after = data.gate.comparison.after.commit if data.gate is not None else None
    return next((p for p in points if p.ref.commit == after), points[-1])


def step_diffs(data: ReportData, limit: int, gate_of: Callable[[str, str], GateResult]) -> list[StepDiff]:
    """A diff page for each of the ``limit`` largest detected steps (``data.steps``, largest effect first):
    ``kbase.gate`` of the step's commits — the last at the old level and the first at the new one (a creep:
    at its last level). Several kernels stepping at one pair share its page; the diff page's own pair is not
    computed twice."""
    from kbase.errors import KbaseError
    from kbase.render.report.model import StepDiff

    main = data.gate
    main_pair = (main.comparison.before.commit, main.comparison.after.commit) if main is not None else None
    pages: dict[tuple[str, str], StepDiff] = {}
    for i, s in enumerate(data.steps):
        pair = (s.from_commit, s.to_commit)
        if pair not in pages and len(pages) >= limit:
            continue
        if pair not in pages:
            page = "diff.html" if pair == main_pair else f"diff-{pair[0][:12]}-{pair[1][:12]}.html"
            try:
                result, note = (main if pair == main_pair else gate_of(*pair)), ""
            except KbaseError as exc:
                result, note = None, f"kbase gate {pair[0][:12]} {pair[1][:12]} says: {exc.message}"
            pages[pair] = StepDiff(before=pair[0], after=pair[1], page=page, gate=result, note=note)
        pages[pair].labels.append(s.label)
        data.steps[i] = dataclasses.replace(s, page=pages[pair].page)
    return [d for d in pages.values() if d.page != "diff.html"]


def _history_notes(points: list[CommitPoint]) -> list[str]:
    notes = []
    if len({p.ref.fingerprint for p in points}) > 1:
        notes.append("the GPU model/count or window changed within this history: dotted lines mark where (no step "
                     "or diff is measured across such a change)")
    if len({p.unit for p in points}) > 1:
        notes.append("some captures have no iteration marker: those points are per window-second")
    return notes


def _flagged(result: GateResult | None) -> list[str]:
    """The kernels the diff flags (regressed, below the gate floor, improved, new, gone, swapped), in the diff's order
    (regressions first, then by effect on the iteration)."""
    from kbase.enums import KernelClass

    if result is None:
        return []
    flagged = {KernelClass.REGRESSED, KernelClass.REGRESSED_BELOW_FLOOR, KernelClass.IMPROVED, KernelClass.NEW,
               KernelClass.GONE, KernelClass.SWAPPED}
    table = result.comparison.result.table
    names = [n for n, c in zip(table["name"].tolist(), table["class"].tolist()) if c in flagged]
    return names[:FLAGGED_KERNELS]


def step_markers(found: StepsReport, points: list[CommitPoint]) -> list[StepMarker]:
    """``kbase steps``' steps (and creeps, at their first step) as markers at the first commit of each new
    level; a step whose commit the drawn history does not hold is not drawn."""
    from kbase.render.report.model import StepMarker

    where = {p.ref.commit: i for i, p in enumerate(points)}
    return [StepMarker(index=where[s.first_commit], kernel=s.name, delta_pct=100.0 * s.rel,
                       label=f"{s.kind} {s.rel:+.1%}: {s.short_name}", kind=s.kind, short_name=s.short_name,
                       from_commit=s.from_commit, to_commit=s.to_commit, effect=s.effect, before_ns=s.before_ns,
                       after_ns=s.after_ns)
            for s in found.steps if s.first_commit in where]


def report(out: Path | str, settings: Settings | None = None, *, overwrite: bool = False, **options) -> list[Path]:
    """The static HTML report of ``report_data(settings, **options)``, written into ``out``; returns the pages
    written (index first)."""
    from kbase.render.report import build_report

    return build_report(report_data(settings, **options), Path(out), overwrite=overwrite)

"""The comparison's reads besides the sides' (``comparison.resolve``): the history its noise model and ``kbase
steps`` use, and the acceptances the gate honours, from git and the store, into ``inputs`` values. What is read is
decided here (how many past baselines, which levels); what they mean is computed in ``comparison.history`` and
``comparison.gate``, which read nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.comparison.history import HistoryNoise, StepsInputs, StepsReport
from kbase.comparison.inputs import HistoryInputs, Resolved, SideInputs
from kbase.comparison.setups import setup_groups
from kbase.errors import InputError

if TYPE_CHECKING:
    from kbase.policy import Policy
    from kbase.store.read.reader import StoreReader
    from kbase.store.schema.records import AcceptanceRecord, BaselineRecord


def first_parent_line(repo: Path | None, commit: str | None, depth: int) -> list[str] | None:
    """The first-parent line ending at ``commit`` (nearest first), or None without a repository."""
    from kbase.gitrepo import first_parents, open_repo

    if commit is None:
        return None
    try:
        return first_parents(open_repo(repo), commit, limit=depth)
    except Exception:  # noqa: BLE001 - no repository or an unknown commit: fall back to creation order
        return None


def read_history(reader: StoreReader, policy: Policy, repo: Path | None, first: SideInputs, second: SideInputs,
                 line_ref: str | None = None) -> HistoryInputs | None:
    """The last ``history_baselines`` comparable baselines on the first-parent line of ``line_ref`` (the base
    branch: ``--base-ref`` or ``history_ref``) or else of the before side (the after side's own baselines left
    out), and their levels when at least ``min_history`` exist. None without a stored before side."""
    if not first.baselines:
        return None
    newest = max(first.baselines, key=lambda b: b.id or 0)
    return _history(reader, policy, repo, newest, first.commit, set(second.baseline_ids), line_ref)


def noise_from_history(reader: StoreReader, policy: Policy, repo: Path | None, first: Resolved, second: Resolved,
                       line_ref: str | None = None) -> tuple[HistoryNoise | None, list[str]]:
    """``history.noise_of`` the history ``read_history`` reads, for two sides already pooled."""
    from kbase.comparison.history import noise_of

    if not first.baseline_ids:
        return None, []
    newest = reader.baseline(max(first.baseline_ids))
    history = _history(reader, policy, repo, newest, first.commit, set(second.baseline_ids), line_ref)
    return noise_of(history, first.side, policy)


def _history(reader: StoreReader, policy: Policy, repo: Path | None, newest: BaselineRecord, line_start: str | None,
             after_ids: set[int], line_ref: str | None) -> HistoryInputs:
    """``read_history`` of the before side whose newest baseline is ``newest``, its line starting at ``line_start``."""
    notes: list[str] = []
    depth = 10 * policy.history_baselines
    commits = first_parent_line(repo, line_ref, depth) if line_ref else None
    where = f"{line_ref}'s first-parent line"
    if line_ref and commits is None:
        notes.append(f"history noise: {line_ref} is not a revision of this repository; the before side's line instead")
    if commits is None:
        commits = first_parent_line(repo, line_start, depth)
        where = "the before side's first-parent line" if commits is not None else "creation order (no repository)"
    # only baselines aligned as the newest is: one without iteration markers stores no per-iteration
    # level (NULL), which must not count as a level of 0 in an aligned kernel's spread
    past = tuple(b for b in reader.line_baselines(newest.workload, fingerprint=newest.fingerprint, commits=commits,
                                                  before_id=None if commits else newest.id,
                                                  limit=policy.history_baselines)
                 if b.id not in after_ids and b.aligned == newest.aligned)
    found = HistoryInputs(past=past, where=where, aligned=bool(newest.aligned), notes=tuple(notes))
    if len(past) < policy.min_history:
        return found
    ids = [b.id for b in past if b.id is not None]
    if not newest.aligned:
        from kbase.store.read.blob_reads import run_levels

        name_ids, totals, counts = run_levels(reader.rows_in("level_blobs", {}, "ids", ids), ids)
        names = reader.names(name_ids.tolist())
        return HistoryInputs(past=past, where=where, aligned=False, names=tuple(names[int(i)][0] for i in name_ids),
                             levels=totals, counts=counts, notes=tuple(notes))
    names_, _, levels = reader.level_matrix(ids)
    op_ids = [b.id for b in past if b.id is not None and b.aligned and b.iterations_used]
    op_rows = tuple(reader.op_levels(op_ids)) if op_ids else ()
    return HistoryInputs(past=past, where=where, aligned=True, names=tuple(names_), levels=levels, op_rows=op_rows,
                         notes=tuple(notes))


def read_acceptances(reader: StoreReader, repo: Path | None, workload: str | None, before_commit: str | None,
                     after_commit: str | None, today: date | None = None) -> tuple[AcceptanceRecord, ...]:
    """The acceptances of ``workload`` in force: not expired on ``today`` and made at a commit in
    ``(before, after]`` (none without an after commit: a profile or a bare ``@ID`` range has no commits)."""
    from kbase.comparison.gate import active_acceptances

    if not after_commit:
        return ()
    stored = reader.list_acceptances(workload)
    in_range = _range_check(repo, before_commit, after_commit, {a.commit for a in stored})
    return tuple(active_acceptances(stored, today=today, in_range=in_range))


def _range_check(repo: Path | None, before_commit: str | None, after_commit: str,
                 commits: set[str]) -> Callable[[str], bool]:
    """An acceptance applies when its commit lies in (before, after]: ``commits`` (the acceptances') placed
    with one ``git rev-list``, else one commit at a time."""
    from kbase.gitrepo import commits_in_range, open_repo

    if not commits:
        return lambda c: False
    try:
        r = open_repo(repo)
    except InputError:
        return lambda c: c == after_commit
    inside = commits_in_range(r, after_commit, before_commit, commits)
    if inside is not None:
        return lambda c: c.lower() in inside or c == after_commit

    def in_range(c: str) -> bool:
        try:
            if not r.is_ancestor(c, after_commit):
                return False
            return before_commit is None or not r.is_ancestor(c, before_commit)
        except Exception:  # noqa: BLE001 - unknown commit in a shallow clone: exact match only
            return c == after_commit

    return in_range


def read_steps(reader: StoreReader, workload: str, repo: Path | None, *, last: int, rev: str) -> StepsInputs:
    """The last ``last`` baselines of ``workload`` on the first-parent line ending at ``rev`` (creation order
    without a repository) and, per setup group of those with iteration markers, their kernels' levels: what
    ``history.steps_of`` finds the steps in."""
    import numpy as np

    notes: list[str] = []
    commits = first_parent_line(repo, rev, 10 * last)
    if commits is None:
        notes.append("no git repository: baselines in creation order")
    points = reader.line_points(workload, commits=commits, limit=last)
    aligned = [b for b in points if b.aligned]
    groups = []
    for group in setup_groups(aligned):
        line_bs = tuple(aligned[i] for i in group)
        ids = [b.id for b in line_bs if b.id is not None]
        names, shorts, levels = reader.level_matrix(ids) if ids else ([], [], np.zeros((0, 0)))
        groups.append((line_bs, list(names), list(shorts), levels))
    return StepsInputs(workload=workload, points=tuple(points), groups=tuple(groups), notes=tuple(notes))


def steps_report(reader: StoreReader, workload: str, repo: Path | None, *, last: int, rev: str) -> StepsReport:
    """``read_steps``, then ``history.steps_of``: the steps of every kernel along the line."""
    from kbase.comparison.history import steps_of

    return steps_of(read_steps(reader, workload, repo, last=last, rev=rev))

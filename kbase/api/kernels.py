"""Front door, kernels over history: one kernel over the stored baselines, kernel lookup, steps."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbase.comparison.result import KernelHistory
from kbase.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Iterator

    from kbase.comparison.changepoints import KernelStep
    from kbase.comparison.history import StepsReport
    from kbase.gitrepo import CommitNote
    from kbase.store.engine import Store
    from kbase.store.read.reader import StoreReader

from kbase.api.common import _store, workload_for


def find_kernel(query: str, settings: Settings | None = None, *, workload: str | None = None,
                store: Store | None = None) -> tuple[str, str]:
    """The stored kernel a person's ``query`` names — exact, short name, ``#id``, family, substring or
    regex (``analysis.lookup``): (full name, short name); ``KernelNotFound`` (with suggestions) or
    ``AmbiguousKernel`` (with the candidates) otherwise."""
    from kbase.analysis.lookup import find_kernel as lookup

    settings = settings or Settings.load()
    with _store(settings, store, readonly=True) as st:
        names, shorts = st.reader.kernel_names(workload)
    k = lookup(query, names, shorts)
    return k.name, k.short


def history(kernel: str, settings: Settings | None = None, *, workload: str | None = None,
            branch: str | None = None, all_workloads: bool = False, store: Store | None = None) -> KernelHistory:
    """One kernel (any name ``find_kernel`` accepts) across the stored baselines of a workload (``workload``,
    else the one the settings mean: ``workload_for``; ``all_workloads``: every one), oldest first (of
    ``branch`` when given). Each row carries its commit's ``subject`` and ``commit_date`` (from git when the
    repository has the commit, else the date stored with the baseline)."""
    settings = settings or Settings.load()

    def read(rd: StoreReader) -> KernelHistory:
        from kbase.analysis.lookup import find_kernel as lookup

        chosen = None if all_workloads else workload_for(settings, rd, workload)
        if kernel in BUDGET_SERIES:
            rows = budget_history_rows(rd, kernel, chosen, branch)
            _describe_commits(rows, settings)
            return KernelHistory(query=kernel, name=kernel, short_name=BUDGET_SERIES[kernel], rows=rows,
                                 workload=chosen, branch=branch)
        names, shorts = rd.kernel_names(chosen)
        k = lookup(kernel, names, shorts)
        rows = rd.kernel_history_rows(k.name, chosen, branch)
        _describe_commits(rows, settings)
        return KernelHistory(query=kernel, name=k.name, short_name=k.short, rows=rows, workload=chosen,
                             branch=branch)

    with _store(settings, store, readonly=True) as st:
        return read(st.reader)


# ``kbase history (step)`` / ``(idle)``: the GPU time budget's step time per iteration and idle per iteration per
# GPU across baselines (``Baseline.step_ns`` / ``idle_ns``), in the rows a kernel's history has
BUDGET_SERIES = {"(step)": "step time per iteration", "(idle)": "GPU idle per iteration per GPU"}


def budget_history_rows(rd: StoreReader, series: str, workload: str | None, branch: str | None) -> list[dict]:
    attr = "step_ns" if series == "(step)" else "idle_ns"
    rows = []
    for b in reversed(rd.list_baselines(workload, branch, limit=0)):  # oldest first
        v = getattr(b, attr, None)
        if v is None:
            continue
        rows.append({"id": b.id, "commit": b.commit, "created_at": b.created_at, "workload": b.workload,
                     "branch": b.branch, "commit_date": b.commit_date, "count": int(b.iterations_used),
                     "total_ns": float(v) * max(int(b.iterations_used), 1), "avg_ns": float(v),
                     "per_iter_ns": float(v), "share_window": None, "fingerprint": b.fingerprint,
                     "aligned": bool(b.aligned), "gpu_models": b.gpu_models, "gpu_count": b.gpu_count,
                     "window_spec": b.window_spec})
    return rows


def steps(settings: Settings | None = None, *, workload: str | None = None, last: int = 50, rev: str = "HEAD",
          store: Store | None = None) -> StepsReport:
    """Step changes (and creeps) of every kernel over the last ``last`` baselines of a workload on the
    first-parent line ending at ``rev``, largest effect on the iteration first."""
    from kbase.comparison.reads import steps_report

    settings = settings or Settings.load()

    def run(reader: StoreReader) -> StepsReport:
        chosen = workload_for(settings, reader, workload)
        found = steps_report(reader, chosen, settings.repo, last=last, rev=rev)
        commits = {c for s in found.steps for c in (s.from_commit, s.first_commit, s.to_commit)}
        found.commit_notes = commit_notes(settings.repo, {chosen: commits}, reader)
        return found

    with _store(settings, store, readonly=True) as st:
        return run(st.reader)


def commit_notes(repo: Path | None, commits: dict[str, set[str]], reader: StoreReader) -> dict[str, CommitNote]:
    """Subject and date of each commit (``commits``: per workload): from git when the repository has it, else
    the date stored with the workload's baselines at that commit (no subject: a commit made in another clone)."""
    from kbase.gitrepo import CommitNote, describe_commits

    notes = describe_commits(repo, sorted(set().union(*commits.values())))
    for workload, wanted in commits.items():
        unknown = sorted(c for c in wanted if c not in notes)
        for c, bs in (reader.baselines_at(workload, unknown) if unknown else {}).items():
            notes[c] = CommitNote(subject="", date=next((b.commit_date for b in bs if b.commit_date), None))
    return notes


def _describe_commits(rows: list[dict[str, Any]], settings: Settings) -> None:
    """Add ``subject`` to each history row and set its ``commit_date`` from git when the repository has the
    commit; else the row keeps the date stored with its baseline (no subject: made in another clone)."""
    from kbase.gitrepo import describe_commits

    notes = describe_commits(settings.repo, _sorted_commits(rows)) if rows else {}
    if not notes:  # (outside a repository: 10,000 rows at a time)
        for r in rows:
            r["subject"] = ""
        return
    for r in rows:
        note = notes.get(r["commit"])
        r["subject"] = note.subject if note else ""
        if note:
            r["commit_date"] = note.date


def _sorted_commits(rows: list[dict[str, Any]]) -> Iterator[str]:
    """The rows' commits, sorted, when first asked for: ``describe_commits`` asks only inside a repository."""
    yield from sorted({r["commit"] for r in rows})


def history_steps(h: KernelHistory) -> list[KernelStep] | None:
    """Steps and creeps in one kernel's history, within each setup (``comparison.setups``: as ``kbase steps``
    finds them, never across a GPU or window change); None when its baselines span several workloads or
    branches (a step is a change along one line of commits: pass ``workload`` and ``branch``)."""
    from kbase.comparison.changepoints import kernel_history_steps
    from kbase.comparison.setups import setup_groups

    if len({r["workload"] for r in h.rows}) > 1 or len({r["branch"] for r in h.rows}) > 1:
        return None
    found: list[KernelStep] = []
    for group in setup_groups(h.rows):
        rows = [h.rows[i] for i in group]
        found += kernel_history_steps([r["per_iter_ns"] for r in rows], [str(r["commit"]) for r in rows])
    return found

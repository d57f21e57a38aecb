"""Build a :class:`~kbase.render.report.model.ReportData` from a store (SQLAlchemy Core, read only).

Kept apart from the HTML so the query layer can change without touching the renderer::

    from kbase.store import open_store
    from kbase.render.report.data import load_report
    from kbase.render.report.site import build_report

    engine, _ = open_store("sqlite:///.kbase/kbase.db")
    data = load_report(engine, "train-8gpu", branch="main", subjects_from=Path("."))
    build_report(data, Path("kbase-report"))

Queries (three, whatever the size of the store): the workload's baselines; the kernel rows of up to
``SAMPLE_COMMITS`` evenly spaced commits, to pick the top kernels (a kernel that was large at any time
in the history counts, not only at HEAD); the rows of those top kernels over every baseline (the
``ix_baseline_kernel_history`` index serves it). Repeat captures at one commit are pooled as
``kbase diff`` pools them: only those with the fingerprint of the newest one, times summed over
their iterations x GPUs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from kbase.errors import InputError, NoBaselineError
from kbase.render.report.model import (
    CommitPoint,
    CommitRef,
    KernelSeries,
    LeaderboardRow,
    LeaderboardView,
    ReportData,
    StepMarker,
)

SAMPLE_COMMITS = 16
TOP_KERNELS = 25
BAND_PERCENTILES = (10.0, 90.0)

StepFinder = Callable[[ReportData], list[StepMarker]]


def _tables():
    from kbase.store.models import BASELINE, BASELINE_KERNEL, KERNEL_NAME

    return BASELINE, BASELINE_KERNEL, KERNEL_NAME


def _iso(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:  # SQLite hands back naive datetimes; kbase stores UTC
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat()
    return str(value)


def workloads(engine) -> list[str]:
    """Workload names in the store, sorted."""
    from sqlalchemy import select

    bt, _, _ = _tables()
    with engine.connect() as conn:
        return sorted(r[0] for r in conn.execute(select(bt.c.workload).distinct()))


def _pick_workload(engine, workload: str | None) -> str:
    if workload:
        return workload
    names = workloads(engine)
    if len(names) == 1:
        return names[0]
    if not names:
        raise NoBaselineError("the store holds no baselines: run kbase snapshot first")
    raise InputError(f"the store holds {len(names)} workloads ({', '.join(names[:8])}): choose one with --name")


def _commit_points(engine, workload: str, branch: str | None, commit_order: Sequence[str] | None,
                   subjects: Mapping[str, str], limit: int | None) -> list[CommitPoint]:
    from sqlalchemy import select

    bt, _, _ = _tables()
    q = (select(bt.c.id, bt.c.commit, bt.c.commit_date, bt.c.created_at, bt.c.branch, bt.c.fingerprint,
                bt.c.gpu_count, bt.c.aligned, bt.c.iterations_used, bt.c.window_ns, bt.c.total_kernel_ns,
                bt.c.compute_ns, bt.c.communication_ns, bt.c.memory_ns)
         .where(bt.c.workload == workload).order_by(bt.c.created_at, bt.c.id))
    if branch:
        q = q.where(bt.c.branch == branch)
    with engine.connect() as conn:
        rows = conn.execute(q).all()
    by_commit: dict[str, list] = {}
    for r in rows:
        by_commit.setdefault(r.commit, []).append(r)
    if commit_order is not None:
        order = [c for c in dict.fromkeys(commit_order) if c in by_commit]
    else:  # commit date, else the first capture's time; ties by the first baseline id
        order = sorted(by_commit, key=lambda c: (_iso(by_commit[c][0].commit_date) or _iso(by_commit[c][0].created_at)
                                                 or "", by_commit[c][0].id))
    if limit:
        order = order[-limit:]
    points = []
    for c in order:
        group = by_commit[c]
        newest = group[-1]
        pooled = [r for r in group if r.fingerprint == newest.fingerprint]
        aligned = bool(newest.aligned)
        units = [float(r.iterations_used) if aligned else r.window_ns / 1e9 for r in pooled]
        gpu_units = sum(u * max(int(r.gpu_count), 1) for u, r in zip(units, pooled))
        n_units = sum(units)

        def per(col: str, pooled=pooled, gpu_units=gpu_units) -> float:
            return sum(float(getattr(r, col)) for r in pooled) / gpu_units if gpu_units else float("nan")

        ref = CommitRef(commit=c, date=_iso(newest.commit_date) or _iso(group[0].created_at),
                        subject=subjects.get(c, ""), branch=newest.branch or "",
                        baseline_ids=tuple(int(r.id) for r in pooled), fingerprint=newest.fingerprint)
        points.append(CommitPoint(
            ref=ref, gpus=int(newest.gpu_count), units=n_units, unit="iteration" if aligned else "window-second",
            kernel_ns=per("total_kernel_ns"), compute_ns=per("compute_ns"), communication_ns=per("communication_ns"),
            memory_ns=per("memory_ns"),
            wall_ns=sum(float(r.window_ns) for r in pooled) / n_units if n_units else float("nan")))
    return points


def _top_kernel_ids(engine, points: list[CommitPoint], top: int, include: Sequence[str]) -> list[int]:
    """Ids of the ``top`` kernels by their largest time per iteration in sampled commits, plus ``include``."""
    from sqlalchemy import select

    from kbase.store.codec import name_hash

    _, bk, kn = _tables()
    picks = np.unique(np.linspace(0, len(points) - 1, min(SAMPLE_COMMITS, len(points))).round().astype(int))
    sample_ids = [b for i in picks for b in points[i].ref.baseline_ids]
    best: dict[int, float] = {}
    with engine.connect() as conn:
        q = select(bk.c.name_id, bk.c.per_iter_ns).where(bk.c.baseline_id.in_(sample_ids))
        for name_id, per_iter in (conn.execute(q) if top > 0 else ()):
            v = float(per_iter or 0.0)
            if v > best.get(name_id, -1.0):
                best[name_id] = v
        extra = []
        if include:
            hashes = [name_hash(n) for n in include]
            extra = [r[0] for r in conn.execute(select(kn.c.id).where(kn.c.name_hash.in_(hashes)))]
    ranked = sorted(best, key=lambda i: (-best[i], i))[:top]
    return list(dict.fromkeys(ranked + extra))


def _band(idx: np.ndarray, blobs: list, gpus: np.ndarray, n: int) -> tuple[list[float | None], list[float | None]]:
    """Per-commit 10th/90th percentiles of one kernel's per-iteration time per GPU.

    ``idx``: commit index per row; ``blobs``: float32 samples summed over GPUs; ``gpus``: per row.
    Commits with one capture are done as one matrix per sample count (a Python loop per commit cost
    seconds at 10,000 commits); pooled repeat captures are concatenated one commit at a time.
    """
    low = np.full(n, np.nan)
    high = np.full(n, np.nan)
    rows_per_commit = np.bincount(idx, minlength=n)
    lengths = np.fromiter((len(b) if b else 0 for b in blobs), dtype=np.int64, count=len(blobs))
    single = (rows_per_commit[idx] == 1) & (lengths > 0)
    for width in np.unique(lengths[single]):
        sel = np.flatnonzero(single & (lengths == width))
        mat = np.frombuffer(b"".join(blobs[i] for i in sel), dtype="<f4").reshape(len(sel), -1)
        lo, hi = np.percentile(mat / np.maximum(gpus[sel], 1)[:, None], BAND_PERCENTILES, axis=1)
        low[idx[sel]], high[idx[sel]] = lo, hi
    for c in np.flatnonzero(rows_per_commit > 1):
        sel = np.flatnonzero((idx == c) & (lengths > 0))
        if len(sel):
            pooled = np.concatenate([np.frombuffer(blobs[i], dtype="<f4") / max(gpus[i], 1) for i in sel])
            low[c], high[c] = np.percentile(pooled, BAND_PERCENTILES)
    return _opt(low), _opt(high)


def _kernel_series(engine, workload: str, points: list[CommitPoint], ids: list[int], bands: bool) -> list[KernelSeries]:
    from sqlalchemy import select

    bt, bk, kn = _tables()
    n = len(points)
    where: dict[int, int] = {}  # baseline id -> commit index (pooled captures only)
    gpu_units = np.zeros(n)
    aligned = np.zeros(n, bool)
    for i, p in enumerate(points):
        for b in p.ref.baseline_ids:
            where[b] = i
        gpu_units[i] = p.units * max(p.gpus, 1)
        aligned[i] = p.unit == "iteration"
    with engine.connect() as conn:
        names = {r.id: r for r in conn.execute(select(kn.c.id, kn.c.name, kn.c.short_name, kn.c.category, kn.c.tc)
                                               .where(kn.c.id.in_(ids)))}
        cols = [bk.c.baseline_id, bk.c.name_id, bk.c.count, bk.c.total_ns, bt.c.gpu_count]
        if bands:
            cols.append(bk.c.iter_ns)
        q = select(*cols).join(bt, bt.c.id == bk.c.baseline_id).where(bk.c.name_id.in_(ids), bt.c.workload == workload)
        rows = conn.execute(q).fetchall()
    # Columns, then one bincount per quantity: a Python loop over 250,000 rows cost seconds.
    columns = list(zip(*rows)) if rows else [()] * len(cols)
    commit_idx = np.fromiter((where.get(b, -1) for b in columns[0]), dtype=np.int64, count=len(rows))
    pos = {nid: k for k, nid in enumerate(ids)}
    kernel_pos = np.fromiter((pos[nid] for nid in columns[1]), dtype=np.int64, count=len(rows))
    keep = commit_idx >= 0
    flat = kernel_pos[keep] * n + commit_idx[keep]
    size = len(ids) * n
    count = np.bincount(flat, weights=np.asarray(columns[2], float)[keep], minlength=size).reshape(len(ids), n)
    total = np.bincount(flat, weights=np.asarray(columns[3], float)[keep], minlength=size).reshape(len(ids), n)
    seen = np.bincount(flat, minlength=size).reshape(len(ids), n) > 0
    gpus = np.asarray(columns[4], dtype=np.int64)
    out = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for k, nid in enumerate(ids):
            if nid not in names:
                continue
            per_iter = np.where(seen[k], total[k] / gpu_units, np.nan)
            launches = np.where(seen[k], count[k] / gpu_units, np.nan)
            per_launch = np.where(seen[k] & (count[k] > 0), total[k] / count[k], np.nan)
            if bands:
                sel = np.flatnonzero(keep & (kernel_pos == k))
                sel = sel[aligned[commit_idx[sel]]]  # per-window-second captures have no iteration samples
                low, high = _band(commit_idx[sel], [columns[5][i] for i in sel], gpus[sel], n)
            else:
                low, high = [None] * n, [None] * n
            info = names[nid]
            out.append(KernelSeries(name=info.name, short_name=info.short_name, category=info.category, tc=info.tc,
                                    per_iter_ns=_opt(per_iter), launches_per_iter=_opt(launches),
                                    ns_per_launch=_opt(per_launch), band_low_ns=low, band_high_ns=high))
    out.sort(key=lambda s: -max((v for v in s.per_iter_ns if v is not None), default=0.0))
    return out


def _opt(values: np.ndarray) -> list[float | None]:
    """Floats with NaN (and infinities) as None; one vectorised test, then a plain list."""
    finite = np.isfinite(values).tolist()
    return [v if ok else None for v, ok in zip(values.tolist(), finite)]


def git_subjects(repo_path: Path, commits: Sequence[str]) -> dict[str, str]:
    """First line of each commit's message, for the commits the repository knows."""
    from kbase.gitrepo import open_repo

    repo = open_repo(repo_path)
    out = {}
    for c in commits:
        try:
            out[c] = repo.commit(c).summary
        except Exception:  # noqa: BLE001, S112 - a commit made elsewhere or cut by a shallow clone: no subject
            continue
    return out


def load_series(engine, workload: str | None = None, *, branch: str | None = None, top_kernels: int = TOP_KERNELS,
                include_kernels: Sequence[str] = (), commit_order: Sequence[str] | None = None,
                subjects: Mapping[str, str] | None = None, limit_commits: int | None = None,
                bands: bool = True) -> ReportData:
    """The history part of a report: one point per commit and the series of the top kernels.

    ``commit_order`` (full hashes, oldest first: e.g. ``git rev-list --first-parent --reverse HEAD``)
    fixes which commits appear and in which order; by default all commits of the workload (and
    ``branch``) by commit date. ``include_kernels`` adds kernels by full name (the
    ones a diff flagged). ``bands=False`` skips the per-iteration samples (faster on huge stores).
    """
    workload = _pick_workload(engine, workload)
    points = _commit_points(engine, workload, branch, commit_order, subjects or {}, limit_commits)
    if not points:
        where = f" on branch {branch!r}" if branch else ""
        raise InputError(f"no baselines of workload {workload!r}{where} in the store")
    ids = _top_kernel_ids(engine, points, top_kernels, include_kernels)
    kernels = _kernel_series(engine, workload, points, ids, bands)
    notes = []
    if len({p.ref.fingerprint for p in points}) > 1:
        notes.append("the GPU model/count or window changed within this history: dotted lines mark where")
    if len({p.unit for p in points}) > 1:
        notes.append("some captures have no iteration marker: those points are per window-second")
    return ReportData(workload=workload, branch=branch, commits=points, kernels=kernels, notes=notes,
                      title=f"{workload}" + (f" @ {branch}" if branch else ""),
                      generated_at=datetime.now(UTC).isoformat(timespec="seconds"))


def add_kernels(engine, data: ReportData, names: Sequence[str], bands: bool = True) -> None:
    """Add the series of kernels (full names) not yet in ``data.kernels``, e.g. the ones a diff flagged."""
    have = {k.name for k in data.kernels}
    missing = [n for n in dict.fromkeys(names) if n not in have]
    if missing:
        ids = _top_kernel_ids(engine, data.commits, 0, missing)
        data.kernels += _kernel_series(engine, data.workload, data.commits, ids, bands)


def leaderboard_view(engine, ref: CommitRef) -> LeaderboardView:
    """The leaderboard of the newest capture at ``ref``."""
    from sqlalchemy import select

    bt, bk, kn = _tables()
    baseline_id = ref.baseline_ids[-1]
    with engine.connect() as conn:
        b = conn.execute(select(bt).where(bt.c.id == baseline_id)).one()
        rows = conn.execute(
            select(kn.c.name, kn.c.short_name, kn.c.category, kn.c.tc, bk.c.per_iter_ns, bk.c.count_per_iter,
                   bk.c.avg_ns, bk.c.share_window, bk.c.share_kernel, bk.c.amdahl_ceiling, bk.c.fragmented,
                   bk.c.count, bk.c.total_ns, bk.c.min_ns, bk.c.max_ns, bk.c.median_ns)
            .join(kn, kn.c.id == bk.c.name_id).where(bk.c.baseline_id == baseline_id).order_by(bk.c.rank)).all()
    notes = _row_notes(engine, b, [dict(r._mapping) for r in rows])
    gpus = max(int(b.gpu_count), 1)
    units = float(b.iterations_used) if b.aligned else b.window_ns / 1e9
    gpu_units = units * gpus or float("nan")
    return LeaderboardView(
        baseline_id=int(b.id), ref=ref, gpus=gpus, gpu_models=b.gpu_models, iterations=int(b.iterations_used),
        aligned=bool(b.aligned), window_desc=b.window_desc, wall_ns=b.window_ns / units if units else float("nan"),
        compute_ns=b.compute_ns / gpu_units, communication_ns=b.communication_ns / gpu_units,
        memory_ns=b.memory_ns / gpu_units,
        rows=[LeaderboardRow(name=r.name, short_name=r.short_name, category=r.category, tc=r.tc,
                             per_iter_ns=r.per_iter_ns, launches_per_iter=r.count_per_iter, avg_ns=float(r.avg_ns),
                             share_window=r.share_window, share_kernel=r.share_kernel,
                             amdahl_ceiling=r.amdahl_ceiling, fragmented=bool(r.fragmented), count=int(r.count),
                             total_ns=float(r.total_ns), min_ns=float(r.min_ns), max_ns=float(r.max_ns),
                             median_ns=float(r.median_ns), tc_reason=n.tc_reason, diagnosis=n.diagnosis,
                             diagnosis_reason=n.diagnosis_reason) for r, n in zip(rows, notes)])


def _row_notes(engine, baseline, rows: list[dict]) -> list:
    """``analysis.diagnosis.annotate`` of the stored rows, as ``kbase show`` of this baseline computes it (its
    per-iteration bounds from the stored samples, read only if a row asks)."""
    from kbase.analysis.diagnosis import annotate
    from kbase.render.board import board_of
    from kbase.store.queries import load_leaderboard

    models = [m.strip() for m in str(baseline.gpu_models or "").split(",") if m.strip()]  # stored comma-separated
    bounds = (lambda: board_of(load_leaderboard(engine, int(baseline.id))).bounds()) if baseline.aligned else None
    return annotate(rows, models, bounds, int(baseline.iterations_used))


def diff_document(engine, before: CommitRef, after: CommitRef, *, policy=None, acceptances=()) -> dict:
    """The ``kbase.diff/2`` document (verdict included) between two commits of the history, computed as
    ``kbase gate`` computes it: pooled captures, ``compute_diff``, ``decide``, ``diff_doc``."""
    from kbase.api import Comparison
    from kbase.comparison.diff import compute_diff
    from kbase.comparison.gate import decide
    from kbase.comparison.resolve import Resolved, side_meta
    from kbase.comparison.side import side_from_leaderboards
    from kbase.render.diff import diff_doc
    from kbase.store.queries import get_baseline, load_leaderboard

    def side(ref: CommitRef) -> Resolved:
        bs = [get_baseline(engine, i) for i in ref.baseline_ids]
        label = ref.commit[:12]
        lbs = [load_leaderboard(engine, i) for i in ref.baseline_ids]
        return Resolved(side=side_from_leaderboards(lbs, label, side_meta(bs)), commit=ref.commit,
                        baseline_ids=list(ref.baseline_ids), label=label)

    first, second = side(before), side(after)
    result = compute_diff(first.side, second.side, policy)
    return diff_doc(Comparison(result=result, before=first, after=second), decide(result, acceptances))


def load_report(engine, workload: str | None = None, *, branch: str | None = None, subjects_from: Path | None = None,
                before: int = -2, after: int = -1, with_diff: bool = True, with_leaderboard: bool = True,
                find_steps: StepFinder | None = None, policy=None, acceptances=(), **series_options) -> ReportData:
    """A whole report: the history (``load_series``), the diff of commits ``before`` -> ``after``
    (positions in the history; the latest pair by default) and the leaderboard of ``after``.

    ``subjects_from``: a git repository to read commit subjects from. ``find_steps``: the
    change-point detector (called with the loaded data; none by default, so no step is drawn).
    """
    data = load_series(engine, workload, branch=branch, **series_options)
    if subjects_from is not None:
        subs = git_subjects(subjects_from, [p.ref.commit for p in data.commits])
        for p in data.commits:
            p.ref = replace(p.ref, subject=subs.get(p.ref.commit, p.ref.subject))
    n = len(data.commits)
    if with_diff and n >= 2:
        data.diff = diff_document(engine, data.commits[before].ref, data.commits[after].ref, policy=policy,
                                  acceptances=acceptances)
        add_kernels(engine, data, [k["name"] for k in data.diff["kernels"]
                                   if k["class"] in ("regressed", "improved", "new", "gone")][:10],
                    bands=series_options.get("bands", True))
    if with_leaderboard:
        data.leaderboard = leaderboard_view(engine, data.commits[after if n >= 2 else -1].ref)
    if find_steps is not None:
        data.steps = find_steps(data)
    return data

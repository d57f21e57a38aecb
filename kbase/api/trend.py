"""The report's history, built from the store's rows (``reader.StoreReader``'s trend reads): one point per
commit, the series of the top kernels, and one baseline's leaderboard — the parts of ``ReportData`` that
are drawn from the store as it is (the diff and the steps come from ``kbase.gate`` and ``kbase.steps``).

Reads (four, whatever the size of the store; the fourth, each baseline's stored GPU time budget, in
``report_budget``): the workload's baselines; the kernel levels of up to
``SAMPLE_COMMITS`` evenly spaced commits, to pick the top kernels (a kernel that was large at any time in
the history counts, not only at HEAD); those top kernels' figures and samples over every baseline (each
baseline's ``levels`` and ``samples`` blobs). Repeat captures at one commit are pooled as ``kbase diff``
pools them: only those with the fingerprint of the newest one, times summed over their iterations x GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kbase.errors import InputError
from kbase.render.report.model import (
    CommitPoint,
    CommitRef,
    KernelSeries,
    LeaderboardRow,
    LeaderboardView,
    OpKernelRow,
    OpRow,
)

if TYPE_CHECKING:
    from kbase.store.read.reader import StoreReader
    from kbase.store.schema.records import BaselineRecord

SAMPLE_COMMITS = 16
TOP_KERNELS = 25
BAND_PERCENTILES = (10.0, 90.0)


def iso(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:  # SQLite hands back naive datetimes; kbase stores UTC
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat()
    return str(value)


def commit_points(reader: StoreReader, workload: str, branch: str | None, subjects: Mapping[str, str],
                  limit: int | None) -> list[CommitPoint]:
    """One point per commit of the workload (and ``branch``), by commit date (else the first capture's time;
    ties by the first baseline id), the newest ``limit``."""
    by_commit: dict[str, list[dict[str, Any]]] = {}
    for r in reader.trend_baselines(workload, branch):
        by_commit.setdefault(r["commit"], []).append(r)
    order = sorted(by_commit, key=lambda c: (iso(by_commit[c][0]["commit_date"]) or iso(by_commit[c][0]["created_at"])
                                             or "", by_commit[c][0]["id"]))
    if limit:
        order = order[-limit:]
    points = []
    for c in order:
        group = by_commit[c]
        newest = group[-1]
        pooled = [r for r in group if r["fingerprint"] == newest["fingerprint"]]
        aligned = bool(newest["aligned"])
        units = [float(r["iterations_used"]) if aligned else r["window_ns"] / 1e9 for r in pooled]
        gpu_units = sum(u * max(int(r["gpu_count"]), 1) for u, r in zip(units, pooled))
        n_units = sum(units)

        def per(col: str, pooled=pooled, gpu_units=gpu_units) -> float:
            return sum(float(r[col]) for r in pooled) / gpu_units if gpu_units else float("nan")

        ref = CommitRef(commit=c, date=iso(newest["commit_date"]) or iso(group[0]["created_at"]),
                        subject=subjects.get(c, ""), branch=newest["branch"] or "",
                        baseline_ids=tuple(int(r["id"]) for r in pooled), fingerprint=newest["fingerprint"],
                        bisect=all(r["kind"] == "bisect" for r in pooled))
        points.append(CommitPoint(
            ref=ref, gpus=int(newest["gpu_count"]), units=n_units, unit="iteration" if aligned else "window-second",
            kernel_ns=per("total_kernel_ns"), compute_ns=per("compute_ns"), communication_ns=per("communication_ns"),
            memory_ns=per("memory_ns"),
            wall_ns=sum(float(r["window_ns"]) for r in pooled) / n_units if n_units else float("nan")))
    return points


def top_kernel_ids(reader: StoreReader, points: list[CommitPoint], top: int, include: Sequence[str]) -> list[int]:
    """Ids of the ``top`` kernels by their largest time per iteration in sampled commits, plus ``include``."""
    picks = np.unique(np.linspace(0, len(points) - 1, min(SAMPLE_COMMITS, len(points))).round().astype(int))
    sample_ids = [b for i in picks for b in points[i].ref.baseline_ids]
    best: dict[int, float] = {}
    for name_id, per_iter in (reader.kernel_levels(sample_ids) if top > 0 else ()):
        v = float(per_iter or 0.0)
        if v > best.get(name_id, -1.0):
            best[name_id] = v
    extra = reader.name_ids(include) if include else []
    ranked = sorted(best, key=lambda i: (-best[i], i))[:top]
    return list(dict.fromkeys(ranked + extra))


def _band(idx: np.ndarray, samples: list, gpus: np.ndarray, n: int) -> tuple[list[float | None], list[float | None]]:
    """Per-commit 10th/90th percentiles of one kernel's per-iteration time per GPU.

    ``idx``: commit index per row; ``samples``: ns per iteration key summed over GPUs (None: not stored);
    ``gpus``: per row.
    Commits with one capture are done as one matrix per sample count (a Python loop per commit cost
    seconds at 10,000 commits); pooled repeat captures are concatenated one commit at a time.
    """
    low = np.full(n, np.nan)
    high = np.full(n, np.nan)
    rows_per_commit = np.bincount(idx, minlength=n)
    lengths = np.fromiter((0 if s is None else len(s) for s in samples), dtype=np.int64, count=len(samples))
    single = (rows_per_commit[idx] == 1) & (lengths > 0)
    for width in np.unique(lengths[single]):
        sel = np.flatnonzero(single & (lengths == width))
        mat = np.stack([samples[i] for i in sel])
        lo, hi = np.percentile(mat / np.maximum(gpus[sel], 1)[:, None], BAND_PERCENTILES, axis=1)
        low[idx[sel]], high[idx[sel]] = lo, hi
    for c in np.flatnonzero(rows_per_commit > 1):
        sel = np.flatnonzero((idx == c) & (lengths > 0))
        if len(sel):
            pooled = np.concatenate([samples[i] / max(gpus[i], 1) for i in sel])
            low[c], high[c] = np.percentile(pooled, BAND_PERCENTILES)
    return _opt(low), _opt(high)


def kernel_series(reader: StoreReader, points: list[CommitPoint], ids: list[int]) -> list[KernelSeries]:
    """The series of kernels ``ids`` over ``points``, largest first."""
    n = len(points)
    where: dict[int, int] = {}  # baseline id -> commit index (pooled captures only)
    gpu_units = np.zeros(n)
    aligned = np.zeros(n, bool)
    for i, p in enumerate(points):
        for b in p.ref.baseline_ids:
            where[b] = i
        gpu_units[i] = p.units * max(p.gpus, 1)
        aligned[i] = p.unit == "iteration"
    names = {r[0]: r for r in reader.names_by_id(ids)}
    columns, samples = reader.kernel_series(ids, sorted(where))
    # Columns, then one bincount per quantity: a Python loop over 250,000 rows cost seconds.
    rows = len(columns["baseline_id"])
    commit_idx = np.fromiter((where.get(b, -1) for b in columns["baseline_id"].tolist()), dtype=np.int64, count=rows)
    pos = {nid: k for k, nid in enumerate(ids)}
    kernel_pos = np.fromiter((pos[nid] for nid in columns["name_id"].tolist()), dtype=np.int64, count=rows)
    keep = commit_idx >= 0
    flat = kernel_pos[keep] * n + commit_idx[keep]
    size = len(ids) * n
    count = np.bincount(flat, weights=columns["count"].astype(float)[keep], minlength=size).reshape(len(ids), n)
    total = np.bincount(flat, weights=columns["total_ns"].astype(float)[keep], minlength=size).reshape(len(ids), n)
    seen = np.bincount(flat, minlength=size).reshape(len(ids), n) > 0
    gpus = columns["gpu_count"]
    out = []
    with np.errstate(divide="ignore", invalid="ignore"):
        for k, nid in enumerate(ids):
            if nid not in names:
                continue
            per_iter = np.where(seen[k], total[k] / gpu_units, np.nan)
            launches = np.where(seen[k], count[k] / gpu_units, np.nan)
            per_launch = np.where(seen[k] & (count[k] > 0), total[k] / count[k], np.nan)
            sel = np.flatnonzero(keep & (kernel_pos == k))
            sel = sel[aligned[commit_idx[sel]]]  # per-window-second captures have no iteration samples
            low, high = _band(commit_idx[sel], [samples[i] for i in sel], gpus[sel], n)
            _, name, short, category, tc, _family = names[nid]
            out.append(KernelSeries(name=name, short_name=short, category=category, tc=tc,
                                    per_iter_ns=_opt(per_iter), launches_per_iter=_opt(launches),
                                    ns_per_launch=_opt(per_launch), band_low_ns=low, band_high_ns=high))
    out.sort(key=lambda s: -max((v for v in s.per_iter_ns if v is not None), default=0.0))
    return out


def _opt(values: np.ndarray) -> list[float | None]:
    """Floats with NaN (and infinities) as None; one vectorised test, then a plain list."""
    finite = np.isfinite(values).tolist()
    return [v if ok else None for v, ok in zip(values.tolist(), finite)]


def git_subjects(repo_path: Path | None, commits: Sequence[str]) -> dict[str, str]:
    """First line of each commit's message, for the commits the repository knows (none without one)."""
    from kbase.gitrepo import open_repo

    try:
        repo = open_repo(repo_path)
    except InputError:
        return {}
    out = {}
    for c in commits:
        try:
            out[c] = repo.commit(c).summary
        except Exception:  # noqa: BLE001, S112 - a commit made elsewhere or cut by a shallow clone: no subject
            continue
    return out


def leaderboard_view(reader: StoreReader, ref: CommitRef) -> LeaderboardView:
    """The leaderboard of the newest capture at ``ref``, with each row's tensor-core reason and diagnosis as
    ``kbase show`` of that baseline computes them (``analysis.diagnosis.annotate``; the per-iteration bounds
    from the stored samples, read only if a row asks)."""
    from kbase.analysis.diagnosis import annotate
    from kbase.api.report_budget import budget_view
    from kbase.store.codec.codec import stored_summary

    baseline_id = ref.baseline_ids[-1]
    b = reader.baseline(baseline_id)
    gpus = max(int(b.gpu_count), 1)
    units = float(b.iterations_used) if b.aligned else b.window_ns / 1e9
    gpu_units = units * gpus or float("nan")
    columns = ("name", "short_name", "category", "tc", "per_iter_ns", "count_per_iter", "avg_ns", "share_window",
               "share_kernel", "amdahl_ceiling", "fragmented", "count", "total_ns", "min_ns", "max_ns", "median_ns")
    rows = [dict(zip(columns, r)) for r in reader.leaderboard_view(baseline_id)]
    models = [m.strip() for m in str(b.gpu_models or "").split(",") if m.strip()]  # stored comma-separated
    bounds = (lambda: reader.leaderboard(b).bounds()) if b.aligned else None
    notes = annotate(rows, models, bounds, int(b.iterations_used))
    return LeaderboardView(
        baseline_id=baseline_id, ref=ref, gpus=gpus, gpu_models=b.gpu_models, iterations=int(b.iterations_used),
        aligned=bool(b.aligned), window_desc=b.window_desc, wall_ns=b.window_ns / units if units else float("nan"),
        compute_ns=b.compute_ns / gpu_units, communication_ns=b.communication_ns / gpu_units,
        memory_ns=b.memory_ns / gpu_units,
        rows=[LeaderboardRow(name=r["name"], short_name=r["short_name"], category=r["category"], tc=r["tc"],
                             per_iter_ns=r["per_iter_ns"], launches_per_iter=r["count_per_iter"],
                             avg_ns=float(r["avg_ns"]), share_window=r["share_window"],
                             share_kernel=r["share_kernel"], amdahl_ceiling=r["amdahl_ceiling"],
                             fragmented=bool(r["fragmented"]), count=int(r["count"]), total_ns=float(r["total_ns"]),
                             min_ns=float(r["min_ns"]), max_ns=float(r["max_ns"]), median_ns=float(r["median_ns"]),
                             tc_reason=n.tc_reason, diagnosis=n.diagnosis, diagnosis_reason=n.diagnosis_reason)
              for r, n in zip(rows, notes)],
        ops=op_view(reader, b, {r["name"]: r["short_name"] for r in rows}),
        budget=budget_view(stored_summary(b)[0].budget))


def op_view(reader: StoreReader, b: BaselineRecord, short_names: dict[str, str]) -> list[OpRow] | None:
    """Baseline ``b``'s leaderboard grouped by op (``analysis.ops.op_board``), None when it stores no ops."""
    import math

    from kbase.analysis.ops import op_board
    from kbase.store.codec.codec import stored_summary

    assert b.id is not None
    t = reader.kernel_table(b.id)
    names = reader.names(t.name_id.tolist())
    pairs = reader.op_pairs(b.id, t, [names[i][0] for i in t.name_id.tolist()]) if len(t) else None
    if pairs is None:
        return None

    def num(x: float) -> float | None:
        return x if math.isfinite(x) else None

    return [OpRow(op=r["op"], per_iter_ns=num(r["per_iter_ns"]), launches_per_iter=num(r["count_per_iter"]),
                  share_window=num(r["share_window"]), share_kernel=num(r["share_kernel"]),
                  kernels=[OpKernelRow(name=k["name"], short_name=k["short_name"], per_iter_ns=num(k["per_iter_ns"]),
                                       launches_per_iter=num(k["count_per_iter"]), share_op=num(k["share_op"]))
                           for k in r["kernel_rows"]])
            for r in op_board(pairs, stored_summary(b)[0], short_names)]

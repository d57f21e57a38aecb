"""One side of a comparison: one or more leaderboards (repeat captures at one commit) pooled.

Everything is per unit per GPU, where a unit is an iteration when every pooled window is
iteration-aligned, else one second of window: a kernel's time per unit, its launches per unit, its
time per launch, and its per-iteration samples (one column per iteration of every pooled capture).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from kbase.comparison import sketch

if TYPE_CHECKING:
    from kbase.analysis.leaderboard import Leaderboard


class Unit(StrEnum):
    ITERATION = "iteration"
    WINDOW_SECOND = "window-second"  # a side without iteration markers


@dataclass(frozen=True)
class SideMeta:
    """What a side measured and where it came from (the comparability facts)."""

    workload: str | None = None
    gpu_models: str | None = None  # comma-separated, sorted
    gpu_count: int | None = None
    window_spec: str | None = None  # WindowSpec.key()
    commit: str | None = None
    baselines: tuple[int, ...] = ()


@dataclass(frozen=True)
class KernelTotals:
    """Kernel time per unit per GPU, by category."""

    kernel: float
    compute: float
    communication: float
    memory: float


@dataclass
class Side:
    label: str
    kernels: pd.DataFrame  # index: name; KERNEL_COLUMNS
    samples: np.ndarray  # (kernels, iterations) ns per iteration per GPU, rows in ``kernels`` order
    unit: Unit
    n_units: float
    n_gpus: int
    unit_wall_ns: float  # wall time of one unit on one GPU (iteration time)
    totals: KernelTotals
    total_samples: np.ndarray  # kernel time per iteration per GPU, one value per iteration
    aligned: bool
    step_wall_ns: float | None
    meta: SideMeta = field(default_factory=SideMeta)
    # launch sketches (kernels, CHUNKS, WIDTH), NaN rows where no capture had one (older baselines)
    sketches: np.ndarray | None = None
    levels: np.ndarray | None = None  # (kernels, captures) ns per unit per GPU of each pooled capture
    resolution_ns: float = 0.0  # timer resolution of the durations (1000: microsecond timestamps)

    @property
    def n_samples(self) -> int:
        return int(self.samples.shape[1])


KERNEL_COLUMNS = ["short_name", "family", "category", "tc", "gpus", "count", "total_ns", "avg_ns", "std_ns",
                  "per_unit_ns", "count_per_unit"]
_TEXT = ["short_name", "family", "category", "tc"]


def _sample_matrix(lb: Leaderboard, keys: list[int], gpus: int) -> tuple[pd.Index, np.ndarray]:
    """(names, names x keys matrix of ns per iteration per GPU) of one leaderboard's samples."""
    s = lb.samples
    pos = pd.Index(keys)
    if not keys or not len(s):
        return pd.Index([], dtype=object), np.zeros((0, len(keys)))
    col = pos.get_indexer(pd.Index(s["iteration"]))
    keep = col >= 0
    codes, names = _factorize_runs(s["name"].to_numpy(dtype=object)[keep])
    mat = np.zeros((len(names), len(keys)))
    mat[codes, col[keep]] = s["total_ns"].to_numpy()[keep] / gpus
    return pd.Index(names, dtype=object), mat


def _factorize_runs(names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize`` of sample names, which leaderboards and the store give grouped (each kernel's
    iterations in one run; its repeats are one object): runs found by adjacent comparison, which
    short-cuts on identity, instead of hashing 200,000 long strings (~35 ms). Any other order:
    ``pd.factorize``."""
    if not len(names):
        return np.zeros(0, dtype=np.intp), names
    starts = np.flatnonzero(np.concatenate(([True], names[1:] != names[:-1])))
    uniq = names[starts]
    listed = uniq.tolist()
    if len(set(listed)) < len(listed) or not all(isinstance(n, str) for n in listed):  # not grouped, or missing
        codes, found = pd.factorize(names)
        return codes, np.asarray(found, dtype=object)
    return np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(names)))), uniq


def side_from_leaderboards(lbs: list[Leaderboard], label: str, meta: SideMeta | None = None) -> Side:
    """Pool leaderboards: launches, totals and squared sums add up; samples line up side by side (a
    kernel absent from one capture ran zero ns in each of that capture's iterations)."""
    aligned = bool(lbs) and all(lb.summary.aligned for lb in lbs)
    parts, matrices, level_parts = [], [], []
    sketch_parts: list[dict[str, np.ndarray]] = []
    n_units = gpu_units = wall = 0.0
    totals = np.zeros(4)
    for lb in lbs:
        s = lb.summary
        gpus = max(int(s.gpus), 1)
        keys = [int(k) for k in s.iteration_keys] if aligned else []
        units = len(keys) if aligned else s.window_ns / 1e9
        n_units += units
        gpu_units += units * gpus
        wall += s.window_ns
        totals += [s.total_kernel_ns, s.compute_ns, s.communication_ns, s.memory_ns]
        t = lb.table
        n, mean, std = t["count"].to_numpy(float), t["avg_ns"].to_numpy(float), t["std_ns"].to_numpy(float)
        parts.append(pd.DataFrame({
            "name": t["name"].astype(object).to_numpy(), **{c: t[c].astype(object).to_numpy() for c in _TEXT},
            "gpus": t["gpus"].to_numpy(), "count": n, "total_ns": t["total_ns"].to_numpy(float),
            "sumsq": (n - 1) * std * std + n * mean * mean,  # Σx² of this part, from its mean and std
        }))
        if keys:
            matrices.append(_sample_matrix(lb, keys, gpus))
        elif not aligned and lb.sketches:
            matrices.append(_chunk_matrix(lb, gpus, s.window_ns))
        level_parts.append((t["name"].astype(object).to_numpy(), t["total_ns"].to_numpy(float) / (units * gpus)
                            if units else np.full(len(t), np.nan)))
        sketch_parts.append(lb.sketches)
    if parts:
        allk = pd.concat(parts, ignore_index=True)
        g = allk.groupby("name", sort=False)
        k = g[_TEXT].first().join(g[["count", "total_ns", "sumsq"]].sum()).join(g["gpus"].max())
    else:
        k = pd.DataFrame(columns=[*_TEXT, "count", "total_ns", "sumsq", "gpus"])
    n = k["count"].to_numpy(float)
    mean = np.divide(k["total_ns"].to_numpy(float), n, out=np.zeros(len(k)), where=n > 0)
    var = np.divide(k["sumsq"].to_numpy(float) - n * mean * mean, n - 1, out=np.zeros(len(k)), where=n > 1)
    k = k.assign(count=n.astype(np.int64), avg_ns=mean, std_ns=np.sqrt(np.maximum(var, 0.0)),
                 per_unit_ns=k["total_ns"] / gpu_units if gpu_units else np.nan,
                 count_per_unit=n / gpu_units if gpu_units else np.nan)
    k.index = pd.Index(k.index, dtype=object, name="name")
    k = k[KERNEL_COLUMNS]
    cols = [_rows_for(k.index, names, m) for names, m in matrices]
    samples = np.hstack(cols) if cols else np.zeros((len(k), 0))
    return Side(
        label=label, kernels=k, samples=samples, unit=Unit.ITERATION if aligned else Unit.WINDOW_SECOND,
        n_units=n_units, n_gpus=int(lbs[0].summary.gpus) if lbs else 0,
        unit_wall_ns=wall / n_units if n_units else np.nan,
        totals=KernelTotals(*(totals / gpu_units if gpu_units else np.full(4, np.nan))),
        total_samples=np.concatenate([m.sum(axis=0) for _, m in matrices]) if matrices else np.empty(0),
        aligned=aligned, step_wall_ns=_mean_step_wall(lbs), meta=meta or SideMeta(),
        sketches=_pooled_sketches(k.index, sketch_parts), levels=_levels(k.index, level_parts),
        resolution_ns=_resolution(sketch_parts),
    )


def _chunk_matrix(lb: Leaderboard, gpus: int, window_ns: float) -> tuple[pd.Index, np.ndarray]:
    """Without iteration markers: each kernel's launch-order chunk totals (from its sketch) as samples,
    ns per window-second per GPU (a chunk covers about 1/CHUNKS of the window)."""
    names = pd.Index(list(lb.sketches), dtype=object)
    per = window_ns / 1e9 / sketch.CHUNKS * gpus
    mat = np.stack([lb.sketches[n][:, sketch.TOTAL] for n in names]) / per if len(names) else np.zeros((0, 0))
    return names, mat


def _pooled_sketches(index: pd.Index, parts: list[dict[str, np.ndarray]]) -> np.ndarray | None:
    if not parts or not all(parts):
        return None
    out = np.full((len(index), sketch.CHUNKS, sketch.WIDTH), np.nan)
    for i, name in enumerate(index):
        have = [p[name] for p in parts if name in p]
        if have:
            out[i] = have[0] if len(have) == 1 else sketch.pool(have)
    return out


def _levels(index: pd.Index, parts: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    out = np.zeros((len(index), len(parts)))
    for j, (names, values) in enumerate(parts):
        where = pd.Index(names, dtype=object).get_indexer(index)
        out[where >= 0, j] = values[where[where >= 0]]
    return out


def _resolution(parts: list[dict[str, np.ndarray]]) -> float:
    """1000 when every sketched duration is a whole microsecond (Kineto's µs timestamps), else 1."""
    q = [v[:, : sketch.QUANTILES] for p in parts for v in p.values()]
    if not q:
        return 0.0
    allq = np.concatenate([x[np.isfinite(x)] for x in q])
    return 1000.0 if len(allq) and not np.any(np.mod(allq, 1000.0)) else 1.0


def _rows_for(index: pd.Index, names: pd.Index, mat: np.ndarray) -> np.ndarray:
    """``mat``'s rows reordered to ``index`` (zeros for kernels this capture did not run)."""
    out = np.zeros((len(index), mat.shape[1]))
    where = names.get_indexer(index)
    have = where >= 0
    out[have] = mat[where[have]]
    return out


def _mean_step_wall(lbs: list[Leaderboard]) -> float | None:
    steps = [lb.summary.step_wall_ns for lb in lbs if lb.summary.step_wall_ns]
    return float(np.mean(steps)) if steps else None

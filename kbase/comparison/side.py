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
    col = pos.get_indexer(s["iteration"])
    keep = col >= 0
    codes, names = pd.factorize(s["name"].to_numpy()[keep])
    mat = np.zeros((len(names), len(keys)))
    mat[codes, col[keep]] = s["total_ns"].to_numpy()[keep] / gpus
    return pd.Index(names, dtype=object), mat


def side_from_leaderboards(lbs: list[Leaderboard], label: str, meta: SideMeta | None = None) -> Side:
    """Pool leaderboards: launches, totals and squared sums add up; samples line up side by side (a
    kernel absent from one capture ran zero ns in each of that capture's iterations)."""
    aligned = bool(lbs) and all(lb.summary.aligned for lb in lbs)
    parts, matrices = [], []
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
    )


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

"""One side of a comparison: one or more captures (repeat captures at one commit) pooled.

Everything is per unit per GPU, where a unit is an iteration when every pooled window is
iteration-aligned, else one second of window: a kernel's time per unit, its launches per unit, its
time per launch, and its per-iteration samples (one column per iteration of every pooled capture).

A capture comes from a computed ``Leaderboard`` (``capture_of_leaderboard``) or straight from a
baseline's stored rows (``store.codec.capture_from_rows``); pooling and the side are numpy only, so a
diff of stored baselines never imports pandas (~0.3 s of a command's start).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from kbase.comparison import sketch

if TYPE_CHECKING:
    import pandas as pd

    from kbase.analysis.leaderboard import Leaderboard
    from kbase.analysis.summary import LeaderboardSummary


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


KERNEL_COLUMNS = ["short_name", "family", "category", "tc", "gpus", "count", "total_ns", "avg_ns", "std_ns",
                  "per_unit_ns", "count_per_unit"]
_TEXT = ["short_name", "family", "category", "tc"]


@dataclass(frozen=True)
class KernelTable:
    """A side's per-kernel columns (``KERNEL_COLUMNS``) as arrays, one row per kernel of ``index`` (full
    names, object array)."""

    index: np.ndarray
    columns: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, column: str) -> np.ndarray:
        return self.columns[column]

    @cached_property
    def _rows(self) -> dict[str, int]:
        return {name: i for i, name in enumerate(self.index.tolist())}

    def positions(self, names: Iterable[object]) -> np.ndarray:
        """Each name's row, -1 where this side has no such kernel."""
        rows = self._rows
        return np.fromiter((rows.get(n, -1) if isinstance(n, str) else -1 for n in names), dtype=np.intp)

    def to_frame(self) -> pd.DataFrame:
        """The table as a DataFrame indexed by name (for the Python API; the comparison reads the arrays)."""
        import pandas as pd

        return pd.DataFrame({c: self.columns[c] for c in KERNEL_COLUMNS},
                            index=pd.Index(self.index, dtype=object, name="name"))


@dataclass
class Side:
    label: str
    kernels: KernelTable
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


@dataclass
class Capture:
    """One capture's per-kernel figures, as a side pools them (rows in the leaderboard's order)."""

    summary: LeaderboardSummary
    names: np.ndarray  # object: full names
    text: dict[str, np.ndarray]  # _TEXT columns (object)
    gpus: np.ndarray
    count: np.ndarray  # float
    total_ns: np.ndarray
    avg_ns: np.ndarray
    std_ns: np.ndarray
    # (names, summary.iteration_keys): ns per iteration summed over GPUs, 0 where a kernel had no launch
    iter_ns: np.ndarray
    sketches: dict[str, np.ndarray] = field(default_factory=dict)  # name -> launch sketch


def capture_of_leaderboard(lb: Leaderboard) -> Capture:
    """A computed (or stored, pandas-loaded) Leaderboard as a ``Capture``."""
    names = np.asarray(lb.column("name"), dtype=object)
    keys = [int(k) for k in lb.summary.iteration_keys]
    iter_ns = np.zeros((len(names), len(keys)))
    s_names = lb.sample_column("name")
    if keys and len(s_names):
        col_of = {k: i for i, k in enumerate(keys)}
        row_of = {n: i for i, n in enumerate(names.tolist())}
        col = np.fromiter((col_of.get(k, -1) for k in lb.sample_column("iteration").tolist()), dtype=np.int64)
        row = np.fromiter((row_of.get(n, -1) for n in s_names.tolist()), dtype=np.int64)
        keep = (col >= 0) & (row >= 0)
        iter_ns[row[keep], col[keep]] = np.asarray(lb.sample_column("total_ns"), dtype=float)[keep]

    def num(c: str) -> np.ndarray:
        return np.asarray(lb.column(c), dtype=float)

    return Capture(summary=lb.summary, names=names, text={c: np.asarray(lb.column(c), dtype=object) for c in _TEXT},
                   gpus=np.asarray(lb.column("gpus")), count=num("count"), total_ns=num("total_ns"),
                   avg_ns=num("avg_ns"), std_ns=num("std_ns"), iter_ns=iter_ns, sketches=lb.sketches)


def side_from_leaderboards(lbs: list[Leaderboard], label: str, meta: SideMeta | None = None) -> Side:
    return side_from_captures([capture_of_leaderboard(lb) for lb in lbs], label, meta)


def side_from_captures(caps: list[Capture], label: str, meta: SideMeta | None = None) -> Side:
    """Pool captures: launches, totals and squared sums add up; samples line up side by side (a
    kernel absent from one capture ran zero ns in each of that capture's iterations)."""
    aligned = bool(caps) and all(c.summary.aligned for c in caps)
    rows: dict[str, int] = {}
    where = []
    for c in caps:  # kernels in order of first appearance
        where.append(np.fromiter((rows.setdefault(n, len(rows)) for n in c.names.tolist()), dtype=np.intp,
                                 count=len(c.names)))
    k = len(rows)
    index = np.empty(k, dtype=object)
    index[:] = list(rows)
    text = {col: np.full(k, np.nan, dtype=object) for col in _TEXT}
    count, total, sumsq = np.zeros(k), np.zeros(k), np.zeros(k)
    gpus_max = np.zeros(k, dtype=np.int64)
    matrices: list[np.ndarray] = []  # per capture: (k, its iterations)
    total_parts: list[np.ndarray] = []
    level = np.zeros((k, len(caps)))
    n_units = gpu_units = wall = 0.0
    totals = np.zeros(4)
    for c, pos in zip(reversed(caps), reversed(where)):  # reversed: the first capture's text wins
        for col in _TEXT:
            v = c.text[col]
            have = np.fromiter((x is not None and x == x for x in v.tolist()), dtype=bool, count=len(v))
            text[col][pos[have]] = v[have]
    for j, (c, pos) in enumerate(zip(caps, where)):
        s = c.summary
        gpus = max(int(s.gpus), 1)
        units = len(s.iteration_keys) if aligned else s.window_ns / 1e9
        n_units += units
        gpu_units += units * gpus
        wall += s.window_ns
        totals += [s.total_kernel_ns, s.compute_ns, s.communication_ns, s.memory_ns]
        n, mean, std = c.count, c.avg_ns, c.std_ns
        np.add.at(count, pos, n)
        np.add.at(total, pos, c.total_ns)
        np.add.at(sumsq, pos, (n - 1) * std * std + n * mean * mean)  # Σx² of this part, from its mean and std
        np.maximum.at(gpus_max, pos, c.gpus.astype(np.int64))
        if aligned and len(s.iteration_keys):
            per_gpu = c.iter_ns / gpus
            m = np.zeros((k, per_gpu.shape[1]))
            m[pos] = per_gpu
            matrices.append(m)
            total_parts.append(per_gpu.sum(axis=0))
        elif not aligned and c.sketches:
            names, m = _chunk_matrix(c, gpus)
            full = np.zeros((k, m.shape[1]))
            full[[rows[x] for x in names]] = m
            matrices.append(full)
            total_parts.append(m.sum(axis=0))
        level[pos, j] = c.total_ns / (units * gpus) if units else np.nan
    mean = np.divide(total, count, out=np.zeros(k), where=count > 0)
    var = np.divide(sumsq - count * mean * mean, count - 1, out=np.zeros(k), where=count > 1)
    columns = {**text, "gpus": gpus_max, "count": count.astype(np.int64), "total_ns": total, "avg_ns": mean,
               "std_ns": np.sqrt(np.maximum(var, 0.0)),
               "per_unit_ns": total / gpu_units if gpu_units else np.full(k, np.nan),
               "count_per_unit": count / gpu_units if gpu_units else np.full(k, np.nan)}
    sketch_parts = [c.sketches for c in caps]
    return Side(
        label=label, kernels=KernelTable(index, columns),
        samples=np.hstack(matrices) if matrices else np.zeros((k, 0)),
        unit=Unit.ITERATION if aligned else Unit.WINDOW_SECOND,
        n_units=n_units, n_gpus=int(caps[0].summary.gpus) if caps else 0,
        unit_wall_ns=wall / n_units if n_units else np.nan,
        totals=KernelTotals(*(totals / gpu_units if gpu_units else np.full(4, np.nan))),
        total_samples=np.concatenate(total_parts) if total_parts else np.empty(0),
        aligned=aligned, step_wall_ns=_mean_step_wall(caps), meta=meta or SideMeta(),
        sketches=_pooled_sketches(index, sketch_parts), levels=level, resolution_ns=_resolution(sketch_parts),
    )


def _chunk_matrix(c: Capture, gpus: int) -> tuple[list[str], np.ndarray]:
    """Without iteration markers: each kernel's launch-order chunk totals (from its sketch) as samples,
    ns per window-second per GPU (a chunk covers about 1/CHUNKS of the window)."""
    names = list(c.sketches)
    per = c.summary.window_ns / 1e9 / sketch.CHUNKS * gpus
    mat = np.stack([c.sketches[n][:, sketch.TOTAL] for n in names]) / per if names else np.zeros((0, 0))
    return names, mat


def _pooled_sketches(index: np.ndarray, parts: list[dict[str, np.ndarray]]) -> np.ndarray | None:
    if not parts or not all(parts):
        return None
    out = np.full((len(index), sketch.CHUNKS, sketch.WIDTH), np.nan)
    for i, name in enumerate(index.tolist()):
        have = [p[name] for p in parts if name in p]
        if have:
            out[i] = have[0] if len(have) == 1 else sketch.pool(have)
    return out


def _resolution(parts: list[dict[str, np.ndarray]]) -> float:
    """1000 when every sketched duration is a whole microsecond (Kineto's µs timestamps), else 1."""
    q = [v[:, : sketch.QUANTILES] for p in parts for v in p.values()]
    if not q:
        return 0.0
    allq = np.concatenate([x[np.isfinite(x)] for x in q])
    return 1000.0 if len(allq) and not np.any(np.mod(allq, 1000.0)) else 1.0


def _mean_step_wall(caps: list[Capture]) -> float | None:
    steps = [c.summary.step_wall_ns for c in caps if c.summary.step_wall_ns]
    return float(np.mean(steps)) if steps else None

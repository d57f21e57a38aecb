"""A leaderboard as every renderer takes it: plain rows (dicts of Python scalars), the summary and the notes.

A leaderboard computed from a profile (``analysis.leaderboard.Leaderboard``, numpy columns) is turned into
rows here, at the renderers' boundary (``board_of``); a stored one is read as rows directly — the one type
every read of a stored leaderboard returns (``store.reader.StoreReader.leaderboard``) — so ``kbase show``
renders without numpy or pandas. One renderer serves both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

from kbase.analysis.summary import LeaderboardSummary
from kbase.display import Shown

if TYPE_CHECKING:
    import pandas as pd

    from kbase.analysis.leaderboard import Leaderboard

Bounds = dict[str, tuple[float, float]]


def _no_bounds() -> Bounds:
    return {}


@dataclass(repr=False)
class LeaderboardRows(Shown):  # shows itself with render.notebook's formatters
    columns: list[str]  # COLUMNS (plus "gpu" first in a per-GPU view)
    rows: list[dict[str, Any]]  # sorted by total_ns desc; NaN stays NaN (cells "-", JSON null)
    summary: LeaderboardSummary
    notes: list[str] = field(default_factory=list)
    # Per kernel: (lowest, highest) time per iteration per GPU over the window's iterations (BMF bounds);
    # a function, since only the interop formats need it and it costs a pass over the samples.
    bounds: Callable[[], Bounds] = field(default=_no_bounds, repr=False)

    @property
    def table(self) -> pd.DataFrame:
        """The rows as a DataFrame (pandas is imported here, on first use)."""
        import pandas as pd

        return pd.DataFrame(self.rows, columns=self.columns)


AnyLeaderboard = Union["Leaderboard", LeaderboardRows]


def records(table: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts of Python scalars (NaN stays NaN: cells show "-", JSON writes null)."""
    return [{str(k): v for k, v in r.items()} for r in table.to_dict("records")]


def board_of(lb: AnyLeaderboard) -> LeaderboardRows:
    """The rows of ``lb`` (a computed ``Leaderboard`` is converted; rows are returned as they are)."""
    if isinstance(lb, LeaderboardRows):
        return lb
    return LeaderboardRows(columns=lb.columns, rows=lb.records(), summary=lb.summary, notes=lb.notes,
                           bounds=lambda: sample_bounds(lb))


def sample_bounds(lb: Leaderboard) -> Bounds:
    """Per kernel: (min, max) of its time per iteration per GPU over the window's iterations."""
    names = lb.sample_column("name")
    if not len(names) or not lb.summary.aligned:
        return {}
    grouped = _grouped_bounds(names, lb.sample_column("iteration"), lb.sample_column("total_ns"), lb.summary)
    if grouped is not None:
        return grouped
    per: dict[str, dict[int, float]] = {}
    for n, it, v in zip(names.tolist(), lb.sample_column("iteration").tolist(), lb.sample_column("total_ns").tolist()):
        row = per.setdefault(n, {})
        row[it] = row.get(it, 0.0) + float(v)
    return bounds_from_samples(per, lb.summary)


def _grouped_bounds(names: Any, iterations: Any, totals: Any, summary: LeaderboardSummary) -> Bounds | None:
    """``sample_bounds`` at numpy speed for samples whose names come in runs, one run per name (a computed
    leaderboard's: ~0.1 s of Python at 1M launches otherwise); None for any other order. The sums and the
    min / max are the same float operations in the same order."""
    import numpy as np

    n = len(names)
    starts = np.concatenate(([0], np.flatnonzero(names[1:] != names[:-1]) + 1))
    run_names = names[starts].tolist()
    if len(set(run_names)) != len(run_names):
        return None
    its = np.asarray(iterations, dtype=np.int64)
    keys = np.asarray([int(k) for k in summary.iteration_keys] or sorted(set(its.tolist())), dtype=np.int64)
    if not len(keys):
        return {}
    pos = np.minimum(np.searchsorted(keys, its), len(keys) - 1)
    inside = keys[pos] == its
    run = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))
    sums = np.bincount(run[inside] * len(keys) + pos[inside], weights=np.asarray(totals, dtype=np.float64)[inside],
                       minlength=len(starts) * len(keys)).reshape(len(starts), len(keys))
    gpus = max(int(summary.gpus or 1), 1)
    lo, hi = sums.min(axis=1).tolist(), sums.max(axis=1).tolist()
    order = sorted(range(len(run_names)), key=run_names.__getitem__)
    return {run_names[i]: (lo[i] / gpus, hi[i] / gpus) for i in order}


def bounds_from_samples(samples: dict[str, dict[int, float]], summary: LeaderboardSummary) -> Bounds:
    """``sample_bounds`` of stored samples given as {name: {iteration: ns summed over GPUs}} (iterations
    with launches only): a missing iteration counts 0, as the DataFrame path's ``unstack`` fills it."""
    if not samples or not summary.aligned:
        return {}
    gpus = max(int(summary.gpus or 1), 1)
    keys = [int(k) for k in summary.iteration_keys] or sorted({it for per in samples.values() for it in per})
    out: Bounds = {}
    for name in sorted(samples):  # groupby's order
        per = samples[name]
        values = [per.get(k, 0.0) for k in keys]
        if values:
            out[name] = (float(min(values)) / gpus, float(max(values)) / gpus)
    return out

"""One capture's per-kernel figures as a comparison pools them (``comparison.side``): built from a
computed ``Leaderboard`` here, or straight from a baseline's stored kernel table (``store.codec.capture_from_table``)
without pandas. It lives below the store because the store builds it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kbase.analysis.leaderboard import Leaderboard
    from kbase.analysis.op_pairs import OpPairs
    from kbase.analysis.summary import LeaderboardSummary

CAPTURE_TEXT = ["short_name", "family", "category", "tc"]  # the text columns a capture carries per kernel


@dataclass
class Capture:
    """One capture's per-kernel figures, as a side pools them (rows in the leaderboard's order)."""

    summary: LeaderboardSummary
    names: np.ndarray  # object: full names
    text: dict[str, np.ndarray]  # CAPTURE_TEXT columns (object)
    gpus: np.ndarray
    count: np.ndarray  # float
    total_ns: np.ndarray
    avg_ns: np.ndarray
    std_ns: np.ndarray
    # (names, summary.iteration_keys): ns per iteration summed over GPUs, 0 where a kernel had no launch
    iter_ns: np.ndarray
    sketches: dict[str, np.ndarray] = field(default_factory=dict)  # name -> launch sketch
    ops: OpPairs | None = None  # each kernel's launches and time by op (None: no op information)


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

    text = {c: np.asarray(lb.column(c), dtype=object) for c in CAPTURE_TEXT}
    return Capture(summary=lb.summary, names=names, text=text,
                   gpus=np.asarray(lb.column("gpus")), count=num("count"), total_ns=num("total_ns"),
                   avg_ns=num("avg_ns"), std_ns=num("std_ns"), iter_ns=iter_ns, sketches=lb.sketches,
                   ops=lb.ops)

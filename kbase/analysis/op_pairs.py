"""A leaderboard's kernel time by op, as (op, kernel) pairs: what ``analysis.ops`` computes from a capture's ranges
and what the store gives back (``store.codec.codec.op_pairs_of``). Apart from ``analysis.ops`` so that a stored
diff or gate reading it back loads neither the op attribution nor the profile readers it builds on (~15 ms)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from kbase.analysis.sparse import SparseRows


@dataclass
class OpPairs:
    """A leaderboard's (op, kernel) pairs: each kernel's launches and time split by the op that launched them
    (summed over GPUs). ``op``: code into ``names`` (-1: launched by no op); ``iter_ns``: (pairs, the window's
    iterations) ns per iteration, held sparse (``analysis.sparse``: the (pair, iteration) cells that occur; no
    columns in a window without iterations)."""

    names: np.ndarray  # object: op keys
    bare: np.ndarray  # object: op without scope, per key
    op: np.ndarray  # int32 per pair
    kernel: np.ndarray  # object: full kernel name per pair
    count: np.ndarray  # int64
    total_ns: np.ndarray  # float64
    iter_ns: SparseRows  # (pairs, iterations)

    def __len__(self) -> int:
        return len(self.op)

    def op_of(self, pair: int) -> str | None:
        code = int(self.op[pair])
        return None if code < 0 else str(self.names[code])

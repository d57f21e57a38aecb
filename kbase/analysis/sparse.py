"""Per-iteration samples held sparse: a (rows, iterations) matrix of ns of which only the cells that occur are
kept, in row-major order, so that it costs the (row, iteration) cells that occur and never rows x iterations.

Op attribution's (op, kernel) pairs x iterations (``analysis.ops.op_pairs``), the store's ``ops`` blob
(``store.op_blobs``) and the diff's op samples (``comparison.side``) hold theirs this way: a trace with a
hundred thousand ops over ten thousand iterations, each op in a few of them, costs its launches, not the
8 GB of its dense matrix. What needs rows as dense arrays (the statistics over every iteration, zeros
included) reads them a bounded block at a time (``blocks``).

Sums are taken in the order the cells come (``np.bincount``), so a sparse sum of rows equals the dense
``np.add.at`` / ``sum(axis=0)`` it replaces bit for bit; row sums over iterations go through dense blocks
for the same reason (numpy's pairwise summation along a row).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

BLOCK_CELLS = 1 << 20  # cells of one dense block (8 MiB of float64)


@dataclass(frozen=True)
class SparseRows:
    """A (rows, columns) float64 matrix by its stored cells: ``row`` non-decreasing, ``col`` increasing within
    a row, one cell per (row, col); every other cell is 0 (a stored cell may hold 0 too: the matrix is the
    same)."""

    shape: tuple[int, int]
    row: np.ndarray  # int64
    col: np.ndarray  # int64
    value: np.ndarray  # float64

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def nnz(self) -> int:
        return len(self.value)

    @property
    def nbytes(self) -> int:
        return self.row.nbytes + self.col.nbytes + self.value.nbytes

    # ------------------------------------------------------------------ making one

    @staticmethod
    def empty(n_rows: int, n_cols: int) -> SparseRows:
        return SparseRows((int(n_rows), int(n_cols)), np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0))

    @staticmethod
    def from_dense(m: np.ndarray) -> SparseRows:
        m = np.asarray(m, dtype=np.float64)
        if m.ndim != 2:
            raise ValueError(f"a sample matrix has 2 dimensions, not {m.ndim}")
        row, col = np.nonzero(m)
        return SparseRows((m.shape[0], m.shape[1]), row.astype(np.int64), col.astype(np.int64), m[row, col])

    @staticmethod
    def from_cells(row: np.ndarray, col: np.ndarray, value: np.ndarray, shape: tuple[int, int]) -> SparseRows:
        """The matrix of cells (``row``, ``col``, ``value``) in any order, the values of one cell summed in the
        order they come."""
        n_rows, n_cols = int(shape[0]), int(shape[1])
        row, col = np.asarray(row, dtype=np.int64), np.asarray(col, dtype=np.int64)
        if len(row) and (int(row.min()) < 0 or int(row.max()) >= n_rows or int(col.min()) < 0
                         or int(col.max()) >= n_cols):
            raise ValueError(f"a cell lies outside the {n_rows} x {n_cols} matrix")
        # (row, col) as one key: < n_rows * n_cols (rows and iterations are each far below 2^31)
        return SparseRows.from_keys(row * n_cols + col, value, (n_rows, n_cols))

    @staticmethod
    def from_keys(key: np.ndarray, value: np.ndarray, shape: tuple[int, int]) -> SparseRows:
        """``from_cells`` of the cells' composite keys ``row * columns + col`` (each in the matrix)."""
        n_rows, n_cols = int(shape[0]), int(shape[1])
        key = np.asarray(key, dtype=np.int64)
        value = np.asarray(value, dtype=np.float64)
        if not len(key):
            return SparseRows.empty(n_rows, n_cols)
        cells = n_rows * n_cols
        if int(key.min()) < 0 or int(key.max()) >= cells:
            raise ValueError(f"a cell lies outside the {n_rows} x {n_cols} matrix")
        if cells <= 4 * len(key) + 1024:  # a table over the cells no larger than the input: no sort
            sums = np.bincount(key, weights=value, minlength=cells)
            at = np.flatnonzero(sums)  # (a cell summing to 0 is the dense matrix's 0: left out)
            return SparseRows((n_rows, n_cols), at // n_cols, at % n_cols, sums[at])
        if len(key) == 1 or bool((key[1:] > key[:-1]).all()):  # already in order, one per cell
            return SparseRows((n_rows, n_cols), key // n_cols, key % n_cols, value)
        present, inverse = np.unique(key, return_inverse=True)
        sums = np.bincount(inverse.ravel(), weights=value, minlength=len(present))
        return SparseRows((n_rows, n_cols), present // n_cols, present % n_cols, sums)

    @staticmethod
    def concat(parts: list[SparseRows]) -> SparseRows:
        """The sum of matrices of one shape, each cell's values added in the parts' order."""
        if not parts:
            raise ValueError("no matrices to add")
        if len(parts) == 1:
            return parts[0]
        return SparseRows.from_cells(np.concatenate([p.row for p in parts]), np.concatenate([p.col for p in parts]),
                                     np.concatenate([p.value for p in parts]), parts[0].shape)

    @staticmethod
    def hstack(parts: list[SparseRows]) -> SparseRows:
        """Matrices of as many rows side by side (columns of the first, then the second's, ...)."""
        if not parts:
            raise ValueError("no matrices to join")
        offsets = np.cumsum([0] + [p.shape[1] for p in parts])
        return SparseRows.from_cells(np.concatenate([p.row for p in parts]),
                                     np.concatenate([p.col + off for p, off in zip(parts, offsets.tolist())]),
                                     np.concatenate([p.value for p in parts]), (parts[0].shape[0], int(offsets[-1])))

    # ------------------------------------------------------------------ reading it

    @cached_property
    def indptr(self) -> np.ndarray:
        """Where each row's cells start (``indptr[i]:indptr[i + 1]``); computed once per matrix (its cells do not
        change): ``take`` of a few rows, called once per kernel (the ops blob's remainders), would otherwise
        search every row each time — quadratic in kernels (200,000 kernels: hours)."""
        return np.searchsorted(self.row, np.arange(self.shape[0] + 1, dtype=np.int64))

    def dense(self) -> np.ndarray:
        out = np.zeros(self.shape)
        out[self.row, self.col] = self.value
        return out

    def block(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo:hi`` as a dense (hi - lo, columns) array."""
        a, b = np.searchsorted(self.row, [lo, hi])
        out = np.zeros((max(hi - lo, 0), self.shape[1]))
        out[self.row[a:b] - lo, self.col[a:b]] = self.value[a:b]
        return out

    def blocks(self, cells: int = BLOCK_CELLS) -> Iterator[tuple[int, int, np.ndarray]]:
        """(lo, hi, rows lo:hi dense) over every row, each block at most ``cells`` cells (one row at least)."""
        step = max(1, cells // max(self.shape[1], 1))
        for lo in range(0, self.shape[0], step):
            hi = min(lo + step, self.shape[0])
            yield lo, hi, self.block(lo, hi)

    def row_sums(self) -> np.ndarray:
        """Each row's sum over the columns, as ``dense().sum(axis=1)`` gives it (through bounded blocks)."""
        out = np.zeros(self.shape[0])
        for lo, hi, b in self.blocks():
            out[lo:hi] = b.sum(axis=1)
        return out

    def row_dense(self, i: int) -> np.ndarray:
        return self.block(i, i + 1)[0]

    # ------------------------------------------------------------------ new matrices of it

    def take(self, rows: np.ndarray) -> SparseRows:
        """The matrix of rows ``rows`` of this one, in that order (-1: a row of zeros)."""
        rows = np.asarray(rows, dtype=np.int64)
        ptr = self.indptr
        have = rows >= 0
        safe = np.where(have, rows, 0)
        start = ptr[safe]
        length = np.where(have, ptr[safe + 1] - start, 0)
        total = int(length.sum())
        ends = np.cumsum(length)
        # each cell's index in this matrix: its row's start plus its position within the row
        src = np.repeat(start - (ends - length), length) + np.arange(total, dtype=np.int64)
        return SparseRows((len(rows), self.shape[1]), np.repeat(np.arange(len(rows), dtype=np.int64), length),
                          self.col[src], self.value[src])

    def grouped(self, code: np.ndarray, n: int) -> SparseRows:
        """Rows summed into ``n`` rows, row i into row ``code[i]`` (as ``np.add.at(out, code, dense)``)."""
        code = np.asarray(code, dtype=np.int64)
        return SparseRows.from_cells(code[self.row], self.col, self.value, (n, self.shape[1]))

    def with_columns(self, where: np.ndarray, n_cols: int) -> SparseRows:
        """Column j moved to column ``where[j]`` of ``n_cols`` (-1: dropped)."""
        to = np.asarray(where, dtype=np.int64)[self.col]
        keep = to >= 0
        return SparseRows.from_cells(self.row[keep], to[keep], self.value[keep], (self.shape[0], n_cols))

    def divided(self, d: float) -> SparseRows:
        return SparseRows(self.shape, self.row, self.col, self.value / d)


def column_lookup(keys: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Iteration key -> its column among ``keys`` (sorted; every key looked up is one of them): a table where
    the keys span few numbers (step numbers run consecutively), else a search."""
    if not len(keys) or int(keys[-1]) - int(keys[0]) >= 4 * len(keys) + 1024:
        return keys.searchsorted
    first = int(keys[0])
    table = np.zeros(int(keys[-1]) - first + 1, dtype=np.int64)
    table[keys - first] = np.arange(len(keys))
    return lambda it: table[it - first]

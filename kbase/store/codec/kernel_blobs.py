"""One baseline's kernel table as the store keeps it and an export carries it, byte for byte: four
packed-column blobs (``packed``) in one row of ``baseline_kernels`` (docs/store-format.md says why each
choice, with the figures). Row i is the kernel of rank i + 1; nothing in a blob refers to the store: which
kernel name a row is (``kernel_ids``) and which op an ops pair's position is (``op_ids``) are held beside the
blobs, so the same table gives the same bytes in every store and in every export file.

- ``levels``: what history reads (``kbase history``, ``kbase steps``, history noise, the report's trend):
  each kernel's launches and total ns, exact. The mean launch, time per iteration per GPU and share of the
  window derive from them (total / count, total / the iteration x GPU count, total / the window's GPU
  time; the divisors in the header) and are computed on read; a column whose values do not derive so (a
  NULL, an older writer's rounding) is stored as float64 instead, whole: lossless.
- ``board``: the other leaderboard columns: GPUs, the median launch (2x, an integer, against 2x the rounded
  mean) and min / max (distances from the median), std as float64, the fragmented flag; launches per
  iteration, share of kernel time and the Amdahl ceiling derive (count / the iteration x GPU count, total /
  the kernel time, 1 / (1 - share of the window)), stored as float64 only where they do not.
- ``samples`` and ``sketches``: ``sample_blobs`` (unchanged since format 1).

NULL columns are NaN. Columns decode without numpy (``LevelRows``: history, ``show``); the rest with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kbase.store.codec.kernel_columns import (
    CODED,
    INT_COLUMNS,  # noqa: F401 - re-exported (its home before)
    board_columns,
    declared,
    declared_column,
    derived_columns,
    dtype_of,
    extra_columns,
    level_columns,
    stored_in,
)
from kbase.store.codec.kernel_format import FORMAT, history_values  # noqa: F401 - FORMAT re-exported (its home before)
from kbase.store.codec.mantissa import mantissa_value, row_medians
from kbase.store.codec.packed import Packed
from kbase.store.codec.packing import pack

if TYPE_CHECKING:
    import numpy as np

LEVEL_COLUMNS = level_columns()  # the columns each blob holds, as ``analysis.columns`` declares them
BOARD_COLUMNS = board_columns()
DERIVED = derived_columns()
NAN = float("nan")


@dataclass
class KernelTable:
    """One baseline's kernels in rank order, as numpy columns (NaN for NULL); ``name_id``: each row's
    ``kernel_name`` id in the store that read it (not in the blobs: ``kernel_ids``); ``iter_ns``/``iter_count``:
    (kernels, keys) or None; ``sketches``: (kernels, CHUNKS, WIDTH), NaN rows for kernels without one, or None."""

    name_id: np.ndarray
    count: np.ndarray
    total_ns: np.ndarray
    avg_ns: np.ndarray
    per_iter_ns: np.ndarray
    share_window: np.ndarray
    gpus: np.ndarray
    median_ns: np.ndarray
    min_ns: np.ndarray
    max_ns: np.ndarray
    std_ns: np.ndarray
    count_per_iter: np.ndarray
    share_kernel: np.ndarray
    amdahl_ceiling: np.ndarray
    fragmented: np.ndarray
    iter_ns: np.ndarray | None = None
    iter_count: np.ndarray | None = None
    sketches: np.ndarray | None = None
    # the stored columns ``analysis.columns`` declares beyond the hand-coded ones above (``kernel_columns``)
    extra: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.count)


@dataclass(frozen=True)
class Blobs:
    """The four stored blobs of one baseline (``baseline_kernels``' columns)."""

    levels: bytes
    board: bytes
    samples: bytes | None
    sketches: bytes | None


@dataclass(frozen=True)
class StoredTable:
    """One baseline's kernel data in store-independent terms, what the one writer (``writer.write_kernels``)
    stores and an export file carries: the blobs, the ``ops`` blob (None: no op information), the kernel of
    each row as (name, family, short name, category, tc) and the op list ((op key, op without scope) by
    position, sorted by key)."""

    blobs: Blobs
    ops: bytes | None
    names: list[tuple[str, str, str, str, str]]
    op_names: list[tuple[str, str]]


# ------------------------------------------------------------------------------------------ what derives


def _divisor(num: np.ndarray, values: np.ndarray) -> float | None:
    """The one number ``d`` with values = num / d for (almost) every row: the leaderboard's denominators
    (iterations x GPUs, the window's GPU time, the kernel time), read back from the columns themselves."""
    import numpy as np

    ok = np.isfinite(values) & (values != 0) & (num != 0)
    if not ok.any():
        return None
    d = float(row_medians((num[ok] / values[ok])[None, :])[0])
    r = round(d)
    return float(r) if r and abs(d - r) <= 1e-9 * abs(d) else d


def _ratio(num: list, d: float | None) -> list[float]:
    return [NAN] * len(num) if d is None else [v / d for v in num]


def _amdahl(shares: list[float]) -> list[float]:
    """The Amdahl ceiling of each share as the store reads it: 1/(1-p) (``analysis.amdahl``), NULL (NaN)
    where infinite; a NULL share counts as 0."""
    out = []
    for p in shares:
        p = 0.0 if p != p else p
        out.append(NAN if p >= 1 else 1.0 / (1.0 - p + 0.0))
    return out


def _mean(total: list[int], count: list[int]) -> list[float]:
    return [t / c if c else NAN for t, c in zip(total, count)]


def _same(actual: np.ndarray, derived: list[float]) -> bool:
    """Every value is what derives, bit for bit (NaN for NaN)."""
    import numpy as np

    a = np.asarray(actual, dtype=np.float64)
    d = np.asarray(derived, dtype=np.float64)
    return bool(np.array_equal(np.where(np.isnan(a), np.nan, a).view(np.uint64),
                               np.where(np.isnan(d), np.nan, d).view(np.uint64)))


def _floats(values: np.ndarray) -> tuple[np.ndarray, dict[str, bool]]:
    import numpy as np

    return np.where(np.isnan(values), np.nan, values).astype(np.float64), {"as_float": True}


# ------------------------------------------------------------------------------------------ levels, board


def encode_levels(t: KernelTable) -> bytes:
    import numpy as np

    total = t.total_ns.astype(np.int64)
    tl, cl = total.tolist(), t.count.astype(np.int64).tolist()
    d_iter, d_window = _divisor(total, t.per_iter_ns), _divisor(total, t.share_window)
    columns: dict[str, tuple[np.ndarray, dict[str, bool]]] = {"count": (t.count, {}), "total_ns": (total, {})}
    for name, derived in (("avg_ns", _mean(tl, cl)), ("per_iter_ns", _ratio(tl, d_iter)),
                          ("share_window", _ratio(tl, d_window))):
        if not _same(getattr(t, name), derived):
            columns[name] = _floats(getattr(t, name))
    columns |= extra_columns(t, "levels")
    return pack(len(t), columns, {"d_iter": d_iter, "d_window": d_window})


def _median2(median: np.ndarray) -> np.ndarray | None:
    """2 x the median launch ns as integers (medians of whole ns are whole or halves), None otherwise."""
    import numpy as np

    twice = 2.0 * median
    if not (np.isfinite(twice).all() and (np.abs(twice) < 2.0**53).all() and (twice == np.rint(twice)).all()):
        return None
    return twice.astype(np.int64)


def encode_board(t: KernelTable, levels: LevelRows) -> bytes:
    import numpy as np

    count, total = levels.column("count"), levels.column("total_ns")
    avg2 = np.array([2 * round(a) if math.isfinite(a) else 0 for a in levels.column("avg_ns")], dtype=np.int64)
    d_iter, d_kernel = levels.meta.get("d_iter"), _divisor(t.total_ns.astype(np.int64), t.share_kernel)
    columns: dict[str, tuple[np.ndarray, dict[str, bool]]] = {"gpus": (t.gpus, {})}
    twice = _median2(t.median_ns)
    if twice is None:
        columns["median_ns"] = (t.median_ns, {"as_float": True})
        mid = np.rint(np.nan_to_num(t.median_ns)).astype(np.int64)
    else:
        columns["median2"] = (twice - avg2, {})
        mid = twice >> 1
    columns |= {"min_ns": (mid - t.min_ns.astype(np.int64), {}), "max_ns": (t.max_ns.astype(np.int64) - mid, {}),
                "std_ns": (t.std_ns, {"as_float": True}), "fragmented": (t.fragmented.astype(np.int64), {})}
    for name, derived in (("count_per_iter", _ratio(count, d_iter)), ("share_kernel", _ratio(total, d_kernel)),
                          ("amdahl_ceiling", _amdahl(levels.column("share_window")))):
        if not _same(getattr(t, name), derived):
            columns[name] = _floats(getattr(t, name))
    columns |= extra_columns(t, "board")
    return pack(len(t), columns, {"d_kernel": d_kernel})


class LevelRows:
    """The ``levels`` blob (and the ``board`` blob, when given) decoded to Python lists, without numpy: what is
    stored, and what derives from it computed."""

    def __init__(self, levels: Packed, board: Packed | None = None) -> None:
        self.meta = {**levels.meta, **(board.meta if board else {})}
        self.rows = levels.rows
        self._levels, self._board = levels, board
        self._cache: dict[str, list] = {}

    def column(self, name: str) -> list:
        if name not in self._cache:
            self._cache[name] = self._decode(name)
        return self._cache[name]

    def history_row(self, i: int) -> tuple[int, int, float, float, float]:
        """(count, total_ns, avg_ns, per_iter_ns, share_window) of row ``i`` alone (``history_row``)."""
        return history_row(self._levels, i)

    def _decode(self, name: str) -> list:
        lv, bd = self._levels, self._board
        if name in ("count", "total_ns"):
            return lv.ints(name)
        if name in ("avg_ns", "per_iter_ns", "share_window"):
            if name in lv:
                return lv.floats(name)
            total = self.column("total_ns")
            if name == "avg_ns":
                return _mean(total, self.column("count"))
            return _ratio(total, self.meta.get("d_iter" if name == "per_iter_ns" else "d_window"))
        if bd is None:
            raise KeyError(f"{name}: a board column, and the board was not read")
        if name in ("count_per_iter", "share_kernel", "amdahl_ceiling") and name in bd:
            return bd.floats(name)
        if name == "count_per_iter":
            return _ratio(self.column("count"), self.meta.get("d_iter"))
        if name == "share_kernel":
            return _ratio(self.column("total_ns"), self.meta.get("d_kernel"))
        if name == "amdahl_ceiling":
            return _amdahl(self.column("share_window"))
        if name in ("gpus",):
            return bd.ints(name)
        if name == "fragmented":
            return [bool(v) for v in bd.ints(name)]
        if name == "median_ns":
            if "median_ns" in bd:
                return bd.floats("median_ns")
            avg = self.column("avg_ns")
            return [(d + (2 * round(a) if math.isfinite(a) else 0)) / 2.0 for d, a in zip(bd.ints("median2"), avg)]
        if name in ("min_ns", "max_ns"):
            mid = self._mid()
            off = bd.ints(name)
            return [m - o for m, o in zip(mid, off)] if name == "min_ns" else [m + o for m, o in zip(mid, off)]
        if name == "std_ns":
            return bd.floats(name)
        return declared_column(self, name, self._levels if stored_in(name) == "levels" else self._board)

    def _mid(self) -> list[int]:
        assert self._board is not None
        if "median2" in self._board:
            avg = self.column("avg_ns")
            return [(d + (2 * round(a) if math.isfinite(a) else 0)) >> 1
                    for d, a in zip(self._board.ints("median2"), avg)]
        return [round(m) if math.isfinite(m) else 0 for m in self._board.floats("median_ns")]


def history_row(lv: Packed, i: int) -> tuple[int, int, float, float, float]:
    """(count, total_ns, avg_ns, per_iter_ns, share_window) of row ``i`` of levels blob ``lv`` alone: ``kbase
    history`` reads one kernel of each of thousands of baselines (no ``LevelRows``: its header merge and
    column cache cost more than the row)."""
    count, total, avg, per_iter, share = history_values(lv.int_at("count", i), lv.int_at("total_ns", i), lv.meta)
    if lv.column_count > 2:  # a stored float column (not what derives): count and total_ns are always there
        if "avg_ns" in lv:
            avg = lv.floats("avg_ns")[i]
        if "per_iter_ns" in lv:
            per_iter = lv.floats("per_iter_ns")[i]
        if "share_window" in lv:
            share = lv.floats("share_window")[i]
    return count, total, avg, per_iter, share


def sample_rows(blob: bytes) -> tuple[list[list[float]], list[list[int]]]:
    """A ``samples`` blob (``sample_blobs.encode_samples``) as Python lists, without numpy (the
    per-iteration bounds of ``kbase show --format bmf``): (ns, launches) per kernel and key."""
    p = Packed(blob)
    k, n, bits = p.rows, int(p.meta["keys"]), int(p.meta["bits"])
    c_med, c_res = p.ints("count_median"), p.ints("count", k * n)
    ns_med, ns_res = p.ints("ns_median"), p.ints("ns", k * n)
    ns_rows, count_rows = [], []
    for i in range(k):
        counts = [c_med[i] + r for r in c_res[i * n : (i + 1) * n]]
        ns_rows.append([mantissa_value((ns_med[i] if c > 0 else 0) + r, bits)
                        for c, r in zip(counts, ns_res[i * n : (i + 1) * n])])
        count_rows.append(counts)
    return ns_rows, count_rows


def per_iter_array(p: Packed) -> np.ndarray:
    """Time per iteration per GPU of each row of one ``levels`` blob, with numpy: ``steps`` reads thousands."""
    import numpy as np

    if "per_iter_ns" in p:
        return p.array("per_iter_ns")
    d = p.meta.get("d_iter")
    total = p.array("total_ns")
    return total / d if d is not None else np.full(len(total), np.nan)


# ------------------------------------------------------------------------------------------ a whole table


def empty_table() -> KernelTable:
    """The kernel table of a baseline without kernels."""
    import numpy as np

    names = (*level_columns(), *board_columns())
    cols: dict[str, Any] = {c: np.zeros(0, dtype=dtype_of(c)) for c in names if c == "name_id" or c in CODED}
    return KernelTable(**cols, extra={s.name: np.zeros(0, dtype=dtype_of(s.name)) for s in declared()})


PARALLEL_SKETCH_VALUES = 1 << 14  # sketch values from which the sketches blob is coded on a second thread


def _core_idle() -> bool:
    from kbase.readers.threads import reader_threads

    return reader_threads() > 1  # (a core idle now, or KBASE_READ_THREADS=2)


def encode(t: KernelTable) -> Blobs:
    """The four blobs of a baseline's kernel table (deterministic: the same table, the same bytes; its
    ``name_id`` is not in them)."""
    from kbase.store.codec.sample_blobs import encode_samples, encode_sketches

    pool = None
    sketching = None
    if t.sketches is not None and t.sketches.size >= PARALLEL_SKETCH_VALUES and _core_idle():
        # The sketches blob (the largest) is compressed on a second thread while this one encodes the others:
        # Zstandard releases the GIL, each blob is coded alone (the same bytes), and a snapshot's last step
        # shortens on an idle core (where every core is busy it would only wait its turn).
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=1)
        sketching = pool.submit(encode_sketches, t.sketches, t.count)
    try:
        levels = encode_levels(t)
        board = encode_board(t, LevelRows(Packed(levels)))
        samples = None if t.iter_ns is None or t.iter_count is None else encode_samples(t.iter_ns, t.iter_count)
        if sketching is not None:
            sketches = sketching.result()
        else:
            sketches = None if t.sketches is None else encode_sketches(t.sketches, t.count)
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return Blobs(levels, board, samples, sketches)


def decode(blobs: Blobs, name_ids: list[int], *, samples: bool = True, sketches: bool = True) -> KernelTable:
    """A baseline's kernel table from its blobs and its rows' name ids (numpy columns; samples and sketches when
    asked and stored)."""
    import numpy as np

    from kbase.store.codec.sample_blobs import decode_samples, decode_sketches

    rows = LevelRows(Packed(blobs.levels), Packed(blobs.board))
    if len(name_ids) != rows.rows:
        raise ValueError(f"{len(name_ids)} kernel ids for {rows.rows} rows")
    cols: dict[str, Any] = {"name_id": np.asarray(name_ids, dtype=np.int64)}
    for c in (*level_columns()[1:], *board_columns()):
        if c in CODED:
            cols[c] = np.array(rows.column(c), dtype=dtype_of(c))
    t = KernelTable(**cols, extra={s.name: np.array(rows.column(s.name), dtype=dtype_of(s.name)) for s in declared()})
    if samples and blobs.samples is not None:
        t.iter_ns, t.iter_count = decode_samples(blobs.samples)
    if sketches and blobs.sketches is not None:
        t.sketches = decode_sketches(blobs.sketches, t.count)
    return t

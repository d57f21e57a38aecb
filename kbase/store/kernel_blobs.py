"""One baseline's kernel table as the store keeps it: four packed-column blobs (``packed``) in one row of
``baseline_kernels`` (docs/store-format.md says why each choice, with the figures).

- ``levels``: what history reads (``kbase history``, ``kbase steps``, history noise, the report's trend):
  each kernel's name id, launches and total ns, in rank order, and its mean launch, time per iteration
  per GPU and share of the window as float64 *residuals*: the XOR of the stored bits with a prediction
  (total / count, total / the iteration x GPU count, total / the window's GPU time, the divisors in the
  header), 0 whenever the prediction is exact (always, for a leaderboard kbase built): lossless.
- ``board``: the other leaderboard columns, lossless (GPUs, median (2x, an integer) / min / max
  launch ns as integers near the mean, std as float64, launches per iteration, share of kernel time
  and Amdahl ceiling as residuals, the fragmented flag).
- ``samples``: ns and launches per iteration key (the diff's per-iteration samples), launches exact, ns as
  *mantissa codes* with ``SAMPLE_BITS`` significant bits (relative error <= 2^-(bits+1), exact
  below 2^(bits+1) ns), coded against each kernel's median. None without iteration keys.
- ``sketches``: the launch sketches (``analysis.sketch``): quantiles as mantissa codes of ``QUANTILE_BITS``
  in the capture's timer unit (1000: every quantile a whole µs, as Kineto's; kept so), delta-coded along
  each chunk; chunk counts as residuals of the even split of the kernel's launches; chunk totals as
  codes of ``SAMPLE_BITS``. None when no kernel has one (baselines stored before 0005).

NULL columns are NaN. Columns decode in Python without numpy (``LevelRows`` for history and ``show``);
the samples and sketches, and the bulk level reads of ``steps``, decode with numpy.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kbase.store.mantissa import mantissa_value, row_medians
from kbase.store.packed import Packed, pack

if TYPE_CHECKING:
    import numpy as np

FORMAT = 1  # ``baseline_kernels.format``: this module's layout of the four blobs
LEVEL_COLUMNS = ("name_id", "count", "total_ns", "avg_ns", "per_iter_ns", "share_window")
BOARD_COLUMNS = ("gpus", "median_ns", "min_ns", "max_ns", "std_ns", "count_per_iter", "share_kernel",
                 "amdahl_ceiling", "fragmented")
NAN = float("nan")


@dataclass
class KernelTable:
    """One baseline's kernels in rank order, as numpy columns (NaN for NULL); ``iter_ns``/``iter_count``:
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

    def __len__(self) -> int:
        return len(self.name_id)


@dataclass(frozen=True)
class Blobs:
    """The four stored blobs of one baseline (``baseline_kernels``' columns)."""

    levels: bytes
    board: bytes
    samples: bytes | None
    sketches: bytes | None


# ------------------------------------------------------------------------------------------ predictions


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
    """What the store holds as the Amdahl ceiling of each share: 1/(1-p) (``analysis.amdahl``), NULL (NaN)
    where infinite; a NULL share counts as 0."""
    out = []
    for p in shares:
        p = 0.0 if p != p else p
        out.append(NAN if p >= 1 else 1.0 / (1.0 - p + 0.0))
    return out


def _bits(values: list[float]) -> list[int]:
    """IEEE 754 bits of floats, NaN as the one quiet NaN (NULL)."""
    a = array("d", [NAN if v != v else v for v in values])
    return array("Q", a.tobytes()).tolist()


def _residual(actual: np.ndarray, predicted: list[float]) -> np.ndarray:
    import numpy as np

    return np.array(_bits(actual.tolist()), dtype=np.uint64) ^ np.array(_bits(predicted), dtype=np.uint64)


def _apply(predicted: list[float], residual: list[int]) -> list[float]:
    """The stored floats from their predictions and XOR residuals (a zero residual: the prediction)."""
    if not any(residual):
        return [NAN if v != v else v for v in predicted]
    bits = [p ^ r for p, r in zip(_bits(predicted), residual)]
    return array("d", array("Q", bits).tobytes()).tolist()


# ------------------------------------------------------------------------------------------ levels, board


def encode_levels(t: KernelTable) -> bytes:
    import numpy as np

    total = t.total_ns.astype(np.int64)
    tl = total.tolist()
    d_iter, d_window = _divisor(total, t.per_iter_ns), _divisor(total, t.share_window)
    columns: dict[str, tuple[np.ndarray, dict[str, bool]]] = {
        "name_id": (t.name_id, {}),
        "count": (t.count, {}),
        "total_ns": (total, {}),  # plain: ``kbase history`` reads one value of each (delta coding saved ~5%)
        "avg_ns": (_residual(t.avg_ns, [a / c if c else NAN for a, c in zip(tl, t.count.tolist())]), {}),
        "per_iter_ns": (_residual(t.per_iter_ns, _ratio(tl, d_iter)), {}),
        "share_window": (_residual(t.share_window, _ratio(tl, d_window)), {}),
    }
    return pack(len(t), {k: (v.view(np.int64), o) for k, (v, o) in columns.items()},
                {"d_iter": d_iter, "d_window": d_window})


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
    columns |= {
        "min_ns": (mid - t.min_ns.astype(np.int64), {}),
        "max_ns": (t.max_ns.astype(np.int64) - mid, {}),
        "std_ns": (t.std_ns, {"as_float": True}),
        "count_per_iter": (_residual(t.count_per_iter, _ratio(count, d_iter)).view(np.int64), {}),
        "share_kernel": (_residual(t.share_kernel, _ratio(total, d_kernel)).view(np.int64), {}),
        "amdahl_ceiling": (_residual(t.amdahl_ceiling, _amdahl(levels.column("share_window"))).view(np.int64), {}),
        "fragmented": (t.fragmented.astype(np.int64), {}),
    }
    return pack(len(t), columns, {"d_kernel": d_kernel})


class LevelRows:
    """The ``levels`` blob (and the ``board`` blob, when given) decoded to Python lists, without numpy."""

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
        """(count, total_ns, avg_ns, per_iter_ns, share_window) of row ``i`` alone: ``kbase history`` reads
        one kernel of each of thousands of baselines (the float columns decoded only when not predicted)."""
        lv = self._levels
        count, total = lv.int_at("count", i), lv.int_at("total_ns", i)
        d_iter, d_window = self.meta.get("d_iter"), self.meta.get("d_window")
        out = [total / count if count else NAN, NAN if d_iter is None else total / d_iter,
               NAN if d_window is None else total / d_window]
        for j, name in enumerate(("avg_ns", "per_iter_ns", "share_window")):
            if not lv.is_zero(name):  # not the prediction: the stored residual says how
                out[j] = _apply([out[j]], [lv.int_at(name, i)])[0]
        return count, total, out[0], out[1], out[2]

    def _decode(self, name: str) -> list:
        lv, bd = self._levels, self._board
        if name in ("name_id", "count", "total_ns"):
            return lv.ints(name)
        if name == "avg_ns":
            count = self.column("count")
            return _apply([t / c if c else NAN for t, c in zip(self.column("total_ns"), count)], lv.ints(name))
        if name == "per_iter_ns":
            return _apply(_ratio(self.column("total_ns"), self.meta.get("d_iter")), lv.ints(name))
        if name == "share_window":
            return _apply(_ratio(self.column("total_ns"), self.meta.get("d_window")), lv.ints(name))
        if bd is None:
            raise KeyError(f"{name}: a board column, and the board was not read")
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
        if name == "count_per_iter":
            return _apply(_ratio(self.column("count"), self.meta.get("d_iter")), bd.ints(name))
        if name == "share_kernel":
            return _apply(_ratio(self.column("total_ns"), self.meta.get("d_kernel")), bd.ints(name))
        if name == "amdahl_ceiling":
            return _apply(_amdahl(self.column("share_window")), bd.ints(name))
        raise KeyError(name)

    def _mid(self) -> list[int]:
        assert self._board is not None
        if "median2" in self._board:
            avg = self.column("avg_ns")
            return [(d + (2 * round(a) if math.isfinite(a) else 0)) >> 1
                    for d, a in zip(self._board.ints("median2"), avg)]
        return [round(m) if math.isfinite(m) else 0 for m in self._board.floats("median_ns")]


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


def level_arrays(p: Packed) -> tuple[np.ndarray, np.ndarray]:
    """(name ids, time per iteration per GPU) of one ``levels`` blob, with numpy: ``steps`` reads thousands."""
    import numpy as np

    ids, total = p.array("name_id"), p.array("total_ns")
    d = p.meta.get("d_iter")
    per_iter = total / d if d is not None else np.full(len(total), np.nan)
    if not p.is_zero("per_iter_ns"):
        per_iter = (per_iter.view(np.int64) ^ p.array("per_iter_ns")).view(np.float64)
    return ids, per_iter


# ------------------------------------------------------------------------------------------ a whole table

INT_COLUMNS = frozenset({"name_id", "count", "total_ns", "gpus", "min_ns", "max_ns"})


def empty_table() -> KernelTable:
    """The kernel table of a baseline without kernels."""
    import numpy as np

    cols: dict[str, Any] = {c: np.zeros(0, dtype=np.int64 if c in INT_COLUMNS else bool if c == "fragmented"
                                        else np.float64) for c in (*LEVEL_COLUMNS, *BOARD_COLUMNS)}
    return KernelTable(**cols)


def encode(t: KernelTable) -> Blobs:
    """The four blobs of a baseline's kernel table (deterministic: the same table, the same bytes)."""
    from kbase.store.sample_blobs import encode_samples, encode_sketches

    levels = encode_levels(t)
    board = encode_board(t, LevelRows(Packed(levels)))
    samples = None if t.iter_ns is None or t.iter_count is None else encode_samples(t.iter_ns, t.iter_count)
    sketches = None if t.sketches is None else encode_sketches(t.sketches, t.count)
    return Blobs(levels, board, samples, sketches)


def decode(blobs: Blobs, *, samples: bool = True, sketches: bool = True) -> KernelTable:
    """A baseline's kernel table from its blobs (numpy columns; samples and sketches when asked and stored)."""
    import numpy as np

    from kbase.store.sample_blobs import decode_samples, decode_sketches

    rows = LevelRows(Packed(blobs.levels), Packed(blobs.board))
    cols: dict[str, Any] = {}
    for c in (*LEVEL_COLUMNS, *BOARD_COLUMNS):
        values = rows.column(c)
        cols[c] = np.array(values, dtype=np.int64 if c in INT_COLUMNS else bool if c == "fragmented" else np.float64)
    t = KernelTable(**cols)
    if samples and blobs.samples is not None:
        t.iter_ns, t.iter_count = decode_samples(blobs.samples)
    if sketches and blobs.sketches is not None:
        t.sketches = decode_sketches(blobs.sketches, t.count)
    return t

"""Kernel-table format 1 (migrations 0009-0013), kept to read what older kbase stored and exported: migration
0009 writes it, migration 0014 converts every stored table of it to format 2 (``kernel_blobs``), and an export
file of format 1 is converted as it is imported. Nothing else reads or writes it.

Format 1 differs from 2 in two ways: the ``levels`` blob holds each row's store-local ``name_id``, and the
derivable columns (mean launch, time per iteration, shares, launches per iteration, the Amdahl ceiling) are
stored as XOR residuals against their predictions (0 bits, nothing stored, for a leaderboard kbase built).
Blobs compressed with raw deflate (codec 1) or raw LZMA2 (codec 2) are read too (``recoded``).
"""

from __future__ import annotations

import math
from array import array
from typing import TYPE_CHECKING, Any

# the predictions format 1 stored residuals against are the ones format 2 derives its columns by
from kbase.store.codec.kernel_blobs import Blobs, KernelTable, _amdahl, _divisor, _median2, _ratio
from kbase.store.codec.packed import Packed
from kbase.store.codec.packing import pack

if TYPE_CHECKING:
    import numpy as np

FORMAT = 1  # ``baseline_kernels.format`` of this layout
LEVEL_COLUMNS = ("name_id", "count", "total_ns", "avg_ns", "per_iter_ns", "share_window")
BOARD_COLUMNS = ("gpus", "median_ns", "min_ns", "max_ns", "std_ns", "count_per_iter", "share_kernel",
                 "amdahl_ceiling", "fragmented")
NAN = float("nan")


# ------------------------------------------------------------------------------------------ predictions


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


INT_COLUMNS = frozenset({"name_id", "count", "total_ns", "gpus", "min_ns", "max_ns"})


def encode(t: KernelTable) -> Blobs:
    """The four blobs of a baseline's kernel table (deterministic: the same table, the same bytes)."""
    from kbase.store.codec.sample_blobs import encode_samples, encode_sketches

    levels = encode_levels(t)
    board = encode_board(t, LevelRows(Packed(levels)))
    samples = None if t.iter_ns is None or t.iter_count is None else encode_samples(t.iter_ns, t.iter_count)
    sketches = None if t.sketches is None else encode_sketches(t.sketches, t.count)
    return Blobs(levels, board, samples, sketches)


def decode(blobs: Blobs, *, samples: bool = True, sketches: bool = True) -> KernelTable:
    """A baseline's kernel table from its blobs (numpy columns; samples and sketches when asked and stored)."""
    import numpy as np

    from kbase.store.codec.sample_blobs import decode_samples, decode_sketches

    rows = LevelRows(Packed(recoded(blobs.levels)), Packed(recoded(blobs.board)))
    cols: dict[str, Any] = {}
    for c in (*LEVEL_COLUMNS, *BOARD_COLUMNS):
        values = rows.column(c)
        cols[c] = np.array(values, dtype=np.int64 if c in INT_COLUMNS else bool if c == "fragmented" else np.float64)
    t = KernelTable(**cols)
    if samples and blobs.samples is not None:
        t.iter_ns, t.iter_count = decode_samples(recoded(blobs.samples))
    if sketches and blobs.sketches is not None:
        t.sketches = decode_sketches(recoded(blobs.sketches), t.count)
    return t


# ------------------------------------------------------------------------------------------ older codecs

DEFLATE, LZMA2 = 1, 2  # the container's codec byte of blobs an early draft of 0009 wrote
_LZMA_FILTERS = [{"id": 0x21, "preset": 6, "dict_size": 1 << 20}]  # lzma.FILTER_LZMA2, preset 6, 1 MiB window


def recoded(blob: bytes) -> bytes:
    """A packed blob with a deflate or LZMA2 payload as the same columns with a Zstandard one (what ``packed``
    reads); any other blob as it is. The payload may decode to its declared size at most."""
    import lzma
    import zlib

    from kbase.store.codec.packed import ZSTD, PackedError
    from kbase.store.codec.packing import _compress

    if len(blob) < 5 or blob[:3] != b"KBP" or blob[4] not in (DEFLATE, LZMA2):
        return blob
    head = Packed(blob[:4] + bytes([ZSTD]) + blob[5:])  # (the header alone is parsed)
    at, size = head._payload_at, head._body_size
    if not size:
        return blob[:4] + bytes([ZSTD]) + blob[5:]
    z: Any = (lzma.LZMADecompressor(format=lzma.FORMAT_RAW, filters=_LZMA_FILTERS) if blob[4] == LZMA2
              else zlib.decompressobj(-15))
    try:
        body = z.decompress(blob[at:], size + 1)
    except (lzma.LZMAError, zlib.error) as exc:
        raise PackedError(f"packed columns: corrupt payload ({exc})") from None
    if len(body) != size or not z.eof:
        raise PackedError(f"packed columns: payload is not the {size} bytes the header says")
    return blob[:4] + bytes([ZSTD]) + blob[5:at] + _compress(body)


# ------------------------------------------------------------------------------------------ to format 2


def convert(levels: bytes, board: bytes, samples: bytes | None, sketches: bytes | None, ops: bytes | None,
            op_key: dict[int, str]) -> tuple[Blobs, bytes | None, list[int], list[int]]:
    """A format-1 kernel table as format 2 (``kernel_blobs``): (its blobs, its ``ops`` blob, the format-1 name id
    of each row, the format-1 op id of each op position). ``op_key``: op id -> its key (the op list is sorted by
    key). Every leaderboard column, sample and sketch reads back as before; the samples and sketches blobs keep
    their bytes (the same format in both), the op split is re-encoded with its ops by position."""
    from types import SimpleNamespace

    import numpy as np

    from kbase.store.codec.kernel_blobs import LevelRows as LevelRows2
    from kbase.store.codec.kernel_blobs import encode_board, encode_levels
    from kbase.store.codec.op_blobs import decode_ops, encode_ops

    samples, sketches = recoded(samples) if samples else samples, recoded(sketches) if sketches else sketches
    t = decode(Blobs(levels, board, samples, sketches), sketches=False)
    new_levels = encode_levels(t)
    blobs = Blobs(new_levels, encode_board(t, LevelRows2(Packed(new_levels))), samples, sketches)
    if ops is None:
        return blobs, None, t.name_id.tolist(), []
    stored = decode_ops(recoded(ops), t)
    order = sorted({i for i in stored.op_id.tolist() if i}, key=lambda i: op_key[i])
    position = {i: j + 1 for j, i in enumerate(order)}
    pairs = SimpleNamespace(count=stored.count, total_ns=stored.total_ns, iter_ns=stored.iter_ns)
    positions = np.array([position.get(i, 0) for i in stored.op_id.tolist()], dtype=np.int64)
    new_ops = encode_ops(pairs, stored.row, positions, t.count, t.total_ns, t.iter_ns)  # type: ignore[arg-type]
    return blobs, new_ops, t.name_id.tolist(), order


# ------------------------------------------------------------------------------------------ export files of format 1


def _plain(blob: bytes | None, skip: str = "") -> bytes | None:
    """Format 1's digest form of a blob: its rows, header and each column's values, ``skip`` left out."""
    if blob is None:
        return None
    import json

    p = Packed(blob)
    parts = [b"%d|" % p.rows, json.dumps(p.meta, sort_keys=True).encode()]
    for name in p.names:
        if name == skip:
            continue
        if p.is_zero(name):
            parts.append(b"|%s:0" % name.encode())
            continue
        values = p.array(name)
        parts.append(b"|%s:%s%d:" % (name.encode(), values.dtype.char.encode(), len(values)))
        parts.append(values.astype(values.dtype.newbyteorder("<")).tobytes())
    return b"".join(parts)

"""Packed columns: named integer and float columns of one table in one self-describing, deterministic blob
(the store's per-baseline kernel data, ``kernel_blobs``; the layout is docs/store-format.md's).

Layout (little-endian; ``varint``: unsigned LEB128)::

    b"KBP" | version u8 | codec u8 | varint rows | varint meta length | meta (JSON) | varint columns |
    per column: varint name length | name (UTF-8) | kind u8 | varint byte length |
    payload: every column's bytes, in that order, compressed as one stream (to the end of the blob)

``kind``: bits 0-3 the byte width of each stored value (0: every value is 0, no bytes; 1, 2, 4, 8),
bit 4 zigzag (signed values), bit 5 delta (the values are the running sums of those stored), bit 6 float
(8-byte IEEE 754 bits). A column's bytes are its values' bytes *shuffled* (every value's first byte, then
every second byte, ...: the high bytes of small numbers form long runs of zeros). The payload is compressed
with Zstandard (codec 3, level 15; codecs 1 and 2, deflate and LZMA2, only ``format1`` reads) as one stream:
reading any column decompresses the blob once (what each read wants: ``kbase history`` reads two of
the levels' columns of every baseline; one stream measured the same size as a stream per column). Same
columns in, same bytes out (for a given Zstandard build).

Decoding needs no numpy (``Packed.ints``/``floats``: ``kbase show`` and ``history`` load none); the
numpy readers (``Packed.array``) serve the bulk decoders. Encoding (numpy) is ``packing``.
"""

from __future__ import annotations

import json
import sys
import threading
from array import array
from itertools import accumulate
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

MAGIC = b"KBP"
VERSION = 1
ZSTD = 3  # the payload's codec byte (1 and 2: ``format1``)
ZSTD_LEVEL = 15  # the sketches' size of LZMA2 preset 6 (+-1%) in half its time; decoding ~15x faster than zlib
WIDTH_MASK, ZIGZAG, DELTA, FLOAT = 0x0F, 0x10, 0x20, 0x40
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_TYPECODES = {1: "B", 2: "H", 4: "I", 8: "Q"}
for _w, _t in list(_TYPECODES.items()):  # 'I' and 'L' differ between platforms: take the one of that width
    if array(_t).itemsize != _w:
        _TYPECODES[_w] = next(t for t in "BHILQ" if array(t).itemsize == _w)


class PackedError(ValueError):
    """A blob that is not packed columns of a version this kbase reads."""


# ------------------------------------------------------------------------------------------ varints


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    if pos + 1 < len(buf):  # one or two bytes: nearly every length in a blob's header
        if buf[pos] < 0x80:
            return buf[pos], pos + 1
        if buf[pos + 1] < 0x80:
            return (buf[pos] & 0x7F) | buf[pos + 1] << 7, pos + 2
    elif pos < len(buf) and buf[pos] < 0x80:
        return buf[pos], pos + 1
    n = shift = 0
    while True:
        if pos >= len(buf):
            raise PackedError("packed columns: truncated")
        byte = buf[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return n, pos
        shift += 7


def _json_object(text: str) -> Any:
    """``json.loads(text)`` for a header: json's C scanner called directly when the text is one object and
    nothing after it (what ``pack`` writes), else ``json.loads`` itself (its errors and its whitespace rules)."""
    if text[:1] == "{":
        try:
            value, end = _SCAN(text, 0)
        except (StopIteration, ValueError):
            pass
        else:
            if end == len(text):
                return value
    return json.loads(text)


_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # (json.loads' own decoder: the same scanner, the same values)

# ------------------------------------------------------------------------------ Zstandard (packing compresses)


_ZSTD = threading.local()  # a Zstandard (de)compressor per thread: setting one up costs ~10 us, decoding a blob ~1 us


def _zstd(kind: str) -> Any:
    coder = getattr(_ZSTD, kind, None)
    if coder is None:
        import zstandard

        coder = (zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=False) if kind == "compressor"
                 else zstandard.ZstdDecompressor())
        setattr(_ZSTD, kind, coder)
    return coder


def _decompress(payload: bytes, size: int) -> bytes:
    """The payload decompressed, never past ``size`` bytes (the header's sum of column lengths): a payload that
    decodes to more is refused as soon as it passes ``size``, so that a small blob cannot allocate gigabytes
    (a decompression bomb) whatever its header or its frame claims."""
    import zstandard

    try:
        declared = zstandard.frame_content_size(payload)
        if declared > size:  # decompress() trusts the frame's stated size and would allocate it whole
            raise PackedError(f"packed columns: payload of {declared} bytes, the header says {size}")
        return _zstd("decompressor").decompress(payload, max_output_size=size, allow_extra_data=False)
    except PackedError:
        raise
    except Exception as exc:  # noqa: BLE001 - zstandard.ZstdError: a corrupt blob
        raise PackedError(f"packed columns: corrupt payload ({type(exc).__name__}: {exc})") from None


# ------------------------------------------------------------------------------------------ decoding


class Packed:
    """A decoded blob's header; each column is decompressed when asked for."""

    def __init__(self, blob: bytes) -> None:
        if type(blob) is not bytes:
            blob = bytes(blob) if isinstance(blob, bytes | bytearray | memoryview) else b""
        if blob[:3] != MAGIC:
            raise PackedError("not packed columns (bad magic)")
        if len(blob) < 5 or blob[3] != VERSION or blob[4] != ZSTD:
            raise PackedError(f"packed columns: version {blob[3] if len(blob) > 3 else '?'} is not one this "
                              "kbase reads (upgrade kbase)")
        self._blob = blob
        self.codec = blob[4]
        self.rows, pos = _read_varint(blob, 5)
        size, pos = _read_varint(blob, pos)
        self._meta_at = (pos, pos + size)
        self._meta: dict[str, Any] | None = None
        pos += size
        if pos < len(blob) and blob[pos] < 0x80:  # (inline: ``kbase history`` opens thousands of headers)
            count, pos = blob[pos], pos + 1
        else:
            count, pos = _read_varint(blob, pos)
        # name -> (kind, start, end in the decompressed payload): parsed once per read of thousands (history)
        self._cols: dict[str, tuple[int, int, int]] = {}
        self._decoded: dict[str, tuple[int, int, bytes]] = {}
        self._body: bytes | None = None
        at = 0
        try:
            for _ in range(count):
                size = blob[pos]
                if size < 0x80:
                    pos += 1
                else:
                    size, pos = _read_varint(blob, pos)
                name = blob[pos : pos + size].decode()
                kind = blob[pos + size]
                pos += size + 1
                size = blob[pos]
                if size < 0x80:
                    pos += 1
                else:
                    size, pos = _read_varint(blob, pos)
                self._cols[name] = (kind, at, at + size)
                at += size
        except (IndexError, UnicodeDecodeError):
            raise PackedError("packed columns: truncated") from None
        self._payload_at, self._body_size = pos, at
        if not at and pos != len(blob):
            raise PackedError("packed columns: trailing bytes")

    def decode_cost(self) -> int:
        """Bytes that decoding every column may allocate, from the header alone (nothing decompressed): the
        payload as declared (``_decompress`` never goes past it), each value widened to 8 bytes, and the
        ``rows`` values an all-zero column stands for."""
        values = sum((end - start) // (kind & WIDTH_MASK) for kind, start, end in self._cols.values()
                     if kind & WIDTH_MASK)
        return self._body_size + 8 * values + 8 * self.rows

    @property
    def meta(self) -> dict[str, Any]:
        """The blob's header (JSON), parsed when first asked for."""
        if self._meta is None:
            head = self._blob[self._meta_at[0] : self._meta_at[1]]
            try:
                try:  # str in: json.loads skips guessing the encoding of bytes (half its ~4 us a blob: history)
                    text = head.decode()
                except UnicodeDecodeError:
                    self._meta = json.loads(head)  # (UTF-16/32, as json.loads reads bytes; never written so)
                else:
                    self._meta = _json_object(text)
            except ValueError:
                raise PackedError("packed columns: unreadable header") from None
        return self._meta

    def is_zero(self, name: str) -> bool:
        """Every value of column ``name`` is 0 (nothing stored for it)."""
        return not self._cols[name][0] & WIDTH_MASK

    def options(self, name: str) -> dict[str, bool]:
        """How column ``name`` was coded (``pack``'s options): written again alike, its bytes come out the same."""
        kind = self._cols[name][0]
        return {"delta": bool(kind & DELTA), "as_float": bool(kind & FLOAT)}

    def __contains__(self, name: str) -> bool:
        return name in self._cols

    @property
    def names(self) -> list[str]:
        return list(self._cols)

    @property
    def column_count(self) -> int:
        return len(self._cols)

    def _planes(self, name: str) -> tuple[int, int, bytes]:
        """(kind, count, the column's bytes as stored: byte j of every value, then byte j + 1 ...)."""
        kind, start, end = self._cols[name]
        width = kind & WIDTH_MASK
        if not width:
            return kind, 0, b""
        if self._body is None:
            size = self._body_size
            self._body = _decompress(self._blob[self._payload_at :], size) if size else b""
            if len(self._body) != self._body_size:
                raise PackedError(f"packed columns: {len(self._body)} bytes, the header says {self._body_size}")
        if (end - start) % width:
            raise PackedError(f"packed columns: column {name} is {end - start} bytes, not a multiple of {width}")
        return kind, (end - start) // width, self._body[start:end]

    def _raw(self, name: str) -> tuple[int, int, bytes]:
        """(kind, count, unshuffled little-endian bytes) of column ``name`` (decompressed once)."""
        if name not in self._decoded:
            kind, n, raw = self._planes(name)
            width = kind & WIDTH_MASK
            if width > 1:
                out = bytearray(len(raw))
                for j in range(width):  # un-shuffle: byte j of every value
                    out[j::width] = raw[j * n : (j + 1) * n]
                raw = bytes(out)
            self._decoded[name] = (kind, n, raw)
        return self._decoded[name]

    def length(self, name: str) -> int | None:
        """The number of values column ``name`` stores (None for an all-zero column, which takes the
        length its reader asks for)."""
        kind, count, _ = self._raw(name)
        return count if kind & WIDTH_MASK else None

    def _stored(self, name: str) -> tuple[int, array | None]:
        """(kind, the stored values as an ``array``; None for an all-zero column)."""
        kind, count, raw = self._raw(name)
        if not count:
            return kind, None
        a = array(_TYPECODES[kind & WIDTH_MASK])
        a.frombytes(raw)
        if sys.byteorder == "big":
            a.byteswap()
        return kind, a

    def index(self, name: str, value: int) -> int | None:
        """The first row whose value in integer column ``name`` is ``value``, or None: a search of the stored
        bytes in C (``kbase history`` looks one kernel up in thousands of baselines), nothing decoded."""
        kind, n, raw = self._planes(name)
        if kind & DELTA or not n:
            values = self.ints(name)
            return values.index(value) if value in values else None
        if kind & ZIGZAG:
            value = (value << 1) ^ -(value < 0)
        width = kind & WIDTH_MASK
        if value < 0 or value >> (8 * width):
            return None
        want = value.to_bytes(width, "little")
        i = raw.find(want[0], 0, n)
        while i >= 0:
            if all(raw[j * n + i] == want[j] for j in range(1, width)):
                return i
            i = raw.find(want[0], i + 1, n)
        return None

    def int_at(self, name: str, i: int) -> int:
        """Row ``i`` of integer column ``name``, read from the stored bytes (the rest not decoded; ``kbase
        history`` reads two values of each of thousands of blobs: the column's bytes are not copied out)."""
        kind, start, end = self._cols[name]
        width = kind & WIDTH_MASK
        if not width:
            return 0
        if kind & DELTA or self._body is None or (end - start) % width:
            kind, n, raw = self._planes(name)  # (decompresses; refuses a column of the wrong length)
            if kind & DELTA:
                return self.ints(name)[i]
        n = (end - start) // width
        if not 0 <= i < n:
            raise IndexError(f"packed columns: row {i} of column {name} ({n} rows)")
        assert self._body is not None
        v = int.from_bytes(self._body[start + i : end : n], "little")
        return (v >> 1) ^ -(v & 1) if kind & ZIGZAG else v

    def ints(self, name: str, n: int | None = None) -> list[int]:
        """Column ``name`` as Python ints (``n``: the length of an all-zero column; default ``rows``)."""
        kind, a = self._stored(name)
        if a is None:
            return [0] * (self.rows if n is None else n)
        values: list[int] = a.tolist()
        if kind & ZIGZAG:
            values = [(v >> 1) ^ -(v & 1) for v in values]
        if kind & DELTA:
            values = list(accumulate(values))
            if values and (min(values) < _INT64_MIN or max(values) > _INT64_MAX):
                # the encoder's differences wrapped in int64 (numpy): so do the running sums
                values = [(v - _INT64_MIN) % (1 << 64) + _INT64_MIN for v in values]
        return values

    def floats(self, name: str, n: int | None = None) -> list[float]:
        """A float column as Python floats (all-zero bits: 0.0)."""
        kind, count, raw = self._raw(name)
        if not count:
            return [0.0] * (self.rows if n is None else n)
        a = array("d")
        a.frombytes(raw)
        if sys.byteorder == "big":
            a.byteswap()
        return a.tolist()

    def array(self, name: str, n: int | None = None, *, rows: tuple[np.ndarray, int] | None = None) -> np.ndarray:
        """Column ``name`` as a numpy array: int64, or float64 for a float column (``n``: the length of an
        all-zero column). ``rows`` = (row indices, values per row): of a column that is a matrix flattened
        row by row, those rows alone, as a (len(indices), values per row) matrix (not for delta columns)."""
        import numpy as np

        kind, count, raw = self._planes(name)
        width = kind & WIDTH_MASK
        if rows is not None:
            at, per = rows
            if not count:
                return np.zeros((len(at), per), dtype=np.float64 if kind & FLOAT else np.int64)
            if kind & DELTA or count % max(per, 1):
                raise PackedError(f"packed columns: column {name} is not a matrix of rows of {per}")
            planes = np.frombuffer(raw, dtype=np.uint8).reshape(width, -1, per)[:, at, :]
        elif not count:
            return np.zeros(self.rows if n is None else n, dtype=np.float64 if kind & FLOAT else np.int64)
        else:
            planes = np.frombuffer(raw, dtype=np.uint8).reshape(width, count)
        # un-shuffle: byte j of every value is plane j; numpy puts them back side by side (the 1-D case by a
        # transpose: ``steps`` decodes three columns of each of 50,000 blobs, where moveaxis alone cost ~1.6 s)
        if planes.ndim == 2:
            u = (planes if width == 1 else planes.T.copy()).view(f"<u{width}").reshape(-1).astype(np.uint64)
        else:
            u = np.ascontiguousarray(np.moveaxis(planes, 0, -1)).view(f"<u{width}")[..., 0].astype(np.uint64)
        if kind & FLOAT:
            return u.view(np.float64)
        v = u.view(np.int64)
        if kind & ZIGZAG:
            v = (u >> np.uint64(1)).view(np.int64) ^ -(u & np.uint64(1)).view(np.int64)
        if kind & DELTA:
            v = np.cumsum(v)
        return v


def canonical(blob: bytes) -> bytes:
    """The blob's canonical bytes: its header and its columns' bytes uncompressed. Encoding is deterministic, so
    one table has one canonical form whatever Zstandard build compressed it (an export's content digest
    hashes these)."""
    p = Packed(blob)
    if p._body_size:
        p._planes(next(n for n in p.names if not p.is_zero(n)))  # decompress the payload once
    return p._blob[: p._payload_at] + (p._body or b"")

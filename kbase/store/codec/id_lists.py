"""The ``kernel_ids`` and ``op_ids`` columns beside a baseline's blobs: which store-local kernel name each row is
and which op each ops position is. The blobs never hold a store id (so they export byte for byte); these lists
are the store's own, read and searched without decoding anything."""

from __future__ import annotations

import sys
from array import array

from kbase.store.codec.packed import PackedError


def id_list(ids: list[int]) -> bytes:
    """The ``kernel_ids`` / ``op_ids`` column: store-local ids by position, little-endian unsigned of the width
    the largest needs (one byte: 2 or 4), uncompressed: ``kbase history`` finds one id in thousands of them
    with a byte search, nothing decoded."""
    width = 2 if not ids or max(ids) < 1 << 16 else 4
    a = array("H" if width == 2 else _UINT32, ids)
    if sys.byteorder == "big":
        a.byteswap()
    return bytes([width]) + a.tobytes()


_UINT32 = next(t for t in "ILQ" if array(t).itemsize == 4)


def ids_of(blob: bytes | None) -> list[int]:
    """``id_list`` read back (None: no list)."""
    if not blob:
        return []
    width = blob[0]
    if width not in (2, 4) or (len(blob) - 1) % width:
        raise PackedError(f"an id list of width {width} and {len(blob) - 1} bytes")
    a = array("H" if width == 2 else _UINT32)
    a.frombytes(bytes(blob[1:]))
    if sys.byteorder == "big":
        a.byteswap()
    return a.tolist()


def position_of(blob: bytes, wanted: int) -> int | None:
    """The position of id ``wanted`` in an ``id_list`` blob, or None (a search of its bytes in C)."""
    width = blob[0]
    if wanted < 0 or wanted >> (8 * width):
        return None
    needle = wanted.to_bytes(width, "little")
    at = blob.find(needle, 1)
    while at >= 0:
        if (at - 1) % width == 0:
            return (at - 1) // width
        at = blob.find(needle, at + 1)
    return None

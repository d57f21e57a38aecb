"""A stored kernel-table blob as every read takes it: bytes (PostgreSQL's driver gives a memoryview), of a format
this kbase reads, with an intact header — else one line naming the baseline."""

from __future__ import annotations

from typing import Any

from kbase.store.codec.kernel_format import FORMAT
from kbase.store.codec.packed import Packed, PackedError


def as_bytes(value: Any) -> Any:
    """A stored blob as bytes (PostgreSQL's driver gives a memoryview), None as None."""
    return value if isinstance(value, bytes) or value is None else bytes(value)


def packed(baseline_id: Any, fmt: int, blob: Any) -> Packed:
    """One blob of a stored kernel table, checked: a format this kbase reads and an intact header."""
    from kbase.errors import StoreError

    if fmt != FORMAT:
        raise StoreError(f"store: baseline @{baseline_id} holds kernel data of format {fmt}, which this kbase "
                         f"does not read (it reads format {FORMAT}); upgrade kbase")
    try:
        return Packed(as_bytes(blob))
    except PackedError as exc:
        raise StoreError(f"store: baseline @{baseline_id}: kernel data unreadable ({exc})") from None

"""``history_levels.LevelsReader`` (``kbase history``'s read of two values a blob) answers what the general decoder
(``kernel_blobs.history_row`` over ``Packed``) answers, or None where it leaves a blob to it: on blobs ``pack``
writes (any widths, signed values, many rows, long headers, missing divisors), on the layouts it leaves alone
(delta and float columns, stored float levels with NaN, all-zero columns), on damaged blobs, and over a mix of
blobs read in turn by one reader (its column table must follow each blob's)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbase.store.codec.history_levels import LevelsReader
from kbase.store.codec.kernel_blobs import history_row
from kbase.store.codec.packed import Packed, PackedError
from kbase.store.codec.packing import pack


def _general(blob: bytes, i: int) -> Any:
    """What the general decoder answers: the values, or the exception's type."""
    try:
        return history_row(Packed(blob), i)
    except Exception as exc:  # noqa: BLE001 - the kind of refusal is what is compared
        return type(exc)


def _same(a: Any, b: Any) -> bool:
    """Equal values, NaN equal to NaN, ints as ints and floats as floats (the JSON output's types)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


def _check(reader: LevelsReader, blob: bytes, i: int, *, fast: bool | None = None) -> None:
    """The reader answers the general decoder's values, or None (then the general decoder is the answer);
    ``fast``: whether it must answer itself (True) or leave the blob (False)."""
    got, want = reader.read(blob, i), _general(blob, i)
    if got is None:
        assert fast is not True, "the reader left a blob it reads"
    else:
        assert fast is not False, "the reader answered for a blob it must leave"
        assert _same(got, want), (got, want)


def _levels(count: list[int], total: list[int], meta: dict[str, Any] | None = None, **options: Any) -> bytes:
    cols = {"count": (np.array(count, dtype=np.int64), options.get("count_options", {})),
            "total_ns": (np.array(total, dtype=np.int64), options.get("total_options", {}))}
    for name, values in options.get("floats", {}).items():
        cols[name] = (np.array(values, dtype=np.float64), {"as_float": True})
    return pack(len(count), cols, {"d_iter": 400.0, "d_window": 7.5e10} if meta is None else meta)


INT64 = st.integers(-(2**63), 2**63 - 1)
METAS = st.fixed_dictionaries({}, optional={"d_iter": st.one_of(st.none(), st.floats(1e-3, 1e12), st.integers(1, 10**9)),
                                            "d_window": st.one_of(st.none(), st.floats(1e-3, 1e15)),
                                            "note": st.text(max_size=200)})


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_equal_to_the_general_decoder_on_generated_blobs(data) -> None:
    n = data.draw(st.integers(1, 300))
    small = st.integers(0, data.draw(st.sampled_from([0, 255, 2**16 - 1, 2**32 - 1, 2**62])))
    count = data.draw(st.lists(small, min_size=n, max_size=n))
    total = data.draw(st.lists(st.one_of(small, INT64), min_size=n, max_size=n))
    blob = _levels(count, total, data.draw(METAS))
    reader = LevelsReader()
    every_column_stored = any(count) and any(total)  # (an all-zero column has no bytes: the general decoder's)
    for i in {0, n - 1, data.draw(st.integers(0, n - 1))}:
        _check(reader, blob, i, fast=True if every_column_stored else None)
    _check(reader, blob, n, fast=False)  # past the last row: the general decoder's IndexError
    _check(reader, blob, -1, fast=False)


def test_the_layouts_it_leaves_to_the_general_decoder() -> None:
    reader = LevelsReader()
    n = 20
    count, total = list(range(1, n + 1)), [1000 * i + 7 for i in range(n)]
    with_nan = [float("nan") if i % 3 == 0 else 1.5 * i for i in range(n)]
    left = {
        "delta total": _levels(count, total, total_options={"delta": True}),
        "delta count": _levels(count, total, count_options={"delta": True}),
        "float total": _levels(count, total, total_options={"as_float": True}),
        "stored avg with NaN": _levels(count, total, floats={"avg_ns": with_nan}),
        "stored per_iter and share with NaN": _levels(count, total, floats={"per_iter_ns": with_nan,
                                                                             "share_window": with_nan}),
        "all-zero count": _levels([0] * n, total),
    }
    for name, blob in left.items():
        for i in (0, 3, n - 1):
            assert reader.read(blob, i) is None, name
            assert isinstance(_general(blob, i), tuple), name  # (and the general decoder reads it)
    zero_counts = _levels([0, 5] * (n // 2), total)  # avg NaN where a count is 0 (nothing ran: the general's rule)
    _check(reader, zero_counts, 0, fast=True)
    no_divisors = _levels(count, total, {})
    _check(reader, no_divisors, 4, fast=True)
    assert math.isnan(reader.read(no_divisors, 4)[3])  # type: ignore[index]


def test_damaged_blobs_are_left_to_the_general_decoder_which_refuses_them() -> None:
    reader = LevelsReader()
    blob = _levels([1, 2, 3], [10, 20, 30])
    assert reader.read(blob, 1) == _general(blob, 1)
    damaged = {
        "truncated payload": blob[:-3],
        "no payload": blob[: blob.index(b"total_ns") + 10],
        "corrupt payload": blob[:-4] + bytes(4),  # (no checksum: zstd may read it, the general decoder alike)
        "bad magic": b"XBP" + blob[3:],
        "another version": blob[:3] + b"\x09" + blob[4:],
        "header not JSON": blob.replace(b'{"d_iter"', b'{"d_iteX', 1).replace(b"{", b"[", 1),
        "header a list": _levels([1, 2, 3], [10, 20, 30], meta=None).replace(b'{"d_iter":400.0,', b'[              ', 1),
        "empty": b"",
    }
    for name, bad in damaged.items():
        got, want = reader.read(bad, 1), _general(bad, 1)
        assert got is None if not isinstance(want, tuple) else got in (None, want), name
    for name in ("truncated payload", "no payload", "bad magic", "another version", "header not JSON", "empty"):
        assert not isinstance(_general(damaged[name], 1), tuple), name  # (refused: the reader left them)
    assert reader.read(memoryview(blob), 1) is None  # (PostgreSQL's memoryview: the general path converts it)


def test_one_reader_over_blobs_of_other_tables_follows_each() -> None:
    """The reader keeps the last column table: blobs of other widths, row counts and layouts, in turn."""
    rng = np.random.default_rng(7)
    reader = LevelsReader()
    blobs = []
    for n in (3, 3, 500, 130, 3, 1):
        for top in (200, 60_000, 2**40):
            count = rng.integers(1, 255, n).tolist()
            total = rng.integers(-top, top, n).tolist()
            blobs.append(_levels(count, total, {"d_iter": float(n), "d_window": None}))
    blobs.insert(4, _levels([1, 2, 3], [4, 5, 6], total_options={"delta": True}))
    blobs.insert(9, _levels([1, 2, 3], [4, 5, 6], {"d_iter": 1.0, "note": "x" * 300}))  # a header over 127 bytes
    for blob in blobs * 2:
        rows = Packed(blob).rows
        for i in (0, rows - 1):
            _check(reader, blob, i)


@pytest.mark.parametrize("missing", ["count", "total_ns"])
def test_a_blob_without_a_level_column(missing: str) -> None:
    other = "total_ns" if missing == "count" else "count"
    blob = pack(2, {other: (np.array([1, 2]), {}), "x": (np.array([3, 4]), {})}, {"d_iter": 1.0})
    assert LevelsReader().read(blob, 0) is None
    assert _general(blob, 0) is KeyError  # (as before: the general decoder's answer stands)


def test_the_history_rows_take_the_same_values_either_way(monkeypatch) -> None:
    """``blob_reads.history_rows`` over a mix (kernel absent, stored floats, plain): the same rows with the reader
    as with the general decoder alone; a damaged blob is one line naming its baseline either way."""
    from kbase.errors import StoreError
    from kbase.store.codec import history_levels
    from kbase.store.codec.id_lists import id_list
    from kbase.store.codec.kernel_blobs import FORMAT
    from kbase.store.read.blob_reads import history_rows

    def row(bid: int, ids: list[int], levels: bytes) -> tuple:
        when = f"2026-01-0{bid} 09:00:00.000000"
        return (bid, f"{bid:040x}", when, "w", "main", when, "fp", 1, "H100", 8, "spec", FORMAT, id_list(ids),
                levels)

    rows = [row(1, [7, 9], _levels([3, 4], [300, 440])),
            row(2, [9, 8], _levels([3, 4], [300, 440], floats={"avg_ns": [float("nan"), 2.5]})),
            row(3, [1, 2], _levels([3, 4], [300, 440])),  # the kernel absent
            row(4, [300, 9], _levels([3, 0], [-5, 0], {"d_iter": None}))]
    fast = history_rows(rows, 9, str)
    as_views = [(*r[:-2], memoryview(r[-2]), memoryview(r[-1])) for r in rows]  # (a PostgreSQL driver's blobs)
    assert repr(history_rows(as_views, 9, str)) == repr(fast)
    monkeypatch.setattr(history_levels.LevelsReader, "read", lambda self, blob, i: None)
    general = history_rows(rows, 9, str)
    assert [r["id"] for r in fast] == [1, 2, 4]
    assert repr(fast) == repr(general)
    bad = [*rows[:1], row(5, [9], _levels([1], [2])[:-2])]
    for _ in range(2):
        with pytest.raises(StoreError, match="baseline @5: kernel data unreadable"):
            history_rows(bad, 9, str)
        monkeypatch.undo()


def test_the_reader_raises_nothing_of_its_own() -> None:
    """A damaged blob is never an exception out of the reader (the general decoder words the refusal)."""
    blob = _levels(list(range(40)), list(range(40)))
    reader = LevelsReader()
    for cut in range(len(blob)):
        try:
            reader.read(blob[:cut] + b"\xff" + blob[cut + 1 :], 5)
        except (PackedError, IndexError, ValueError, KeyError) as exc:  # pragma: no cover - the failure reported
            pytest.fail(f"byte {cut}: {exc!r}")


def test_the_format_number_is_kernel_blobs_own() -> None:
    from kbase.store.codec import kernel_blobs, kernel_format

    assert kernel_blobs.FORMAT is kernel_format.FORMAT == 2  # one definition, re-exported

"""``kbase.store.codec.packed``: named columns in one deterministic blob, read back exactly by both decoders (Python
lists without numpy, numpy arrays), one value or one search without decoding a column, and every damaged
blob refused in one line (``PackedError``), never read as other numbers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbase.store.codec import packed
from kbase.store.codec.packed import Packed, PackedError, canonical
from kbase.store.codec.packing import pack

INT64 = st.integers(min_value=-(2**62), max_value=2**62)


@st.composite
def tables(draw):
    n = draw(st.integers(0, 40))
    cols = {}
    for i in range(draw(st.integers(0, 5))):
        width = draw(st.sampled_from([1, 2, 4, 8]))
        lo = draw(st.sampled_from([0, -(2 ** (8 * width - 2))]))
        values = draw(st.lists(st.integers(lo, 2 ** (8 * width - 2)), min_size=n, max_size=n))
        cols[f"c{i}"] = (np.array(values, dtype=np.int64), {"delta": draw(st.booleans())})
    if draw(st.booleans()):
        floats = draw(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=n, max_size=n))
        cols["f"] = (np.array(floats, dtype=np.float64), {"as_float": True})
    return n, cols


@settings(max_examples=150, deadline=None)
@given(tables(), st.sampled_from(["zstd", "deflate", "lzma"]),
       st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))
def test_every_column_reads_back_exactly(table, codec, meta):
    n, cols = table
    blob = pack(n, cols, meta)
    assert pack(n, cols, meta) == blob  # deterministic
    if codec != "zstd":  # a blob of an early draft of 0009: read through ``format1.recoded`` (migration 0014)
        from kbase.store.codec.format1 import recoded

        legacy = _legacy(blob, codec)
        assert Packed(recoded(legacy)).names == list(cols) and canonical(recoded(legacy)) == canonical(blob)
        with pytest.raises(PackedError, match="upgrade kbase"):
            Packed(legacy)
        blob = recoded(legacy)
    p = Packed(blob)
    assert p.rows == n and p.meta == meta and p.names == list(cols)
    for name, (values, options) in cols.items():
        if options.get("as_float"):
            assert np.array_equal(np.array(p.floats(name)).view(np.int64), values.view(np.int64))
            assert np.array_equal(p.array(name).view(np.int64), values.view(np.int64))
            continue
        assert p.ints(name) == values.tolist()
        assert np.array_equal(p.array(name), values)
        for i in range(n):
            assert p.int_at(name, i) == values[i]
        for v in (*values[:3].tolist(), 2**40 + 1, -7):
            assert p.index(name, v) == (values.tolist().index(v) if v in values.tolist() else None)


def test_an_all_zero_column_stores_nothing():
    big = pack(1000, {"z": (np.zeros(1000, dtype=np.int64), {})})
    assert len(big) < 20 and Packed(big).is_zero("z") and Packed(big).ints("z") == [0] * 1000


@pytest.mark.parametrize("damage", [
    lambda b: b"XYZ" + b[3:],  # not packed columns
    lambda b: b[:3] + bytes([9]) + b[4:],  # a format version from a newer kbase
    lambda b: b[:4] + bytes([7]) + b[5:],  # an unknown codec
    lambda b: b[:-5],  # cut short
    lambda b: b[:12],
    lambda b: b + b"\0",  # trailing bytes
    lambda b: b[:-20] + bytes(20),  # a damaged payload
])
def test_damaged_blobs_are_refused(damage):
    cols = {"a": (np.arange(200, dtype=np.int64) * 7919, {}), "b": (np.linspace(0, 1, 200), {"as_float": True})}
    blob = damage(pack(200, cols, {"k": 1}))
    with pytest.raises(PackedError):
        p = Packed(blob)
        p.ints("a"), p.floats("b")


def test_decoding_loads_no_numpy(tmp_path):
    """``kbase show`` and ``history`` decode blobs in plain Python."""
    import subprocess
    import sys

    blob = pack(3, {"a": (np.array([1, -2, 3]), {"delta": True}), "f": (np.array([0.5, 1, 2]), {"as_float": True})})
    (tmp_path / "b.bin").write_bytes(blob)
    code = ("import sys; from kbase.store.codec.packed import Packed; p = Packed(open(sys.argv[1], 'rb').read()); "
            "assert p.ints('a') == [1, -2, 3] and p.floats('f') == [0.5, 1.0, 2.0]; "
            "assert 'numpy' not in sys.modules, 'numpy loaded'")
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "b.bin")], check=True)


def test_one_zstd_context_per_thread():
    """Zstandard contexts are not thread-safe: each thread decodes with its own."""
    from concurrent.futures import ThreadPoolExecutor

    blobs = [pack(500, {"x": (np.arange(500, dtype=np.int64) * k, {})}) for k in range(40)]

    def read(k: int) -> bool:
        return Packed(blobs[k]).ints("x") == (np.arange(500) * k).tolist()

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(pool.map(read, range(40)))
    assert packed._zstd("decompressor") is packed._zstd("decompressor")


def test_rows_of_a_matrix_column():
    """The report reads 25 kernels' samples of each baseline: a matrix column's rows decode alone."""
    rng = np.random.default_rng(3)
    m = rng.integers(-5000, 5000, size=(30, 7))
    p = Packed(pack(30, {"m": (m.ravel(), {}), "z": (np.zeros(30 * 7, dtype=np.int64), {})}))
    at = np.array([0, 3, 29, 3])
    np.testing.assert_array_equal(p.array("m", rows=(at, 7)), m[at])
    np.testing.assert_array_equal(p.array("z", rows=(at, 7)), np.zeros((4, 7)))
    np.testing.assert_array_equal(p.array("m").reshape(30, 7), m)
    with pytest.raises(PackedError):
        p.array("m", rows=(at, 8))


def _legacy(blob: bytes, codec: str) -> bytes:
    """``blob`` with its payload compressed as format 1's early drafts did: raw deflate (codec 1) or raw LZMA2."""
    import lzma
    import zlib

    p = Packed(blob)
    if not p._body_size:
        return blob[:4] + bytes([1 if codec == "deflate" else 2]) + blob[5:]
    body = canonical(blob)[p._payload_at :]
    if codec == "deflate":
        z = zlib.compressobj(9, zlib.DEFLATED, -15)
        payload, byte = z.compress(body) + z.flush(), 1
    else:
        payload, byte = lzma.compress(body, format=lzma.FORMAT_RAW, filters=[
            {"id": lzma.FILTER_LZMA2, "preset": 6, "dict_size": 1 << 20}]), 2
    return blob[:4] + bytes([byte]) + blob[5 : p._payload_at] + payload

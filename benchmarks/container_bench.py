"""The kernel-table container, by measurement (docs/store-format.md): one 500-kernel x 50-iteration bulk baseline
(``synth.history``'s, every blob its own) stored as kbase's packed columns (``packed``), as Arrow IPC (pyarrow,
Zstandard per buffer) and as ``.npy`` arrays in one Zstandard stream; the same integer columns in each (the
mantissa codes, residuals and deltas ``kernel_blobs`` / ``sample_blobs`` compute: the container is what differs).
Prints bytes per baseline and the decode time of the levels (what history reads) and of everything.

    python benchmarks/container_bench.py
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _table():
    from kbase.synth.history import _bulk_kernels, _bulk_mix, _bulk_op_plan, _bulk_sketches

    rng = np.random.default_rng(0)
    mix = _bulk_mix(500)
    naming = [(k.name, k.name, k.short_name, "compute", "-") for k in mix]
    mean = np.array([k.mean_ns for k in mix], float)
    launches = np.array([max(k.launches_per_iter, 1) for k in mix], float)
    per = np.rint((launches * 8 * mean)[:, None] * (1 + 0.01 * rng.standard_normal((500, 50))))
    cnt = np.repeat((launches * 8)[:, None], 50, axis=1)
    total = per.sum(axis=1)
    sketches = _bulk_sketches(rng, total, cnt.sum(axis=1), mean)
    return _bulk_kernels(naming, total, per, cnt, sketches, int(total.sum() / 8 / 0.9), 8, 50,
                         plan=_bulk_op_plan(500, 0.2), rng=rng)


def _columns(blob: bytes) -> dict[str, np.ndarray]:
    from kbase.store.codec.packed import Packed

    p = Packed(blob)
    return {n: p.array(n) for n in p.names}


def _arrow(cols: dict[str, np.ndarray]) -> bytes:
    import pyarrow as pa

    n = max(len(v) for v in cols.values())
    arrays = {k: pa.array(np.pad(v, (0, n - len(v))).astype(np.min_scalar_type(int(v.max())) if v.dtype.kind == "i"
                                                               and len(v) and v.min() >= 0 else v.dtype))
              for k, v in cols.items()}
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, pa.table(arrays).schema,
                           options=pa.ipc.IpcWriteOptions(compression="zstd")) as w:
        w.write_table(pa.table(arrays))
    return sink.getvalue()


def _npy(cols: dict[str, np.ndarray]) -> bytes:
    import zstandard

    buf = io.BytesIO()
    for v in cols.values():
        np.save(buf, v.astype(np.min_scalar_type(int(v.max()))) if v.dtype.kind == "i" and len(v) and v.min() >= 0
                else v)
    return zstandard.ZstdCompressor(level=15).compress(buf.getvalue())


def _all(p) -> list:
    return [p.array(n) for n in p.names]


def _time(fn, n: int = 200) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def main() -> None:
    import pyarrow as pa
    import zstandard

    from kbase.store.codec.packed import Packed

    t = _table()
    blobs = {"levels": t.blobs.levels, "board": t.blobs.board, "samples": t.blobs.samples,
             "sketches": t.blobs.sketches, "ops": t.ops}
    cols = {k: _columns(v) for k, v in blobs.items() if v is not None}
    arrow = {k: _arrow(c) for k, c in cols.items()}
    npy = {k: _npy(c) for k, c in cols.items()}
    dz = zstandard.ZstdDecompressor()
    print(f"{'container':<16}" + "".join(f"{k:>10}" for k in cols) + f"{'total B':>10}{'levels us':>11}{'all us':>9}")
    rows = {
        "packed columns": ({k: len(v) for k, v in blobs.items() if v is not None},
                           lambda: Packed(blobs["levels"]).array("total_ns"),
                           lambda: [_all(Packed(v)) for v in blobs.values() if v]),
        "Arrow IPC zstd": ({k: len(v) for k, v in arrow.items()},
                           lambda: pa.ipc.open_stream(arrow["levels"]).read_all().column("total_ns").to_numpy(),
                           lambda: [pa.ipc.open_stream(v).read_all() for v in arrow.values()]),
        ".npy + zstd": ({k: len(v) for k, v in npy.items()},
                        lambda: np.load(io.BytesIO(dz.decompress(npy["levels"])), allow_pickle=False),
                        lambda: [dz.decompress(v) for v in npy.values()]),
    }
    for name, (sizes, levels, everything) in rows.items():
        print(f"{name:<16}" + "".join(f"{sizes[k]:>10,}" for k in cols) + f"{sum(sizes.values()):>10,}"
              f"{_time(levels):>11.1f}{_time(everything, 50):>9.0f}")


if __name__ == "__main__":
    main()

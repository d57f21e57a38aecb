"""What op attribution costs (issue 27): ``kbase top`` of the generated 1M-kernel export with and without the op
split, interleaved in one process (warm: imports and page cache paid), and the attribution alone on that
profile with an ``emit_nvtx``-like op range around every launch (a distinct name per call: the worst case for
the names). Prints medians; not a timed test.

    .venv/bin/python benchmarks/op_cost.py [--out bench-out] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import ensure_export  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "bench-out")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    import kbase
    from kbase.analysis.ops import attribute_ops
    from kbase.api.capture import _board
    from kbase.readers.profile import RANGE_ANNOTATION, RangeColumns

    path = ensure_export(args.out, 1_000_000, 1, print)
    s = kbase.Settings.load()
    times: dict[str, list[float]] = {"top (kernels)": [], "top --by op (kernels + ops)": []}
    for _ in range(args.runs):  # interleaved: both see the same minute of a shared machine
        for label, ops in (("top (kernels)", False), ("top --by op (kernels + ops)", True)):
            t0 = time.perf_counter()
            lb = _board(path, s, None, ops=ops)
            times[label].append(time.perf_counter() - t0)
    print(f"{path.name}: {lb.summary.launches:,} launches in the window, ops: "
          f"{len(lb.ops.names) if lb.ops is not None else 0}")
    for label, ts in times.items():
        print(f"  {label}: median {statistics.median(ts):.3f} s (min {min(ts):.3f} s, {len(ts)} runs)")
    d = [b - a for a, b in zip(*times.values())]
    print(f"  difference per run (paired): median {statistics.median(d) * 1e3:+.0f} ms")

    profile = kbase.read(path, s)
    win = kbase.window(profile, s)
    t0 = time.perf_counter()
    attribute_ops(profile, win.mask, None)
    phases = time.perf_counter() - t0
    k = profile.columns
    assert k.launch_start is not None and k.launch_tid is not None
    has = np.flatnonzero(k.launch_start >= 0)
    n = len(has)
    ops = np.array([f"aten::op{i % 300}, op_id = {i}" for i in range(n)], dtype=object)  # distinct per call
    r = profile.range_columns
    # each launch call inside its own range (a range per op call: they never overlap on a thread)
    profile.range_columns = RangeColumns(
        start=np.concatenate([r.start, k.launch_start[has]]), end=np.concatenate([r.end, k.launch_start[has] + 1]),
        tid=np.concatenate([r.tid, k.launch_tid[has]]), pid=np.concatenate([r.pid, k.launch_tid[has] >> 24]),
        name=np.concatenate([r.name, ops]),
        kind=np.concatenate([r.kind, np.full(n, RANGE_ANNOTATION, np.int8)]) if r.kind is not None else None)
    t0 = time.perf_counter()
    got = attribute_ops(profile, win.mask, None)
    worst = time.perf_counter() - t0
    print(f"  attribution alone, the export's own ranges ({len(r):,}): {phases:.3f} s; with an op range around "
          f"each of {n:,} launches, a distinct name each: {worst:.3f} s ({len(got.names) if got else 0} ops)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""kbase's binary segmentation against ruptures' (the library the design would otherwise use).

Not part of the project's dependencies: run with an interpreter that has ``ruptures`` and numpy, from
the repository root, e.g. ``python -m venv /tmp/rpt && /tmp/rpt/bin/pip install ruptures &&
/tmp/rpt/bin/python benchmarks/changepoints_vs_ruptures.py``. Prints the share of generated 40-point
series on which both find the same boundaries, the time per series of each, and ruptures' import time.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from kbase.comparison.changepoints import MIN_SIZE, PENALTY, detect_steps  # noqa: E402
from kbase.comparison.levels import level_noise  # noqa: E402


def main() -> int:
    t0 = time.perf_counter()
    try:
        import ruptures as rpt
    except ImportError:
        print("ruptures is not installed for this interpreter (see the module docstring)")
        return 2
    import_s = time.perf_counter() - t0
    rng = np.random.default_rng(3)
    series = []
    for i in range(2000):
        x = 1e5 * (1 + rng.normal(0, 0.002, 40))
        if i % 2:  # half of them with one step somewhere
            x[rng.integers(5, 35) :] *= 1 + rng.choice([0.01, 0.03, 0.05, -0.03])
        series.append(x)

    def kbase_steps(x: np.ndarray) -> list[int]:
        return [s.index for s in detect_steps(x.tolist(), sigma=level_noise(x.tolist()))]

    def ruptures_steps(x: np.ndarray) -> list[int]:
        sigma = level_noise(x.tolist())
        algo = rpt.Binseg(model="l2", min_size=MIN_SIZE, jump=1).fit(x)
        return algo.predict(pen=PENALTY * math.log(len(x)) * sigma * sigma)[:-1]

    found, per = {}, {}
    for f in (kbase_steps, ruptures_steps):
        f(series[0])
        t = time.perf_counter()
        found[f.__name__] = [f(x) for x in series]
        per[f.__name__] = (time.perf_counter() - t) / len(series)
    same = sum(a == b for a, b in zip(found["kbase_steps"], found["ruptures_steps"]))
    print(f"ruptures {rpt.__version__}: same boundaries on {same} of {len(series)} series")
    k, r = per["kbase_steps"], per["ruptures_steps"]
    print(f"per 40-point series: kbase {k * 1e3:.3f} ms, ruptures {r * 1e3:.3f} ms ({r / k:.0f}x)")
    print(f"import ruptures: {import_s:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

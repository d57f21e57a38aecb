"""Robust statistics of one series of per-run levels (a kernel's time per iteration over baselines),
in plain Python: the history commands load no numpy (its import alone is ~60 ms of a 0.4 s target)."""

from __future__ import annotations

import math
from collections.abc import Iterable

MAD_TO_SD = 1.0 / (0.6745 * math.sqrt(2.0))  # successive differences of iid noise have sd sqrt(2)·sigma


def finite(values: Iterable[float | None]) -> list[float]:
    """The finite values, as floats, in order (None and NaN left out)."""
    return [f for f in (float(v) for v in values if v is not None) if math.isfinite(f)]


def median(x: list[float]) -> float:
    """Median of a non-empty list (the mean of the two middle values for an even count)."""
    s = sorted(x)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2.0


def level_noise(levels: Iterable[float | None]) -> float:
    """Relative run-to-run sd of one kernel from its per-run levels (oldest first), robust to steps:
    median |successive difference| scaled to an sd. NaN with fewer than 3 finite levels."""
    x = finite(levels)
    if len(x) < 3:
        return float("nan")
    centre = median(x)
    if centre <= 0:
        return float("nan")
    return median([abs(b - a) for a, b in zip(x, x[1:])]) * MAD_TO_SD / centre

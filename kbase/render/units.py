"""Numbers for people: one unit per concept, chosen by magnitude; p-values without scientific noise."""

from __future__ import annotations

import math


def _missing(x: float | int | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def fmt_ns(ns: float | int | None, scale: float | int | None = None) -> str:
    """A duration in the unit its magnitude (or ``scale``'s, to print several values in one unit) calls for."""
    if _missing(ns):
        return "-"
    assert ns is not None
    a = abs(ns if scale is None or _missing(scale) else scale)
    if a >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def fmt_ns_pair(before: float | int | None, after: float | int | None) -> tuple[str, str]:
    """Two durations in one unit (the larger's): ``1.000 s -> 1.000 s``, never ``1.000 s -> 1000.000 ms``."""
    sizes = [abs(x) for x in (before, after) if x is not None and not _missing(x)]
    scale = max(sizes) if sizes else None
    return fmt_ns(before, scale), fmt_ns(after, scale)


def fmt_ns_range(lo: float | int | None, hi: float | int | None) -> str:
    """A compact range in the unit of its upper end, three significant digits: ``0.05–6.8 ms``."""
    if _missing(lo) or _missing(hi):
        return "-"
    assert lo is not None and hi is not None
    a = abs(hi)
    if a < 1e3:
        return f"{lo:.0f}–{hi:.0f} ns"
    scale, unit = (1e9, "s") if a >= 1e9 else (1e6, "ms") if a >= 1e6 else (1e3, "µs")
    return f"{_sig3(lo / scale)}–{_sig3(hi / scale)} {unit}"


def _sig3(x: float) -> str:
    a = abs(x)
    if a >= 100 or x == 0:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1:
        return f"{x:.2f}"
    return f"{x:.2g}"


def fmt_pct(x: float | None, digits: int = 1) -> str:
    """A fraction as a percentage (0.123 -> 12.3%)."""
    if _missing(x):
        return "-"
    assert x is not None
    return f"{100 * x:.{digits}f}%"


def fmt_delta_pct(x: float | str | None) -> str:
    """A change already in percent (+12.3%); an infinite one (from zero) is "new"."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, str) or math.isinf(x):
        return "new"
    return f"{x:+.1f}%"


def fmt_p(p: float | None) -> str:
    """A p-value as a person reads it: 0.03, 0.0004, < 1e-6."""
    if _missing(p):
        return "-"
    assert p is not None
    if p < 1e-6:
        return "< 1e-6"
    if p < 0.001:
        return f"{p:.1e}"
    return f"{p:.2g}"

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
    size, unit = _unit(abs(ns if scale is None or _missing(scale) else scale))
    return f"{ns / size:.{_DIGITS[unit]}f} {unit}"


_DIGITS = {"s": 3, "ms": 3, "µs": 2, "ns": 0}


def _unit(a: float) -> tuple[float, str]:
    """The unit a duration of ``a`` ns is read in, and its size in ns."""
    return next(((size, unit) for size, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")) if a >= size), (1.0, "ns"))


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
    size, unit = _unit(abs(hi))
    if unit == "ns":
        return f"{lo:.0f}–{hi:.0f} ns"
    return f"{_sig3(lo / size)}–{_sig3(hi / size)} {unit}"


def _sig3(x: float) -> str:
    """About three significant digits: 306, 57.5, 1.02, 0.05."""
    a = abs(x)
    digits = 0 if a >= 100 or x == 0 else 1 if a >= 10 else 2 if a >= 1 else None
    return f"{x:.2g}" if digits is None else f"{x:.{digits}f}"


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

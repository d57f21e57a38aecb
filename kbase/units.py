"""Numbers for people: one unit per concept, chosen by magnitude; one unit per table column (``column_unit``);
p-values without scientific noise; money."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

ABSENT = "–"  # a value that does not exist (a new kernel's time before it), in every table


def _missing(x: float | int | None) -> bool:
    """No number to show: None, NaN, or infinite (a ratio over zero): every formatter writes ``ABSENT``."""
    return x is None or (isinstance(x, float) and not math.isfinite(x))


def fmt_ns(ns: float | int | None, scale: float | int | None = None) -> str:
    """A duration in the unit its magnitude (or ``scale``'s, to print several values in one unit) calls for."""
    if _missing(ns):
        return ABSENT
    assert ns is not None
    size, unit = _unit(abs(ns if scale is None or _missing(scale) else scale))
    return f"{ns / size:.{_DIGITS[unit]}f} {unit}"


_DIGITS = {"s": 3, "ms": 3, "µs": 2, "ns": 0}


def _unit(a: float) -> tuple[float, str]:
    """The unit a duration of ``a`` ns is read in, and its size in ns."""
    return next(((size, unit) for size, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")) if a >= size), (1.0, "ns"))


def fmt_ns_change(before: float | int | None, after: float | int | None,
                  delta: float | int | None) -> tuple[str, str, str]:
    """A change as before, after and signed Δ, all in one unit (the largest's): ``0.665 ms``, ``4.606 ms``,
    ``-3.941 ms``, never ``+3941.0 µs`` beside milliseconds."""
    sizes = [abs(x) for x in (before, after, delta) if x is not None and not _missing(x)]
    scale = max(sizes) if sizes else None
    if delta is None or _missing(delta):
        return fmt_ns(before, scale), fmt_ns(after, scale), ABSENT
    return fmt_ns(before, scale), fmt_ns(after, scale), ("-" if delta < 0 else "+") + fmt_ns(abs(delta), scale)


def fmt_signed_ns(ns: float | int | None) -> str:
    """A change with its sign, in the unit of its magnitude: ``+1.200 ms``, ``-1.945 ms``."""
    if _missing(ns):
        return ABSENT
    assert ns is not None
    return ("-" if ns < 0 else "+") + fmt_ns(abs(ns))


@dataclass(frozen=True)
class ColumnUnit:
    """One unit (and number of decimals) for every cell of a table column: ``column_unit`` picks it."""

    size: float
    unit: str
    digits: int
    signed: bool = False

    def __call__(self, ns: float | int | None) -> str:
        """A cell: the value in the column's unit; ``ABSENT`` when there is none."""
        if _missing(ns):
            return ABSENT
        assert ns is not None
        if ns == 0:  # an exact zero (no change): one digit, never a "0.000 ms" that reads like an absent value
            return f"0 {self.unit}"
        value = ns / self.size
        text = f"{value:+.{self.digits}f}" if self.signed else f"{value:.{self.digits}f}"
        if ns != 0 and float(text) == 0:  # not zero, only smaller than the column's last digit
            tiny = f"<{10 ** -self.digits:.{self.digits}f}"
            text = (("-" if ns < 0 else "+") if self.signed else "-" if ns < 0 else "") + tiny
        return f"{text} {self.unit}"

    def range(self, lo: float | int | None, hi: float | int | None) -> str:
        """A compact range in the column's unit, about three significant digits each: ``0.05–6.8 ms``."""
        if _missing(lo) or _missing(hi):
            return ABSENT
        assert lo is not None and hi is not None
        if self.unit == "ns":
            return f"{lo:.0f}–{hi:.0f} ns"
        return f"{_sig3(lo / self.size)}–{_sig3(hi / self.size)} {self.unit}"


_UNITS = ((1.0, "ns"), (1e3, "µs"), (1e6, "ms"), (1e9, "s"))


def group_units(sides: Iterable[float | int | None], deltas: Iterable[float | int | None]) -> tuple[ColumnUnit,
                                                                                                    ColumnUnit]:
    """One unit for a row group's times and their changes (before, after and Δ read in the same unit and decimals,
    at most four digits before the point): the (times, signed Δ) cells of one table or one group of its rows. A
    change under the last decimal reads ``<0.001 ms``."""
    changes = [abs(float(d)) for d in deltas if d is not None and not _missing(d)]
    u = column_unit([*sides, *changes])
    return u, ColumnUnit(u.size, u.unit, u.digits, True)


def column_unit(values: Iterable[float | int | None], signed: bool = False) -> ColumnUnit:
    """The unit of a column of durations, from its magnitude: the unit its median reads in (a leaderboard's
    top rows then read as ``1250.4 ms``, its tail as ``0.120 ms``), one larger when the largest value would
    need more than four digits before the point; decimals for about four significant digits at the median.
    ``signed``: changes, written with ``+`` / ``-``."""
    mags = sorted(abs(float(v)) for v in values if v is not None and v != 0 and math.isfinite(v))
    if not mags:
        return ColumnUnit(1.0, "ns", 0, signed)
    median = mags[len(mags) // 2]
    i = max(k for k, (size, _) in enumerate(_UNITS) if median >= size or k == 0)
    while i + 1 < len(_UNITS) and mags[-1] / _UNITS[i][0] >= 10_000:
        i += 1
    size, unit = _UNITS[i]
    if unit == "ns":
        digits = 0
    else:
        ref = median / size
        digits = 1 if ref >= 100 else 2 if ref >= 10 or unit == "µs" else 3
    return ColumnUnit(size, unit, digits, signed)


def fmt_money(amount: float | None, currency: str = "$", signed: bool = True) -> str:
    """An amount of money, rounded to what a budget reads: ``+$3,950``, ``-$120``, ``+$0.42``."""
    if _missing(amount):
        return ABSENT
    assert amount is not None
    a = abs(amount)
    body = f"{a:,.0f}" if a >= 100 else f"{a:,.2f}" if a < 10 else f"{a:,.1f}"
    sign = ("-" if amount < 0 else "+") if signed else ("-" if amount < 0 else "")
    return f"{sign}{currency}{body}"


def fmt_ns_pair(before: float | int | None, after: float | int | None) -> tuple[str, str]:
    """Two durations in one unit (the larger's): ``1.000 s -> 1.000 s``, never ``1.000 s -> 1000.000 ms``."""
    sizes = [abs(x) for x in (before, after) if x is not None and not _missing(x)]
    scale = max(sizes) if sizes else None
    return fmt_ns(before, scale), fmt_ns(after, scale)


def fmt_ns_range(lo: float | int | None, hi: float | int | None) -> str:
    """A compact range in the unit of its upper end, three significant digits: ``0.05–6.8 ms``."""
    if _missing(lo) or _missing(hi):
        return ABSENT
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
        return ABSENT
    assert x is not None
    return f"{100 * x:.{digits}f}%"


def fmt_delta_pct(x: float | str | None) -> str:
    """A change already in percent (+12.3%); an infinite one (from zero) is "new"."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return ABSENT
    if isinstance(x, str) or math.isinf(x):
        return "new"
    return f"{x:+.1f}%"


def fmt_p(p: float | None) -> str:
    """A p-value as a person reads it: 0.03, 0.0004, < 1e-6."""
    if _missing(p):
        return ABSENT
    assert p is not None
    if p < 1e-6:
        return "< 1e-6"
    if p < 0.001:
        return f"{p:.1e}"
    return f"{p:.2g}"

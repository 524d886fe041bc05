"""Numbers for people, the same in pages, charts and reports: three significant digits, never an exponent, and
chart axes whose ticks are round, distinct and written with the decimals their step needs."""

from __future__ import annotations

import math
from decimal import Decimal

#: An axis' step is one of these times a power of ten.
_STEPS = (1, 2, 2.5, 5, 10)


def number(value: float | None) -> str:
    """Three significant digits, never an exponent: 1,130 · 45.2 · 0.0123 · 0.00400 (a measured 0.004 is not 0); a
    whole number as one (a datasheet's 80 GB, not 80.0)."""
    if value is None:
        return ""
    if float(value).is_integer() or abs(value) >= 100:
        return f"{value:,.0f}"
    digits = max(0, 2 - int(f"{abs(value):e}".split("e")[1]))
    return f"{value:,.{digits}f}"


def percent(value: float | None) -> str:
    """A fraction as a whole percentage (0.707 → 71%), or with significant figures below 1% (0.004 → 0.400%)."""
    if value is None:
        return ""
    shown = value * 100
    return f"{shown:.0f}%" if shown == 0 or abs(shown) >= 1 else f"{number(shown)}%"


def size(value: float) -> str:
    """Bytes for people, in binary units as the sizes measured double: 512 B · 1.5 KiB · 4 MiB · 2 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.4g} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _step(span: float, ticks: int) -> Decimal:
    """The round step (1, 2, 2.5 or 5 times a power of ten) that cuts ``span`` into about ``ticks`` parts."""
    raw = span / ticks if span > 0 else 1.0
    exponent = math.floor(math.log10(raw))
    for mult in _STEPS:
        step = Decimal(str(mult)) * Decimal(10) ** exponent
        if raw <= step * Decimal("1.000001"):
            return step
    return Decimal(10) ** (exponent + 1)


def axis(lo: float, hi: float, *, ticks: int = 5, percent: bool = False) -> list[tuple[float, str]]:
    """(value, label) of each tick of an axis that covers ``lo``..``hi``: round steps from the tick at or below
    ``lo`` to the one at or above ``hi``; each label has the decimals its step needs, so no two read alike at any
    range (0.002, 0.004 … or 0, 200,000 …). ``percent``: fractions written as percentages (0.5 → 50%)."""
    scale = 100 if percent else 1
    lo, hi = lo * scale, hi * scale
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    step = _step(hi - lo, ticks)
    decimals = max(0, -step.normalize().as_tuple().exponent)  # type: ignore[operator]
    first = math.floor(Decimal(repr(lo)) / step)
    last = math.ceil(Decimal(repr(hi)) / step)
    out = []
    for i in range(first, last + 1):
        value = i * step
        label = ("0" if value == 0 else f"{value:,.{decimals}f}") + ("%" if percent else "")
        out.append((float(value) / scale, label))
    return out

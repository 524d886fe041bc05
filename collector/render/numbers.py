"""Numbers for people, the same in pages, charts and reports: three significant digits, never an exponent
(``schemas.numbers``, which the agent's terminal tables share), and chart axes whose ticks are round, distinct and
written with the decimals their step needs."""

from __future__ import annotations

import math
from decimal import Decimal

from schemas.numbers import number, percent

__all__ = ["axis", "number", "percent", "size"]

#: An axis' step is one of these times a power of ten.
_STEPS = (1, 2, 2.5, 5, 10)


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

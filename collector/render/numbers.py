"""Numbers for people, the same in pages, charts and reports: three significant digits, never an exponent."""

from __future__ import annotations


def number(value: float | None) -> str:
    """Three significant digits, never an exponent: 1,130 · 45.2 · 0.0123."""
    if value is None:
        return ""
    if value == 0 or abs(value) >= 100:
        return f"{value:,.0f}"
    digits = max(0, 2 - int(f"{abs(value):e}".split("e")[1]))
    return f"{value:,.{digits}f}"

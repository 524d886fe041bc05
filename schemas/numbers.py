"""Numbers for people, the same in the agent's terminal tables and the collector's pages, report, charts and SQL
tables: three significant digits, never an exponent (a CPU's 0.00412 TFLOPS is not "0.00")."""

from __future__ import annotations


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

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


def size(value: float) -> str:
    """Bytes for people, in binary units as the sizes measured double: 512 B · 1.5 KiB · 4 MiB · 2 GiB."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.4g} {unit}"
        value /= 1024
    raise AssertionError("unreachable")

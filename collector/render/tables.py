"""Cell text shared by the Markdown and HTML renderers."""

from __future__ import annotations

from ..compare import Cell, Row


def value(cell: Cell | None, digits: int) -> str:
    if cell is None:
        return ""
    return f"{cell.median:,.{digits}f}"


def spread(cell: Cell | None, digits: int) -> str:
    """'' for one measurement; 'low–high, n=3' when several devices or runs measured the card."""
    if cell is None or cell.count < 2:
        return ""
    return f"{cell.low:,.{digits}f}–{cell.high:,.{digits}f}, n={cell.count}"


def label(row: Row) -> str:
    return f"{row.label} ({row.unit})"

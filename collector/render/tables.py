"""Cell text shared by the Markdown and HTML renderers: significant figures, never fixed decimals."""

from __future__ import annotations

from ..analysis.compare import Cell, Row
from .numbers import number


def value(cell: Cell | None) -> str:
    return "" if cell is None else number(cell.median)


def spread(cell: Cell | None) -> str:
    """'' for one measurement; 'low–high, n=3' when several devices or runs measured the card."""
    if cell is None or cell.count < 2:
        return ""
    return f"{number(cell.low)}–{number(cell.high)}, n={cell.count}"


def label(row: Row) -> str:
    return f"{row.label} ({row.unit})"

"""SQL results as a table for people (the terminal's and the /sql page's: every value literal, numbers as the pages
write them), CSV (neutralised for spreadsheets) or JSON (both at full precision)."""

from __future__ import annotations

import json
import math
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Literal, Protocol
from uuid import UUID

from rich.console import Console
from rich.table import Table

from schemas.terminal import literal

from .csvsafe import write_csv
from .numbers import number


class QueryResult(Protocol):
    """What a statement answered, as the SQL guard returns it (``store.sqlguard.QueryResult``)."""

    @property
    def columns(self) -> list[str]: ...
    @property
    def rows(self) -> list[tuple[Any, ...]]: ...
    @property
    def truncated(self) -> bool: ...


def plain(value: Any) -> Any:
    """JSON-safe: timestamps as ISO text, UUIDs and other objects as strings."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return str(value)


def shown(value: Any) -> str:
    """A value as a table shows it to a person: a float with three significant digits, as every page writes a figure
    (0.004205383872380331 is 0.00421), NULL as nothing, the rest as ``plain`` text. CSV and JSON keep every digit."""
    if value is None:
        return ""
    if isinstance(value, float):
        return number(value) if math.isfinite(value) else str(value)
    return str(plain(value))


def as_csv(result: QueryResult) -> str:
    """Numbers as numbers (DECIMAL included), everything else as ``plain`` text, neutralised for spreadsheets."""
    return write_csv(result.columns, ([v if isinstance(v, Decimal) else plain(v) for v in row] for row in result.rows))


def as_json(result: QueryResult) -> str:
    rows = [dict(zip(result.columns, (plain(v) for v in row), strict=True)) for row in result.rows]
    return json.dumps({"columns": result.columns, "rows": rows, "truncated": result.truncated}, indent=1)


def render_query(result: QueryResult, fmt: Literal["table", "csv", "json"], console: Console) -> None:
    if fmt == "csv":
        console.file.write(as_csv(result))
    elif fmt == "json":
        console.file.write(as_json(result) + "\n")
    else:
        table = Table(header_style="bold")
        for column in result.columns:  # names can be data too (PIVOT makes columns of values)
            table.add_column(literal(column))
        for row in result.rows:
            table.add_row(*(literal(shown(v)) for v in row))
        console.print(table)

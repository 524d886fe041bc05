"""CSV a spreadsheet opens as data, not formulas: OWASP's "CSV injection" rule, for every CSV the collector writes.

A text cell whose first character is one of ``FORMULA_TRIGGERS`` gets a leading ``'``, which spreadsheets read as
"this is text" (and hide); numbers are written as numbers, so a negative figure stays a number.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from decimal import Decimal

#: What a spreadsheet starts a formula with (OWASP: ``=``, ``+``, ``-``, ``@``, tab, carriage return).
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")


def neutralise(value: object) -> object:
    """One cell as a spreadsheet should see it: text that would start a formula quoted with ``'``, ``None`` empty."""
    if value is None:
        return ""
    if isinstance(value, (int, float, Decimal)):
        return value
    text = value if isinstance(value, str) else str(value)
    return "'" + text if text.startswith(FORMULA_TRIGGERS) else text


def neutralise_sql(column: str) -> str:
    """``neutralise`` as a DuckDB expression over one VARCHAR column, for exports DuckDB writes itself (``COPY``)."""
    quoted = '"' + column.replace('"', '""') + '"'
    triggers = ", ".join(f"chr({ord(c)})" for c in FORMULA_TRIGGERS)
    return f"CASE WHEN left({quoted}, 1) IN ({triggers}) THEN '''' || {quoted} ELSE {quoted} END AS {quoted}"


def write_csv(header: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    """Header and rows as CSV text, every cell (header included: card names are data) through ``neutralise``."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([neutralise(c) for c in header])
    writer.writerows([neutralise(c) for c in row] for row in rows)
    return buf.getvalue()

"""Read-only SQL for users: exactly one SELECT-like statement, a row cap with a ``truncated`` flag.

The statement is classified by DuckDB's own parser (``extract_statements``), not by pattern matching, so
comments, string literals and odd spacing cannot smuggle a second statement or a write past the check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

from .errors import QueryFailed, QueryRefused

ALLOWED = {"SELECT", "EXPLAIN"}
MAX_SQL_CHARS = 20_000


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool


def check_sql(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The one statement in ``sql`` if it only reads; QueryRefused naming what it is otherwise."""
    if len(sql) > MAX_SQL_CHARS:
        raise QueryRefused(f"the query is {len(sql)} characters long; the limit is {MAX_SQL_CHARS}")
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryFailed(f"the query does not parse: {_first_line(exc)}") from exc
    if len(statements) != 1:
        raise QueryRefused(f"send exactly one statement; this has {len(statements)}")
    kind = statements[0].type.name
    if kind not in ALLOWED:
        raise QueryRefused(f"only SELECT queries are allowed (read-only); this is a {kind} statement")
    return sql


def run_query(con: duckdb.DuckDBPyConnection, sql: str, *, max_rows: int) -> QueryResult:
    check_sql(con, sql)
    try:
        cursor = con.execute(sql)
        columns = [d[0] for d in cursor.description or []]
        rows = cursor.fetchmany(max_rows + 1)
    except duckdb.Error as exc:
        raise QueryFailed(_first_line(exc)) from exc
    return QueryResult(columns=columns, rows=rows[:max_rows], truncated=len(rows) > max_rows)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__

"""Read-only SQL for users: exactly one SELECT-like statement, in a read-only transaction, with a time limit and a
row cap that sets ``truncated``.

The statement is classified by DuckDB's own parser (``extract_statements``), not by pattern matching, so
comments, string literals and odd spacing cannot smuggle a second statement or a write past the check. The
server's database also has external access off and its configuration locked (``Store.harden``), so a SELECT
cannot read files either.
"""

from __future__ import annotations

import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import duckdb

from .errors import QueryFailed, QueryRefused

ALLOWED = {"SELECT", "EXPLAIN"}
MAX_SQL_CHARS = 20_000


class QueryTimeout(QueryFailed):
    code = "query_timeout"


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    elapsed_s: float = 0.0


def check_sql(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The one statement in ``sql`` if it only reads; QueryRefused naming what it is otherwise."""
    if not sql.strip():
        raise QueryRefused("the query is empty; send one SELECT statement")
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


def run_query(
    con: duckdb.DuckDBPyConnection, sql: str, *, max_rows: int, timeout_s: float | None = None
) -> QueryResult:
    """Run one checked statement in a read-only transaction; interrupted after ``timeout_s``."""
    check_sql(con, sql)
    timer = threading.Timer(timeout_s, con.interrupt) if timeout_s else None
    began = time.perf_counter()
    con.execute("BEGIN TRANSACTION READ ONLY")
    try:
        if timer is not None:
            timer.start()
        cursor = con.execute(sql)
        columns = [d[0] for d in cursor.description or []]
        rows = cursor.fetchmany(max_rows + 1)
    except duckdb.InterruptException as exc:
        raise QueryTimeout(f"the query ran past the time limit of {timeout_s:g} s and was stopped") from exc
    except duckdb.Error as exc:
        raise QueryFailed(_first_line(exc)) from exc
    finally:
        if timer is not None:
            timer.cancel()
        with suppress(duckdb.Error):
            con.execute("ROLLBACK")
    return QueryResult(columns, rows[:max_rows], len(rows) > max_rows, time.perf_counter() - began)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__

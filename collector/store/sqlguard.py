"""Read-only SQL for users: exactly one SELECT-like statement, in a read-only transaction, with a time limit and
caps on rows and on bytes that set ``truncated``.

The statement is classified by DuckDB's own parser (``extract_statements``), not by pattern matching, so
comments, string literals and odd spacing cannot smuggle a second statement or a write past the check. Its syntax
tree (``json_serialize_sql``) is then walked for what a reader must not reach even in a SELECT: the server's
settings and file paths (``current_setting``, ``duckdb_settings()``, ``duckdb_databases``, ``pg_settings``…),
maintenance (``checkpoint()``, log truncation) and SQL run from a string (``query()``). The server's database also
has external access off and its configuration locked (``Store.harden``), so a SELECT cannot read files either, and
errors reach the reader whole, with DuckDB's hints (candidate bindings, "did you mean", the caret under the query's
part it means) and server paths cut out.

Rows are fetched in small batches and counted in bytes as they come, so a query of huge values stops at
``max_bytes`` instead of building its whole answer; DuckDB computes one vector (up to 2,048 rows) at a time, so
that much of a query's rows can exist for a moment before the cap applies.

A statement stopped at its time limit (or by ``QueryStop.stop``) is answered QueryTimeout, never with the rows it had
so far: DuckDB can end an interrupted statement without an error (an interrupt that lands after the last rows were
fetched, or before DuckDB began executing, which forgets it and runs on), so whether the stop fired decides, not what
DuckDB returned, and a stopped statement is interrupted again until it has ended.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from typing import Any, Literal

import duckdb

from .errors import QueryFailed, QueryRefused
from .redact import scrub_message

ALLOWED = {"SELECT", "EXPLAIN"}
MAX_SQL_CHARS = 20_000
#: An answer's values stop at this many bytes unless the caller says otherwise (the server's ``sql_max_bytes``).
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
#: Rows converted to Python at a time, so the byte cap is checked often.
FETCH_ROWS = 64
#: Functions, table functions and views a reader may not use: server settings and paths, maintenance, logs,
#: secrets, SQL from a string, sleeping. Besides these, every ``duckdb_*`` and ``pragma_*`` name not in SAFE.
DENIED = frozenset({
    "current_setting", "getenv", "checkpoint", "force_checkpoint", "query", "query_table", "truncate_duckdb_logs",
    "write_log", "which_secret", "add_grammar_extension", "remove_grammar_extension", "sleep_ms", "pg_sleep",
    "pg_settings", "glob",
})  # fmt: skip
DENIED_PREFIXES = ("duckdb_", "pragma_", "enable_", "disable_")
#: The catalog's own description of the tables and views: what a SQL user needs to find their way.
SAFE = frozenset({
    "duckdb_tables", "duckdb_views", "duckdb_columns", "duckdb_schemas", "duckdb_constraints", "duckdb_indexes",
    "duckdb_sequences", "duckdb_types", "duckdb_functions", "duckdb_keywords", "duckdb_dependencies",
    "pragma_table_info",
})  # fmt: skip
_EXPLAIN = re.compile(r"^\s*(?:(?:/\*.*?\*/|--[^\n]*\n)\s*)*EXPLAIN\s+(?:ANALYZE\s+)?(?:\([^)]*\)\s*)?(?P<inner>.+)$",
                      re.IGNORECASE | re.DOTALL)  # fmt: skip


#: A stopped statement is interrupted again this often until it has ended (DuckDB forgets an interrupt that lands
#: before it begins executing a statement).
REINTERRUPT_S = 0.05


class QueryTimeout(QueryFailed):
    code = "query_timeout"


class QueryStop:
    """Stops one statement at its time limit or when ``stop`` is called (from any thread), whichever comes first; once
    it has fired, the statement's answer is QueryTimeout whatever DuckDB returned."""

    def __init__(self) -> None:
        self.rows = 0  # rows fetched so far (progress; the timeout's message says it)
        self.cancelled = False  # stopped by ``stop`` rather than by the time limit
        self._lock = threading.Lock()
        self._wake = threading.Event()  # stop() was called, or the statement ended
        self._ended = threading.Event()
        self._fired = False

    def stop(self) -> bool:
        """Stop the statement now; False when it had already ended (its answer stands)."""
        with self._lock:
            if self._ended.is_set():
                return False
            self._fired = self.cancelled = True
        self._wake.set()
        return True

    @property
    def fired(self) -> bool:
        """Whether the statement was stopped (its answer is QueryTimeout)."""
        return self._fired

    @property
    def ended(self) -> bool:
        """Whether the statement has ended: a stop now changes nothing."""
        return self._ended.is_set()

    @contextmanager
    def watching(self, con: duckdb.DuckDBPyConnection, timeout_s: float | None) -> Iterator[None]:
        """Interrupt ``con`` once ``timeout_s`` has passed or ``stop`` is called, and again until the block ends."""
        watcher = threading.Thread(target=self._watch, args=(con, timeout_s), name="flopfleet-sql-stop", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            with self._lock:  # after this, nothing interrupts ``con``: its next statement (ROLLBACK) runs whole
                self._ended.set()
            self._wake.set()

    def _watch(self, con: duckdb.DuckDBPyConnection, timeout_s: float | None) -> None:
        self._wake.wait(timeout_s)
        while True:
            with self._lock:
                if self._ended.is_set():
                    return
                self._fired = True
                con.interrupt()
            if self._ended.wait(REINTERRUPT_S):
                return


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    elapsed_s: float = 0.0
    truncated_by: Literal["max_rows", "max_bytes"] | None = None  # which cap cut the answer


def _names(tree: Any) -> Iterator[str]:
    """Every function and table name a serialized statement refers to, lower-cased."""
    if isinstance(tree, dict):
        if tree.get("class") == "FUNCTION" and isinstance(tree.get("function_name"), str):
            yield tree["function_name"].lower()
        if tree.get("type") == "BASE_TABLE" and isinstance(tree.get("table_name"), str):
            yield tree["table_name"].lower()
        for value in tree.values():
            yield from _names(value)
    elif isinstance(tree, list):
        for value in tree:
            yield from _names(value)


def _denied(name: str) -> bool:
    return name in DENIED or (name.startswith(DENIED_PREFIXES) and name not in SAFE)


def _check_select(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    row = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    try:  # the syntax tree is as deep as the query nests: hundreds of subqueries go past Python's recursion limit
        tree = json.loads(row[0]) if row else {"error": True}
        if tree.get("error"):
            raise QueryRefused(
                f"this query cannot be checked ({tree.get('error_message', 'no syntax tree')}); write it as a plain "
                "SELECT"
            )
        names = set(_names(tree))
    except RecursionError:
        raise QueryRefused(
            "this query nests too deeply to be checked (hundreds of levels of subqueries or expressions); write it "
            "with fewer, e.g. with WITH clauses"
        ) from None
    refused = sorted({name for name in names if _denied(name)})
    if refused:
        raise QueryRefused(
            f"{', '.join(refused)} cannot be used here: the server's settings, files and maintenance are not for "
            "readers"
        )


def check_sql(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    """The one statement in ``sql`` if it only reads; QueryRefused naming what it is otherwise."""
    if not sql.strip():
        raise QueryRefused("the query is empty; send one SELECT statement")
    if len(sql) > MAX_SQL_CHARS:
        raise QueryRefused(f"the query is {len(sql)} characters long; the limit is {MAX_SQL_CHARS}")
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryFailed(f"the query does not parse: {_message(exc)}") from exc
    if len(statements) != 1:
        raise QueryRefused(f"send exactly one statement; this has {len(statements)}")
    kind = statements[0].type.name
    if kind not in ALLOWED:
        raise QueryRefused(f"only SELECT queries are allowed (read-only); this is a {kind} statement")
    if kind == "EXPLAIN":
        match = _EXPLAIN.match(sql)
        if match is None:
            raise QueryRefused("this EXPLAIN cannot be checked; write it as EXPLAIN SELECT ...")
        check_sql(con, match.group("inner"))
    else:
        _check_select(con, sql)
    return sql


def size_of(value: Any) -> int:
    """About how many bytes ``value`` takes in an answer (text and blobs by length, other scalars as 8)."""
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    if isinstance(value, (list, tuple)):
        return 8 + sum(size_of(v) for v in value)
    if isinstance(value, dict):
        return 8 + sum(size_of(k) + size_of(v) for k, v in value.items())
    return 8


def run_query(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    *,
    max_rows: int,
    timeout_s: float | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    stop: QueryStop | None = None,
) -> QueryResult:
    """Run one checked statement in a read-only transaction; stopped after ``timeout_s`` (or by ``stop``), cut at
    ``max_rows`` rows or ``max_bytes`` bytes of values."""
    check_sql(con, sql)
    watched = stop is not None or timeout_s is not None
    stop = stop or QueryStop()
    began = time.perf_counter()
    rows: list[tuple[Any, ...]] = []
    size = 0
    cut: Literal["max_rows", "max_bytes"] | None = None
    con.execute("BEGIN TRANSACTION READ ONLY")
    try:
        with stop.watching(con, timeout_s) if watched else nullcontext():
            try:
                cursor = con.execute(sql)
                columns = [d[0] for d in cursor.description or []]
                while cut is None:
                    batch = cursor.fetchmany(min(FETCH_ROWS, max_rows + 1 - len(rows)))
                    if not batch:
                        break
                    for row in batch:
                        size += sum(size_of(v) for v in row)
                        if size > max_bytes:
                            cut = "max_bytes"
                            break
                        if len(rows) == max_rows:
                            cut = "max_rows"
                            break
                        rows.append(row)
                    stop.rows = len(rows)
            except duckdb.Error as exc:
                if not (stop.fired or isinstance(exc, duckdb.InterruptException)):
                    raise QueryFailed(_message(exc)) from exc
                raise _stopped(stop, timeout_s) from exc
        if stop.fired:  # it ended without an error, but after the stop: its rows may be any part of the answer
            raise _stopped(stop, timeout_s)
    finally:
        with suppress(duckdb.Error):
            con.execute("ROLLBACK")
    return QueryResult(columns, rows, cut is not None, time.perf_counter() - began, cut)


def _stopped(stop: QueryStop, timeout_s: float | None) -> QueryTimeout:
    """The one answer of a stopped statement (an interrupt from elsewhere counts as a cancel)."""
    timed_out = stop.fired and not stop.cancelled and timeout_s
    why = f"ran past the time limit of {timeout_s:g} s and was stopped" if timed_out else "was cancelled"
    fetched = f" after {stop.rows:,} row{'s' if stop.rows > 1 else ''}" if stop.rows else ""
    return QueryTimeout(f"the query {why}{fetched}")


def _message(exc: BaseException) -> str:
    """DuckDB's whole message, its hints and caret kept, with any server path cut out."""
    return scrub_message(str(exc)) or type(exc).__name__

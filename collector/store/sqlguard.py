"""Read-only SQL for users: exactly one SELECT-like statement, in a read-only transaction, with a time limit, a
memory limit, and caps on rows and on bytes that set ``truncated``.

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

A statement that takes more memory than its share (``query_memory``: read every ``MEMORY_POLL_S`` while it runs) is
stopped and answered QueryTooLarge. DuckDB computes the values of one vector before anything can interrupt it, and
a few functions make a value of any size from a small query (``repeat('x', 1e9)``: 1 GB a row, outside DuckDB's
memory count), so those are refused before the statement runs (``UNBOUNDED``).

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from typing import Any, Literal

import duckdb

from schemas.labels import human_bytes

from .errors import QueryFailed, QueryRefused
from .query_memory import QueryMemory
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
#: Scalar functions whose value's size is an argument, not the data's: one row of ``repeat('x', 1000000000)`` is a
#: gigabyte that DuckDB builds whole, outside its memory limit, before anything can stop it. (``range`` and
#: ``generate_series`` as tables, in FROM, make rows one vector at a time and stay allowed.)
UNBOUNDED = frozenset({"repeat", "lpad", "rpad", "list_resize", "array_resize", "range", "generate_series"})
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


#: How often a running statement's memory is read (``query_memory``); what it builds meanwhile is the overshoot.
MEMORY_POLL_S = 0.02
#: The longest a statement's end waits for its watcher to return (a last memory read takes about a millisecond).
JOIN_S = 10.0


class QueryTimeout(QueryFailed):
    code = "query_timeout"


class QueryTooLarge(QueryFailed):
    code = "query_too_large"


class QueryStop:
    """Stops one statement at its time limit, past its memory limit or when ``stop`` is called (from any thread),
    whichever comes first; once it has fired, the statement's answer is QueryTimeout (QueryTooLarge for memory)
    whatever DuckDB returned."""

    def __init__(self) -> None:
        self.rows = 0  # rows fetched so far (progress; the timeout's message says it)
        self.cancelled = False  # stopped by ``stop`` rather than by the time limit
        self.memory: QueryMemory | None = None  # set when it was stopped for taking more memory than its limit
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
    def watching(
        self, con: duckdb.DuckDBPyConnection, timeout_s: float | None, memory: QueryMemory | None = None
    ) -> Iterator[None]:
        """Interrupt ``con`` once ``timeout_s`` has passed, ``memory`` is past its limit or ``stop`` is called, and
        again until the block ends."""
        args = (con, timeout_s, memory)
        watcher = threading.Thread(target=self._watch, args=args, name="flopfleet-sql-stop", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            with self._lock:  # after this, nothing interrupts ``con``: its next statement (ROLLBACK) runs whole
                self._ended.set()
            self._wake.set()
            # Both events are set: it returns at once. Until it has, it holds ``con`` (and reads through the memory
            # cursor, closed next): a live cursor keeps the database open in DuckDB after the store closed it, so the
            # file could not be opened again with other settings, and a process that exits meanwhile aborts in
            # DuckDB's code.
            watcher.join(JOIN_S)

    def _watch(self, con: duckdb.DuckDBPyConnection, timeout_s: float | None, memory: QueryMemory | None) -> None:
        over = self._wait(timeout_s, memory)
        while True:
            with self._lock:
                if self._ended.is_set():
                    return
                if over and not self._fired:
                    self.memory = memory
                self._fired = True
                con.interrupt()
            if self._ended.wait(REINTERRUPT_S):
                return

    def _wait(self, timeout_s: float | None, memory: QueryMemory | None) -> bool:
        """Until the time limit, a stop or the end; True when ``memory`` went past its limit first."""
        if memory is None:
            self._wake.wait(timeout_s)
            return False
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self._wake.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            if memory.exceeded():
                return True
            self._wake.wait(MEMORY_POLL_S if left is None else min(left, MEMORY_POLL_S))
        return False


@dataclass(frozen=True)
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    elapsed_s: float = 0.0
    truncated_by: Literal["max_rows", "max_bytes"] | None = None  # which cap cut the answer


def _names(tree: Any, table: bool = False) -> Iterator[tuple[str, bool]]:
    """Every function and table name a serialized statement refers to, lower-cased, each with whether it is a table
    (a table, view or table function: what FROM reads) rather than a scalar or aggregate function."""
    if isinstance(tree, dict):
        if tree.get("class") == "FUNCTION" and isinstance(tree.get("function_name"), str):
            yield tree["function_name"].lower(), table
        if tree.get("type") == "BASE_TABLE" and isinstance(tree.get("table_name"), str):
            yield tree["table_name"].lower(), True
        for key, value in tree.items():  # a table function's own call is a table; its arguments are values
            yield from _names(value, key == "function" and tree.get("type") == "TABLE_FUNCTION")
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
    refused = sorted({name for name, _ in names if _denied(name)})
    if refused:
        raise QueryRefused(
            f"{', '.join(refused)} cannot be used here: the server's settings, files and maintenance are not for "
            "readers"
        )
    unbounded = sorted({name for name, table in names if name in UNBOUNDED and not table})
    if unbounded:
        raise QueryRefused(
            f"{', '.join(unbounded)} cannot be used here as a value: it makes a value of any size in one step, before "
            "the query's memory limit can stop it (range and generate_series stay usable as tables, in FROM)"
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
    max_memory: int | None = None,
    gauge: Callable[[], duckdb.DuckDBPyConnection] | None = None,
) -> QueryResult:
    """Run one checked statement in a read-only transaction; stopped after ``timeout_s``, once it has taken more than
    ``max_memory`` bytes (read on a cursor from ``gauge``: ``query_memory``) or by ``stop``; cut at ``max_rows`` rows
    or ``max_bytes`` bytes of values."""
    check_sql(con, sql)
    memory = QueryMemory((gauge or con.cursor)(), max_memory) if max_memory is not None else None
    try:
        return _run_checked(con, sql, max_rows, timeout_s, max_bytes, stop, memory)
    finally:
        if memory is not None:
            memory.close()


def _run_checked(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    max_rows: int,
    timeout_s: float | None,
    max_bytes: int,
    stop: QueryStop | None,
    memory: QueryMemory | None,
) -> QueryResult:
    watched = stop is not None or timeout_s is not None or memory is not None
    stop = stop or QueryStop()
    began = time.perf_counter()
    rows: list[tuple[Any, ...]] = []
    size = 0
    cut: Literal["max_rows", "max_bytes"] | None = None
    con.execute("BEGIN TRANSACTION READ ONLY")
    try:
        with stop.watching(con, timeout_s, memory) if watched else nullcontext():
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


def _stopped(stop: QueryStop, timeout_s: float | None) -> QueryTimeout | QueryTooLarge:
    """The one answer of a stopped statement (an interrupt from elsewhere counts as a cancel)."""
    fetched = f" after {stop.rows:,} row{'s' if stop.rows > 1 else ''}" if stop.rows else ""
    if stop.memory is not None:
        return QueryTooLarge(
            f"the query took more than {human_bytes(stop.memory.limit)} of memory, its limit (the sql_memory_limit "
            f"setting), and was stopped{fetched}: ask for less at once (filter with WHERE, aggregate with GROUP BY, "
            "fewer or smaller columns)"
        )
    timed_out = stop.fired and not stop.cancelled and timeout_s
    why = f"ran past the time limit of {timeout_s:g} s and was stopped" if timed_out else "was cancelled"
    return QueryTimeout(f"the query {why}{fetched}")


def _message(exc: BaseException) -> str:
    """DuckDB's whole message, its hints and caret kept, with any server path cut out."""
    return scrub_message(str(exc)) or type(exc).__name__

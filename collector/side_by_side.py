"""A page's independent queries, run side by side.

The server gives DuckDB one thread (``Settings.db_threads``): the ingest writer's many small statements run fastest
so, but a large query then runs on one core. The queries behind one
page or report do not depend on each other, so each runs on its own cursor in its own thread (DuckDB releases the
GIL while it works), and together they use the cores again.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Concatenate, ParamSpec, TypeVar

import duckdb

P = ParamSpec("P")
T = TypeVar("T")
#: More than the cores of a small server is fine: the threads mostly wait for DuckDB.
WORKERS = 4


class SideBySide:
    """``submit(fn, *args)`` runs ``fn(cursor, *args)`` in a thread; leaving the ``with`` block waits for all."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con
        self._pool = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="flopfleet-query")

    def __enter__(self) -> SideBySide:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True)

    def submit(
        self, fn: Callable[Concatenate[duckdb.DuckDBPyConnection, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> Future[T]:
        return self._pool.submit(fn, self._con.cursor(), *args, **kwargs)

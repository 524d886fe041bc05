"""Figures and summaries a moment after the commits they come from, in a thread and transaction of their own.

Every commit takes the next ``commit_seq``; the refresher summarises the range of commits since it last did, after
``FIGURES_EVERY`` commits, when the writer finds a pause, or as soon as a reader waits (``wait``), so one refresh's
fixed cost is paid per several commits and commits go on meanwhile (a few hundred ms of work each on 2 cores).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import suppress

import duckdb

from . import aggregates
from .failure import STORAGE_ERRORS
from .figures import compute_sql

log = logging.getLogger(__name__)

#: Figures and summaries are computed after this many commits under continuous load (about 250 runs with 16 agents
#: posting; a refresh of 256 runs took 170–250 ms on 2 cores, benchmarks/collector_refresh.py).
FIGURES_EVERY = 32


def summarise(
    cur: duckdb.DuckDBPyConnection, sources: dict[str, str], *, before: tuple[str, ...] = (), copy: bool = False
) -> None:
    """The figures and summaries of the runs in ``sources`` (each raw table's new rows, as a query), inside the
    caller's transaction; ``before`` runs once the new rows are gathered. ``copy``: the new rows are copied into
    temporary tables (for queries that would cost much to run again); otherwise each is a temporary view, read
    again by each statement but only for the columns it needs (copying 300 results of a run cost more than
    reading them five times, measured)."""
    kind = "TABLE" if copy else "VIEW"
    gather = [f"CREATE OR REPLACE TEMP {kind} new_{table} AS {sql}" for table, sql in sources.items()]
    cur.execute(";\n".join(gather))
    row = cur.execute(aggregates.MULTI_GPU_SQL).fetchone()
    refresh = aggregates.refresh_sql(figures_sql=compute_sql("new_results"), machines=bool(row and row[0]))
    # One call: DuckDB runs the statements back to back, without winning the GIL back between them.
    cur.execute(";\n".join((*before, *refresh)))


class Refresher:
    """Which commits have their figures, and the thread that computes them for the others."""

    def __init__(self) -> None:
        self.committed_to = 0  # every commit below this commit_seq is committed
        self.refreshed_to = 0  # the commit_seq of the first commit whose runs are not summarised
        self._unfigured = 0  # commits since the last refresh began
        self._settle_wanted = False  # a reader is waiting for the figures
        self._figured = threading.Condition()
        self._wanted = threading.Event()
        self._compute_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopping = False

    def reset(self, seq: int) -> None:
        """Every commit below ``seq`` is stored and summarised (the file was just opened)."""
        with self._figured:
            self.committed_to = self.refreshed_to = seq

    @property
    def settled(self) -> bool:
        """Whether every stored run has its figures."""
        return self.refreshed_to >= self.committed_to

    @property
    def due(self) -> bool:
        """Whether the writer should start a refresh now, without waiting for a pause."""
        return self._unfigured >= FIGURES_EVERY or self._settle_wanted

    @property
    def running(self) -> bool:
        return self._thread is not None

    def committed(self, end: int, stored: bool) -> None:
        """Commits below ``end`` are visible; ``stored``: the last one stored runs (not only duplicates)."""
        with self._figured:
            self.committed_to = max(self.committed_to, end)
            self._unfigured += stored

    def compute(self, cur: duckdb.DuckDBPyConnection) -> None:
        """The figures and summaries of every run committed since the last time, in one transaction of their own
        (the only writer of the figures and summaries)."""
        with self._compute_lock:
            with self._figured:
                start, end = self.refreshed_to, self.committed_to  # commits below ``end`` are visible from here
                self._unfigured = 0
            if end > start:
                new = f"commit_seq >= {start} AND commit_seq < {end}"
                cur.begin()
                try:
                    summarise(cur, {t: f"SELECT * FROM {t} WHERE {new}" for t in aggregates.SOURCES})
                    cur.commit()
                except STORAGE_ERRORS:
                    with suppress(duckdb.Error):
                        cur.rollback()
                    raise
                except Exception:  # they are computed again when the collector next starts
                    with suppress(duckdb.Error):
                        cur.rollback()
                    log.exception("computing figures failed; runs stored since the last time have none until "
                                  "restart")  # fmt: skip
            with self._figured:
                self.refreshed_to = max(self.refreshed_to, end)
                if self.settled:
                    self._settle_wanted = False
                self._figured.notify_all()

    def start(self, work: Callable[[], None]) -> None:
        """Run ``work`` (a refresh, guarded by the store) in a thread of its own each time it is woken."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, args=(work,), name="flopfleet-refresher", daemon=True)
            self._thread.start()

    def _loop(self, work: Callable[[], None]) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            work()
            if self._stopping:
                return

    def wake(self) -> None:
        self._wanted.set()

    def stop(self, timeout_s: float) -> None:
        """The figures of the last runs, then stop."""
        if self._thread is not None:
            self._stopping = True
            self._wanted.set()
            self._thread.join(timeout_s)
            self._thread = None

    def abandon(self) -> None:
        """Storage failed: readers waiting for figures get the failure instead."""
        with self._figured:
            self._settle_wanted = False
            self._figured.notify_all()

    def wait(self, timeout_s: float, failed: Callable[[], bool]) -> None:
        """Until every run stored so far has its figures (the refresher told to hurry), or storage fails."""
        with self._figured:
            if self.settled:
                return
            self._settle_wanted = True
            self._wanted.set()
            self._figured.wait_for(lambda: self.settled or failed(), timeout_s)

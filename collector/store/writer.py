"""The store's writer: one thread that commits the runs waiting at each moment together (``commits``), and between
commits does the chores ``schedule`` fits in (refresh, checkpoint, archive batches). Nothing escapes it: a storage
error turns the store failed (``recovery``) and is answered to the runs it concerns."""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

import duckdb

from . import retention
from .commits import Pending, gather, resolve
from .errors import StorageUnavailable
from .failure import STORAGE_ERRORS
from .parts import StoreParts

log = logging.getLogger(__name__)

#: Writer threads. More than one was measured slower on a 2-core machine (smaller groups cost more per run). One is
#: also what the refresher assumes: it takes every commit below the last one answered as visible
#: (``Refresher.committed``), so a second writer finishing a later commit first would have an earlier one's runs
#: skipped by the next refresh (they would get their figures at the next start). A run_id racing itself would
#: settle as a duplicate.
WRITERS = 1
#: The longest ``stop`` waits for the writer to finish what it is doing.
CLOSE_WAIT_S = 10.0
#: Put on the writer's queue to wake it: a reader saw the database fail.
WAKE = object()


class Writer:
    """The queue of runs to store and the thread that empties it."""

    def __init__(self, store: StoreParts) -> None:
        self._store = store
        self.queue: queue.Queue[Pending | object | None] = queue.Queue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def put(self, pending: Pending) -> None:
        self.start()
        self.queue.put(pending)

    def wake(self) -> None:
        """Wake the writer (a reader saw the database fail): it probes and recovers."""
        self.queue.put(WAKE)

    def stop(self) -> None:
        """Stop the writer (it answers what is queued first); never waits on a stuck disk for more than
        ``CLOSE_WAIT_S``."""
        for _ in self._threads:
            self.queue.put(None)
        for thread in self._threads:
            thread.join(CLOSE_WAIT_S)
            if thread.is_alive():
                log.error("the writer did not stop within %g s; closing anyway", CLOSE_WAIT_S)
        self._threads = []
        self._store.refresher.stop(CLOSE_WAIT_S)

    def start(self) -> None:
        with self._lock:
            self._store.refresher.start(self.refresh_work)
            if not self._threads:
                self._store.schedule.start()
            while len(self._threads) < WRITERS:
                writer = threading.Thread(target=self._loop, name=f"flopfleet-writer-{len(self._threads)}")
                writer.daemon = True
                writer.start()
                self._threads.append(writer)

    def _loop(self) -> None:
        """Commit groups of queued runs, and between them the chores ``schedule`` fits in, until told to stop.
        Nothing escapes it: a failure is answered to the runs it concerns and turns the store ``failed`` until a
        probe writes again."""
        store = self._store
        cur = store.connection().cursor()  # each writer its own connection to the database: its own transactions
        schedule = store.schedule
        while True:
            if store.failure is not None:
                recovered = store.recovery.recover(self.queue)
                if recovered is None:
                    return
                cur = recovered
                schedule.wrote()
                continue
            if schedule.archive_now():
                self.guarded(self._archive_batch, cur)
                continue
            try:
                first = self.queue.get(timeout=schedule.wait_s(store.refresher.settled))
            except queue.Empty:
                chore = schedule.chore(store.refresher.settled)
                if chore == "refresh":
                    store.refresher.wake()
                elif chore == "checkpoint":
                    schedule.checkpointed(bool(self.guarded(_checkpoint, cur)))
                continue  # an archive batch is due: the loop's top does it
            if first is None:
                return
            if not isinstance(first, Pending):  # WAKE: a reader saw the database fail
                continue
            self.guarded(store.commits.commit, cur, gather(self.queue, first))
            schedule.committed()
            if store.failure is None and store.refresher.due:
                store.refresher.wake()

    def refresh_work(self) -> None:
        """What the refresher's thread does each time it is woken: the figures, unless storage has failed."""
        if self._store.failure is None:
            self.guarded(self._store.refresher.compute, self._store.connection().cursor())

    def guarded(self, work: Any, cur: duckdb.DuckDBPyConnection, group: list[Pending] | None = None) -> Any:
        """``work(cur[, group])``. A storage error becomes the store's failure and every run of ``group`` still
        unanswered is answered 503; anything else (a bug) is logged and those runs answered 500. None of them was
        acknowledged, so none is lost: its agent sends it again."""
        try:
            return work(cur) if group is None else work(cur, group)
        except STORAGE_ERRORS as exc:
            error: Exception = StorageUnavailable(self._store.recovery.fail(exc).message())
        except Exception as exc:
            log.exception("the writer failed in %s", getattr(work, "__name__", work))
            error = RuntimeError(f"the collector failed to store the run: {type(exc).__name__}")
        for p in group or ():
            resolve(p, error=error)
        return False

    def _archive_batch(self, cur: duckdb.DuckDBPyConnection) -> int | None:
        """One batch of old runs to the archive (only runs already summarised), timed for the schedule."""
        store = self._store
        began, moved, summarised = time.monotonic(), None, store.refresher.refreshed_to
        try:
            moved = retention.archive_batch(cur, store.folder, store.retention_days, summarised_before=summarised)
        finally:  # files left in staging (readers held the folder) are published at the next pass, soon
            settled = summarised >= store.refresher.committed_to and not store.folder.unpublished
            store.schedule.archived(moved, time.monotonic() - began, waiting=not self.queue.empty(), settled=settled)
        return moved


def _checkpoint(cur: duckdb.DuckDBPyConnection) -> bool:
    """Fold the log into the file while idle; False when DuckDB refuses (another transaction is running, as a
    long SQL query may be) and it should be tried again at the next pause."""
    try:
        cur.execute("CHECKPOINT")
    except duckdb.FatalException:
        raise
    except duckdb.Error as exc:
        log.debug("checkpoint postponed: %s", exc)
        return False
    return True

"""A storage failure is an answer, not a hang: the failed state, and the way back.

When a write fails (a full disk, an unwritable folder), the run is answered 503 (the agent keeps it and sends it
again) and the store is ``failed``: posts and reads are answered 503 at once, ``/healthz`` and ``/readyz`` say why,
and the writer probes the disk every few seconds. When DuckDB has invalidated the database (a failed checkpoint is
fatal to it), the probe reopens the file, which replays its write-ahead log: every run acknowledged before stays.
Once a probe writes, the store serves again by itself.
"""

from __future__ import annotations

import logging
import queue
from datetime import datetime, timezone
from typing import Any

import duckdb

from .commits import Pending, resolve
from .errors import StorageUnavailable
from .failure import StorageFailure, first_line
from .parts import StoreParts
from .redact import scrub

log = logging.getLogger(__name__)

#: How often a failed store probes its disk (first, then doubling up to the last).
PROBE_EVERY_S = (1.0, 10.0)


class Recovery:
    """Why the store cannot write now (``failure``, None while it can), and the probes that end it."""

    def __init__(self, store: StoreParts) -> None:
        self._store = store
        self.failure: StorageFailure | None = None
        self._probe_failed = ""  # why the last probe failed, so that each new reason is logged once

    def fail(self, exc: BaseException) -> StorageFailure:
        """Turn the store failed (or its failure invalidated), and wake the writer to probe and recover."""
        invalidated = isinstance(exc, duckdb.FatalException)
        reason = scrub(first_line(exc), self._store.path)
        if self.failure is None or (invalidated and not self.failure.invalidated):
            self.failure = StorageFailure(reason, datetime.now(timezone.utc), invalidated)
            log.error("storage failed: %s", reason, exc_info=exc)
        self._store.refresher.abandon()
        self._store.writer.wake()  # the writer probes and recovers, whichever thread failed
        return self.failure

    def report_fatal(self, exc: BaseException) -> None:
        """A reader saw DuckDB invalidate the database: fail, and wake the writer to reopen it."""
        if isinstance(exc, duckdb.FatalException):
            self.fail(exc)
            self._store.writer.wake()

    def recover(self, waiting: queue.Queue[Any]) -> duckdb.DuckDBPyConnection | None:
        """While failed: answer queued runs 503 and probe every few seconds; the writer's new cursor once a probe
        writes, None when told to stop."""
        wait = PROBE_EVERY_S[0]
        while True:
            try:
                item = waiting.get(timeout=wait)
            except queue.Empty:
                cur = self._probe()
                if cur is not None:
                    return cur
                wait = min(wait * 2, PROBE_EVERY_S[1])
                continue
            if item is None:
                return None
            if isinstance(item, Pending) and self.failure is not None:
                resolve(item, error=StorageUnavailable(self.failure.message()))

    def _probe(self) -> duckdb.DuckDBPyConnection | None:
        """Reopen the file if DuckDB invalidated it, then write one small transaction; a cursor if that worked."""
        assert self.failure is not None
        try:
            if self.failure.invalidated:
                self._store.reopen()
            cur = self._store.connection().cursor()
            cur.execute("INSERT OR REPLACE INTO meta VALUES ('last_probe', ?)", [datetime.now(timezone.utc)])
        except Exception as exc:
            why = scrub(first_line(exc), self._store.path)
            (log.warning if why != self._probe_failed else log.debug)("storage still failing: %s", why)
            self._probe_failed = why
            if isinstance(exc, duckdb.FatalException) and not self.failure.invalidated:
                self.fail(exc)
            return None
        log.warning("storage recovered after failing since %s: %s", self.failure.since, self.failure.reason)
        self.failure, self._probe_failed = None, ""
        return cur

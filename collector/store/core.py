"""The DuckDB store: the only writer, owner of the tables and views.

One process owns the file and holds one connection; each request gets its own cursor. Writes go through one
writer thread that commits the runs waiting at that moment together (``commits``: group commit). The figures
derived from a run's results and the summaries pages read follow its commit by a moment (``refresher``), and
``settle`` waits for them (pages, reports and SQL do). Between commits the writer asks for refreshes, checkpoints
and archives old runs as ``schedule`` says. The file's layout and its migrations are ``layout``'s.

A storage failure is an answer, not a hang. When a write fails (a full disk, an unwritable folder), the run is
answered 503 (the agent keeps it and sends it again) and the store is ``failed``: posts and reads are answered 503
at once, ``/healthz`` and ``/readyz`` say why, and the writer probes the disk every few seconds. When DuckDB has
invalidated the database (a failed checkpoint is fatal to it), the probe reopens the file, which replays its
write-ahead log: every run acknowledged before stays. Once a probe writes, the store serves again by itself; the
process does not exit, so agents and a supervisor see one collector that says what is wrong until it is fixed.
"""

from __future__ import annotations

import gzip
import itertools
import json
import logging
import queue
import threading
import time
from concurrent.futures import Future
from contextlib import suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import duckdb

from schemas import RunSubmission
from schemas.baselines import BaselineBundle

from . import baselines, retention
from .archive import ArchiveFolder, Observe
from .commits import GroupCommit, Pending, Stored, compress, digest, gather, resolve
from .dbfile import check_db
from .errors import CollectorError, NotFound, StorageUnavailable
from .failure import STORAGE_ERRORS, StorageFailure, first_line
from .layout import DB_VERSION, check_version, connect, copy_database, migrate, refusal
from .published import ReferenceValue, published_bundle
from .reads import Reads
from .redact import scrub
from .refresher import Refresher
from .schedule import WriterSchedule
from .sqlguard import DEFAULT_MAX_BYTES, QueryResult, run_query

log = logging.getLogger(__name__)

#: Writer threads. More than one was measured slower on a 2-core machine (smaller groups cost more per run); the
#: code stays correct with several (a run_id racing itself settles as a duplicate).
WRITERS = 1
#: DuckDB folds its write-ahead log into the file (a checkpoint) inside the commit that takes the log past this
#: size, a pause of 100-200 ms for every run in that commit. The writer checkpoints when no run is waiting
#: instead (``schedule``), so this size is the backstop for long unbroken load, and bounds the log that a restart
#: after a crash replays.
CHECKPOINT_LIMIT = "256MB"
#: Tells stores apart in ``Store.generation`` (an ``id()`` may be reused once a store is gone).
_INSTANCES = itertools.count()
#: The longest ``close`` waits for the writer to finish what it is doing.
CLOSE_WAIT_S = 10.0
#: How often a failed store probes its disk (first, then doubling up to the last).
PROBE_EVERY_S = (1.0, 10.0)
#: Put on the writer's queue to wake it: a reader saw the database fail.
_WAKE = object()


class Store:
    def __init__(
        self,
        path: Path,
        *,
        read_only: bool = False,
        threads: int | None = None,
        retention_days: int = 0,
        archive_dir: Path | None = None,
    ) -> None:
        self.path = path
        self.read_only = read_only
        self._instance = next(_INSTANCES)
        #: Raw rows of runs older than this many days move to the archive (``retention``); 0 keeps them all.
        self.retention_days = retention_days
        self.archive_dir = archive_dir or retention.default_folder(path)
        self._folder = ArchiveFolder(self.archive_dir)
        check_db(path, read_only=read_only)  # a missing folder is refused: creating one is the caller's choice
        config: dict[str, Any] = {} if read_only else {"checkpoint_threshold": CHECKPOINT_LIMIT}
        if threads is not None:
            config["threads"] = threads
        self._config = config
        self._con = connect(path, read_only=read_only, config=config)
        self._hardened = False
        self._memory_limit: str | None = None
        self.failure: StorageFailure | None = None
        self._probe_failed = ""  # why the last probe failed, so that each new reason is logged once
        self._queue: queue.Queue[Pending | object | None] = queue.Queue()
        self._writers: list[threading.Thread] = []
        self._writer_lock = threading.Lock()
        self._refresher = Refresher()
        self._commits = GroupCommit(self._refresher)
        #: The writer's chores besides commits (refresh, checkpoint, archive), and the time archiving took.
        self.schedule = WriterSchedule(retention=bool(retention_days))
        try:
            if read_only:
                # Read-only users (report, sql, snapshot) get no file access from SQL either, but the archive's
                # (``all_results``); export opens its own.
                self._con.execute(self._folder.allow_sql())
                self._con.execute("SET enable_external_access = false")
                check_version(self._con, path)
            else:
                self._commits.reset(migrate(self._con.cursor(), path, self._folder.views()))
                self._folder.recover(self._con.cursor())
        except BaseException as exc:
            with suppress(duckdb.Error):
                self._con.close()
            refused = refusal(path, exc) if isinstance(exc, duckdb.Error) else None
            if refused is None:
                raise
            raise refused from exc

    def close(self) -> None:
        """Stop the writer (it answers what is queued first) and close the file; never waits on a stuck disk for
        more than ``CLOSE_WAIT_S``."""
        for _ in self._writers:
            self._queue.put(None)
        for writer in self._writers:
            writer.join(CLOSE_WAIT_S)
            if writer.is_alive():
                log.error("the writer did not stop within %g s; closing anyway", CLOSE_WAIT_S)
        self._writers = []
        self._refresher.stop(CLOSE_WAIT_S)
        with suppress(duckdb.Error):
            self._con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def reads(self) -> Reads:
        """The named queries, on a cursor of their own (cheap; for one request or command)."""
        return Reads(self._cursor(), self.generation)

    @property
    def generation(self) -> tuple[int, int]:
        """Changes whenever what the summaries say may have changed (each refresh): what is computed from them
        alone (the verdicts) can be kept until then."""
        return (self._instance, self._refresher.refreshed_to)

    def sql(
        self, query: str, *, max_rows: int = 10_000, timeout_s: float | None = None, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> QueryResult:
        """A reader's own SQL: one checked statement, read-only, interrupted after ``timeout_s``, cut at
        ``max_rows`` rows or ``max_bytes`` bytes of values (``sqlguard``). The archive's files stay where they are
        meanwhile, so ``all_results`` finds every run once."""
        with self._folder.reading():
            return run_query(self._cursor(), query, max_rows=max_rows, timeout_s=timeout_s, max_bytes=max_bytes)

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for one request or command: cheap, and safe to use from its own thread; StorageUnavailable
        while the store has failed."""
        if self.failure is not None:
            raise StorageUnavailable(self.failure.message())
        try:
            return self._con.cursor()
        except duckdb.ConnectionException as exc:  # closed under us while being reopened
            raise StorageUnavailable(f"the database is being reopened: {exc}") from exc

    def harden(self, memory_limit: str | None = None) -> None:
        """For a server that answers users' SQL: no file, network or extension access (nor installs), a memory limit
        on what DuckDB manages, memory handed back to the system after a large query, and no more SET."""
        cur = self._con.cursor()
        cur.execute(self._folder.allow_sql())  # the archive's files alone, for ``all_results``
        cur.execute("SET enable_external_access = false")
        # What the collector uses (json, parquet, icu) is built in; a reader's query must not fetch or load more.
        cur.execute("SET autoinstall_known_extensions = false")
        cur.execute("SET autoload_known_extensions = false")
        if memory_limit:
            cur.execute(f"SET memory_limit = '{memory_limit}'")
        # Without background threads DuckDB's allocator keeps what a large answer took (measured: 1 GB held for
        # minutes after one query); with them it is back within two seconds.
        cur.execute("SET allocator_background_threads = true")
        cur.execute("SET lock_configuration = true")
        self._hardened = True
        self._memory_limit = memory_limit

    def size_bytes(self) -> int:
        """The database file and its write-ahead log."""
        wal = self.path.with_name(self.path.name + ".wal")
        return sum(p.stat().st_size for p in (self.path, wal) if p.exists())

    def ready(self) -> bool:
        """Whether the database answers with this collector's layout (False, not an error, while it has failed)."""
        if self.failure is not None:
            return False
        row = self._cursor().execute("SELECT value FROM meta WHERE key = 'db_version'").fetchone()
        return row is not None and int(row[0]) == DB_VERSION

    # -- writes ------------------------------------------------------------------------------------------------

    def add_run(
        self,
        run: RunSubmission,
        *,
        source: str = "agent",
        token_name: str | None = None,
        received_at: datetime | None = None,
    ) -> Stored:
        """Store a validated run once, as its canonical JSON: the same run again is a duplicate, the same run_id
        with other content a conflict."""
        document = run.model_dump_json().encode()
        stored = self.submit(
            document, run_id=str(run.run_id), results=len(run.results), sha256=digest(document),
            payload=compress(document), source=source, token_name=token_name, received_at=received_at,
        ).result()  # fmt: skip
        self.settle()
        return stored

    def add_group(self, documents: list[bytes], *, source: str = "agent") -> list[Stored]:
        """Store validated runs (their JSON) in one commit in the caller's thread, as the writer commits a group:
        for bulk loads and the writer's benchmark, not beside a serving writer. Their figures and summaries follow
        with ``refresh``."""
        now = datetime.now(timezone.utc)
        pending = []
        for document in documents:
            head = json.loads(document)
            pending.append(Pending(run_id=str(head["run_id"]), results=len(head["results"]), document=document,
                                   payload=compress(document), sha256=digest(document), received_at=now,
                                   source=source, token_name=None))  # fmt: skip
        self._commits.commit(self._cursor(), pending)
        return [p.done.result() for p in pending]

    def refresh(self) -> None:
        """Compute the figures and summaries of the runs stored so far, in the caller's thread (after
        ``add_group``; the writer does this by itself for runs it stores)."""
        self._refresher.compute(self._cursor())

    def submit(
        self,
        document: bytes,
        *,
        run_id: str,
        results: int,
        sha256: str,
        payload: bytes,
        source: str = "agent",
        token_name: str | None = None,
        received_at: datetime | None = None,
    ) -> Future[Stored]:
        """``add_run`` without waiting, for the server's event loop, given the run's JSON as received (validated):
        ``sha256`` is its digest and ``payload`` the same gzip-compressed (as the client sent it, or compressed
        once), as stored."""
        if self.failure is not None:
            refused: Future[Stored] = Future()
            refused.set_exception(StorageUnavailable(self.failure.message()))
            return refused
        pending = Pending(
            run_id=run_id,
            results=results,
            document=document,
            payload=payload,
            sha256=sha256,
            received_at=received_at or datetime.now(timezone.utc),
            source=source,
            token_name=token_name,
        )
        self._start_writer()
        self._queue.put(pending)
        return pending.done

    def _start_writer(self) -> None:
        with self._writer_lock:
            self._refresher.start(self._refresh_work)
            if not self._writers:
                self.schedule.start()
            while len(self._writers) < WRITERS:
                writer = threading.Thread(target=self._write_loop, name=f"flopfleet-writer-{len(self._writers)}")
                writer.daemon = True
                writer.start()
                self._writers.append(writer)

    def warm(self) -> None:
        """Pay the first write's one-time costs (pyarrow's import, DuckDB's JSON extension, the writer thread)
        before the first run arrives, not in its latency: the INSERTs run once over no runs and are rolled back."""
        self._start_writer()
        self._commits.insert(self._cursor(), [], commit=False)

    def _write_loop(self) -> None:
        """Commit groups of queued runs, and between them the chores ``schedule`` fits in, until told to stop.
        Nothing escapes it: a failure is answered to the runs it concerns and turns the store ``failed`` until a
        probe writes again."""
        cur = self._con.cursor()  # each writer its own connection to the database: its own transactions
        schedule = self.schedule
        while True:
            if self.failure is not None:
                recovered = self._recover()
                if recovered is None:
                    return
                cur = recovered
                schedule.wrote()
                continue
            if schedule.archive_now():
                self._guarded(self._archive_batch, cur)
                continue
            try:
                first = self._queue.get(timeout=schedule.wait_s(self._refresher.settled))
            except queue.Empty:
                chore = schedule.chore(self._refresher.settled)
                if chore == "refresh":
                    self._refresher.wake()
                elif chore == "checkpoint":
                    schedule.checkpointed(bool(self._guarded(self._checkpoint, cur)))
                continue  # an archive batch is due: the loop's top does it
            if first is None:
                return
            if not isinstance(first, Pending):  # _WAKE: a reader saw the database fail
                continue
            self._guarded(self._commits.commit, cur, gather(self._queue, first))
            schedule.committed()
            if self.failure is None and self._refresher.due:
                self._refresher.wake()

    def _refresh_work(self) -> None:
        """What the refresher's thread does each time it is woken: the figures, unless storage has failed."""
        if self.failure is None:
            self._guarded(self._refresher.compute, self._con.cursor())

    def _guarded(self, work: Any, cur: duckdb.DuckDBPyConnection, group: list[Pending] | None = None) -> Any:
        """``work(cur[, group])``. A storage error becomes the store's failure and every run of ``group`` still
        unanswered is answered 503; anything else (a bug) is logged and those runs answered 500. None of them was
        acknowledged, so none is lost: its agent sends it again."""
        try:
            return work(cur) if group is None else work(cur, group)
        except STORAGE_ERRORS as exc:
            error: Exception = StorageUnavailable(self._fail(exc).message())
        except Exception as exc:
            log.exception("the writer failed in %s", getattr(work, "__name__", work))
            error = RuntimeError(f"the collector failed to store the run: {type(exc).__name__}")
        for p in group or ():
            resolve(p, error=error)
        return False

    def _fail(self, exc: BaseException) -> StorageFailure:
        invalidated = isinstance(exc, duckdb.FatalException)
        reason = scrub(first_line(exc), self.path)
        if self.failure is None or (invalidated and not self.failure.invalidated):
            self.failure = StorageFailure(reason, datetime.now(timezone.utc), invalidated)
            log.error("storage failed: %s", reason, exc_info=exc)
        self._refresher.abandon()
        self._queue.put(_WAKE)  # the writer probes and recovers, whichever thread failed
        return self.failure

    def report_fatal(self, exc: BaseException) -> None:
        """A reader saw DuckDB invalidate the database: fail, and wake the writer to reopen it."""
        if isinstance(exc, duckdb.FatalException):
            self._fail(exc)
            self._queue.put(_WAKE)

    def _recover(self) -> duckdb.DuckDBPyConnection | None:
        """While failed: answer queued runs 503 and probe every few seconds; the writer's new cursor once a probe
        writes, None when told to stop."""
        wait = PROBE_EVERY_S[0]
        while True:
            try:
                item = self._queue.get(timeout=wait)
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
                with suppress(duckdb.Error):
                    self._con.close()
                self._con = connect(self.path, config=self._config)
                if self._hardened:
                    self.harden(self._memory_limit)
                self._commits.reset(migrate(self._con.cursor(), self.path, self._folder.views()))
                self._folder.recover(self._con.cursor())
            cur = self._con.cursor()
            cur.execute("INSERT OR REPLACE INTO meta VALUES ('last_probe', ?)", [datetime.now(timezone.utc)])
        except Exception as exc:
            why = scrub(first_line(exc), self.path)
            (log.warning if why != self._probe_failed else log.debug)("storage still failing: %s", why)
            self._probe_failed = why
            if isinstance(exc, duckdb.FatalException) and not self.failure.invalidated:
                self._fail(exc)
            return None
        log.warning("storage recovered after failing since %s: %s", self.failure.since, self.failure.reason)
        self.failure, self._probe_failed = None, ""
        return cur

    @property
    def settled(self) -> bool:
        """Whether every stored run has its figures."""
        return self._refresher.settled

    def settle(self, timeout_s: float = 30.0) -> None:
        """Wait until every run stored so far has its figures (a moment after its commit; at once when idle)."""
        if self._refresher.running:
            self._refresher.wait(timeout_s, lambda: self.failure is not None)
        elif not self._refresher.settled:  # no writer thread (a store used from one thread): refresh here
            self.refresh()

    def _archive_batch(self, cur: duckdb.DuckDBPyConnection) -> int | None:
        """One batch of old runs to the archive (only runs already summarised), timed for the schedule."""
        began, moved, summarised = time.monotonic(), None, self._refresher.refreshed_to
        try:
            moved = retention.archive_batch(cur, self._folder, self.retention_days, summarised_before=summarised)
        finally:  # files left in staging (readers held the folder) are published at the next pass, soon
            settled = summarised >= self._refresher.committed_to and not self._folder.unpublished
            self.schedule.archived(moved, time.monotonic() - began, waiting=not self._queue.empty(), settled=settled)
        return moved

    def archive(self, observe: Observe | None = None) -> int:
        """Archive every run due now (``flopfleet-collector archive``, with no server on the file); the runs moved.
        ``observe`` is told each step of each batch (``retention.STEPS``)."""
        if not self.retention_days:
            raise StorageUnavailable("retention_days is 0: nothing is archived (set FLOPFLEET_RETENTION_DAYS)")
        cur, moved, days = self._cursor(), 0, self.retention_days
        while done := retention.archive_batch(cur, self._folder, days, summarised_before=self._refresher.refreshed_to,
                                              observe=observe):  # fmt: skip
            moved += done
        return moved

    @staticmethod
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

    # -- side tables: published figures and prices (rare administrative writes) ---------------------------------

    def add_reference(self, values: list[ReferenceValue]) -> int:
        """Store a published table as a baseline of its own (``reference.published_bundle``), replacing the one from
        the same source imported before."""
        baselines.add(self._cursor(), published_bundle(values, datetime.now(timezone.utc)), "reference")
        return len(values)

    def set_price(self, model: str, price_usd: float, source: str | None = None) -> None:
        self._cursor().execute(
            "INSERT OR REPLACE INTO prices VALUES (?, ?, ?, ?)", [model, price_usd, source, datetime.now(timezone.utc)]
        )

    def add_baseline(self, bundle: BaselineBundle) -> Literal["created", "duplicate"]:
        """Store an imported baseline bundle (checked by ``schemas.baselines.parse_bundle``), whole or not at all."""
        return baselines.add(self._cursor(), bundle, "imported")

    def baseline_bundle(self, ident: str) -> str:
        """A stored baseline's bundle file (id prefix or name), as exported: its hash still holds."""
        return baselines.bundle_text(self._cursor(), ident)

    def remove_baseline(self, ident: str) -> tuple[str, str]:
        """Remove an imported baseline by id prefix or name; (id, name) of the one removed."""
        return baselines.remove(self._cursor(), ident)

    # -- reads -------------------------------------------------------------------------------------------------

    def run_payload(self, run_id: str) -> str:
        """A run's JSON as stored, from the database or, for an archived run, from its archive file."""
        cur = self._cursor()
        row = cur.execute("SELECT payload FROM runs WHERE run_id = TRY_CAST(? AS UUID)", [run_id]).fetchone()
        if row is None:
            raise NotFound(f"no run {run_id}")
        payload = bytes(row[0])
        if payload == retention.ARCHIVED_PAYLOAD:
            where = cur.execute(
                "SELECT CAST(day AS VARCHAR), batch FROM archived_runs WHERE run_id = ?::UUID", [run_id]
            ).fetchone()
            found = self._folder.payload(run_id, *where) if where else None
            if found is None:
                raise NotFound(f"run {run_id} was archived, and its archive file is not in {self.archive_dir.name}")
            payload = found
        return gzip.decompress(payload).decode()

    def list_runs(self, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
        reads = self.reads()
        return reads.received_runs(limit, offset), reads.run_count()

    def snapshot(self, dest: Path) -> Path:
        """A consistent copy of every table into a new database file at ``dest``, taken while writes go on."""
        if dest.exists():
            raise CollectorError(f"{dest} exists; a snapshot never overwrites a file")
        self.settle()
        return copy_database(self._cursor(), dest, self._folder.views())

"""The DuckDB store: the only writer, owner of the tables and views.

One process owns the file and holds one connection; each request gets its own cursor. Writes go through one
writer thread that commits the runs waiting at that moment together (group commit): each run is whole or absent
in every commit, none is split across two, and DuckDB's per-statement and per-commit costs are paid once per
group instead of once per run. The rows are flattened inside DuckDB from the run's JSON (``tables.insert_sql``).

The figures derived from a run's results (``figures``) and the summaries pages read (``aggregates``) follow its
commit by a moment: a refresher thread beside the writer computes them for every run committed since it last did,
after a few commits or as soon as the writer is idle or a reader asks (``settle``, which pages, reports and SQL
wait on), so one refresh's fixed cost is paid per several commits and commits go on meanwhile. Every raw row
carries its commit's ``commit_seq``, so "stored since" is a range that DuckDB's zone maps find without reading
older rows; after a crash, the runs left without summaries get them when the collector starts again.

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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import duckdb

from schemas import RunSubmission

from ..errors import DatabaseBusy, NotFound, OlderDatabase, RunConflict, StorageUnavailable
from ..figures import DEFINITIONS_DDL, FIGURES_DDL, compute_sql, definitions_insert
from ..redact import scrub
from ..reference import ReferenceValue
from ..sqlguard import DEFAULT_MAX_BYTES, QueryResult, run_query
from ..sqlviews import VIEWS
from ..tables import INCOMING, TABLES, ddl, insert_sql, parse_sql
from ..validation import compress, digest
from . import aggregates, retention
from .reads import Reads

log = logging.getLogger(__name__)

#: The layout of the database file; a file written by a newer collector is refused, not misread. 2: the summaries
#: kept at ingest (``aggregates``), built for older files when they are first opened.
DB_VERSION = 3  # 3: health_history
#: Tables derived from stored results just after a run is stored, and the definitions they are derived by.
DERIVED_TABLES = {"figure_definitions": DEFINITIONS_DDL, "figures": FIGURES_DDL}
#: Tables that are not flattened from runs: published figures, and prices for price/performance.
SIDE_TABLES = {
    "archived_runs": retention.ARCHIVED_DDL,
    "reference_values": """CREATE TABLE IF NOT EXISTS reference_values (
        card VARCHAR NOT NULL, metric VARCHAR NOT NULL, value DOUBLE NOT NULL, unit VARCHAR,
        source VARCHAR NOT NULL, note VARCHAR, imported_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (card, metric, source))""",
    "prices": """CREATE TABLE IF NOT EXISTS prices (
        model VARCHAR PRIMARY KEY, price_usd DOUBLE NOT NULL, source VARCHAR, updated_at TIMESTAMPTZ NOT NULL)""",
}
#: Most runs one commit takes.
MAX_GROUP = 64
#: Writer threads. More than one was measured slower on a 2-core machine (smaller groups cost more per run); the
#: code stays correct with several (a run_id racing itself settles as a duplicate).
WRITERS = 1
#: How long a run that finds the writer idle waits for others to join its commit (runs that queued during the
#: last commit join it at once). A commit costs DuckDB tens of milliseconds however small it is, and a few
#: milliseconds per run on top, so under load sharing commits multiplies throughput.
LINGER_S = 0.01
#: DuckDB folds its write-ahead log into the file (a checkpoint) inside the commit that takes the log past this
#: size, a pause of 100-200 ms for every run in that commit. The writer checkpoints when no run is waiting
#: instead (``IDLE_CHECKPOINT_S``), so this size is the backstop for long unbroken load, and bounds the log that
#: a restart after a crash replays.
CHECKPOINT_LIMIT = "256MB"
#: How long the writer waits without runs before it checkpoints what it wrote.
IDLE_CHECKPOINT_S = 0.5
#: Figures and summaries are computed after this many commits under continuous load (about 250 runs with 16 agents
#: posting; a refresh of 256 runs took 170–250 ms on 2 cores, benchmarks/collector_refresh.py)...
FIGURES_EVERY = 32
#: ... or after this long without runs (a refresh is a few hundred ms of work: under load, not in every short gap
#: between posts), or at once when a reader waits for them.
FIGURES_IDLE_S = 0.25
#: The first archiving pass (with retention) waits this long after the store opens, the next ones this long apart.
ARCHIVE_FIRST_S = 5.0
ARCHIVE_EVERY_S = 600.0
#: Runs found without summaries when the file is opened are summarised this many per transaction.
MIGRATE_RUNS = 2000
#: Tells stores apart in ``Store.generation`` (an ``id()`` may be reused once a store is gone).
_INSTANCES = itertools.count()
#: The longest ``close`` waits for the writer to finish what it is doing.
CLOSE_WAIT_S = 10.0
#: How often a failed store probes its disk (first, then doubling up to the last).
PROBE_EVERY_S = (1.0, 10.0)
#: Put on the writer's queue to wake it: a reader saw the database fail.
_WAKE = object()


@dataclass(frozen=True)
class StorageFailure:
    """Why the store cannot write now; ``invalidated``: DuckDB must reopen the file before anything else."""

    reason: str
    since: datetime
    invalidated: bool

    def message(self) -> str:
        return (
            f"the collector cannot store runs now: {self.reason} (since {self.since:%Y-%m-%d %H:%M:%S} UTC); it "
            "retries by itself, and agents keep their runs and send them again"
        )


@dataclass(frozen=True)
class Stored:
    run_id: str
    status: Literal["created", "duplicate"]
    results: int


@dataclass
class _Pending:
    run_id: str
    results: int
    document: bytes  # the JSON as received (and validated, so UTF-8), parsed by DuckDB
    payload: bytes  # the same, gzip-compressed, as stored
    sha256: str
    received_at: datetime
    source: str
    token_name: str | None
    done: Future[Stored] = field(default_factory=Future)


#: What DuckDB raises when the file cannot be written (full disk, unwritable folder, invalidated database): the
#: store fails, rather than blaming the run.
STORAGE_ERRORS = (duckdb.IOException, duckdb.TransactionException, duckdb.OutOfMemoryException, duckdb.FatalException)


def _resolve(p: _Pending, result: Stored | None = None, error: BaseException | None = None) -> None:
    """Answer a run's request once (a failure path may reach a run already answered)."""
    if p.done.done():
        return
    if error is not None or result is None:
        p.done.set_exception(error or RuntimeError(f"run {p.run_id} was not stored"))
    else:
        p.done.set_result(result)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:500] if lines else type(exc).__name__


def connect(path: Path, *, read_only: bool = False, config: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(path), read_only=read_only, config=config or {})
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise DatabaseBusy(
                f"{path} is in use by another process (a running collector?): stop it, or use its HTTP API"
            ) from exc
        raise DatabaseBusy(f"{path} cannot be opened: {exc}") from exc


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
        self._archive_at = time.monotonic() + ARCHIVE_FIRST_S
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.exists():
            raise NotFound(f"no database at {path}")
        # Read-only users (report, sql, snapshot) get no file access from SQL either; export opens its own.
        config: dict[str, Any] = (
            {"enable_external_access": False} if read_only else {"checkpoint_threshold": CHECKPOINT_LIMIT}
        )
        if threads is not None:
            config["threads"] = threads
        self._config = config
        self._con = connect(path, read_only=read_only, config=config)
        self._hardened = False
        self._memory_limit: str | None = None
        self.failure: StorageFailure | None = None
        self._probe_failed = ""  # why the last probe failed, so that each new reason is logged once
        self._queue: queue.Queue[_Pending | object | None] = queue.Queue()
        self._writers: list[threading.Thread] = []
        self._writer_lock = threading.Lock()
        # Runs already stored are left out by the parse itself, and the last statement answers which went in. The
        # statements go to DuckDB in one call: between separate calls the writer had to win the GIL back from the
        # event loop each time (about a tenth of the ingest rate, measured).
        self._statements = ";\n".join(
            [
                parse_sql(new_only=True),
                *(insert_sql(table) for table in TABLES),
                aggregates.RUN_SUMMARIES_AT_INSERT,
                "SELECT CAST(run_id AS VARCHAR) FROM parsed",
            ]
        )
        self._figured = threading.Condition()
        self._unfigured = 0  # commits since the last refresh began
        self._settle_wanted = False  # a reader is waiting for the figures
        self._refresh_wanted = threading.Event()
        self._refresh_lock = threading.Lock()
        self._refresher: threading.Thread | None = None
        self._stopping = False
        self._seq_lock = threading.Lock()
        self._next_seq = 0  # the commit_seq of the next commit
        self._committed_to = 0  # every commit below this commit_seq is committed
        self._refreshed_to = 0  # the commit_seq of the first commit whose runs are not summarised
        if not read_only:
            self._migrate()
        else:
            self._check_version()

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
        if self._refresher is not None:  # the figures of the last runs, then stop
            self._stopping = True
            self._refresh_wanted.set()
            self._refresher.join(CLOSE_WAIT_S)
            self._refresher = None
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
        return (self._instance, self._refreshed_to)

    def sql(
        self, query: str, *, max_rows: int = 10_000, timeout_s: float | None = None, max_bytes: int = DEFAULT_MAX_BYTES
    ) -> QueryResult:
        """A reader's own SQL: one checked statement, read-only, interrupted after ``timeout_s``, cut at
        ``max_rows`` rows or ``max_bytes`` bytes of values (``sqlguard``)."""
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

    def _check_version(self) -> None:
        """A read-only store cannot add what a newer collector keeps: say so instead of failing on a missing table."""
        try:
            row = self._con.execute("SELECT value FROM meta WHERE key = 'db_version'").fetchone()
        except duckdb.CatalogException:
            row = None
        if row is None or int(row[0]) < DB_VERSION:
            found = row[0] if row else "none"
            self._con.close()
            raise OlderDatabase(
                f"{self.path} was written by an older collector (db_version {found}, this one keeps {DB_VERSION}): "
                f"open it for writing once, e.g. `flopfleet-collector serve --db {self.path}`, which brings it up to "
                "date as it starts"
            )

    def _migrate(self) -> None:
        cur = self._con.cursor()  # also while failed: a probe reopening the file migrates it
        cur.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        row = cur.execute("SELECT value FROM meta WHERE key = 'db_version'").fetchone()
        if row is not None and int(row[0]) > DB_VERSION:
            raise DatabaseBusy(f"{self.path} was written by a newer collector (db_version {row[0]} > {DB_VERSION})")
        for table in TABLES:
            cur.execute(ddl(table))
            self._add_new_columns(cur, table)
        had_history = (
            self._count(cur, "(SELECT 1 FROM information_schema.tables WHERE table_name = 'health_history')") > 0
        )
        for sql in (*DERIVED_TABLES.values(), *SIDE_TABLES.values(), *aggregates.ddl()):
            cur.execute(sql)
        if not had_history:  # an older collector's database: the verdicts' history from the figures it kept
            cur.execute(aggregates.HISTORY_BACKFILL)
        for name, sql in VIEWS.items():
            cur.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
        cur.execute("DELETE FROM figure_definitions")  # this version's, for runs stored from now on
        cur.executemany(*definitions_insert())
        # Runs without summaries: stored just before a crash (summaries follow commits by a moment), or by an older
        # collector. Their figures are computed again with them, a batch of runs per transaction.
        while True:
            cur.begin()
            try:
                unsummarised = {"runs": f"FROM runs ANTI JOIN device_runs USING (run_id) LIMIT {MIGRATE_RUNS}"}
                unsummarised |= {t: f"FROM {t} SEMI JOIN new_runs USING (run_id)" for t in aggregates.SOURCES[1:]}
                forget = "DELETE FROM figures WHERE run_id IN (SELECT run_id FROM new_runs)"
                # Copied, not views: a view of "runs without summaries" would empty itself as the summaries go in.
                self._refresh(cur, unsummarised, before=(forget, aggregates.RUN_SUMMARIES_LATE), copy=True)
                done = self._count(cur, "new_runs")
                cur.execute("INSERT OR REPLACE INTO meta VALUES ('db_version', ?)", [str(DB_VERSION)])
                cur.commit()
            except BaseException:
                with suppress(duckdb.Error):
                    cur.rollback()
                raise
            if done < MIGRATE_RUNS:
                break
            log.info("summarised %d runs stored without summaries; going on", done)
        row = cur.execute("SELECT max(commit_seq) FROM runs").fetchone()
        self._next_seq = self._committed_to = self._refreshed_to = int(row[0]) + 1 if row and row[0] is not None else 0

    @staticmethod
    def _add_new_columns(cur: duckdb.DuckDBPyConnection, table: str) -> None:
        """Columns a newer collector added to a table (always nullable): older rows read NULL, as their runs
        never carried the field."""
        have = {
            name
            for (name,) in cur.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table]
            ).fetchall()
        }
        for column in TABLES[table].columns:
            if column.name not in have:
                cur.execute(f"ALTER TABLE {table} ADD COLUMN {column.name} {column.sql}")

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
            pending.append(_Pending(run_id=str(head["run_id"]), results=len(head["results"]), document=document,
                                    payload=compress(document), sha256=digest(document), received_at=now,
                                    source=source, token_name=None))  # fmt: skip
        self._commit_group(self._cursor(), pending)
        return [p.done.result() for p in pending]

    def refresh(self) -> None:
        """Compute the figures and summaries of the runs stored so far, in the caller's thread (after
        ``add_group``; the writer does this by itself for runs it stores)."""
        self._compute_figures(self._cursor())

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
        pending = _Pending(
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
            if self._refresher is None:
                self._refresher = threading.Thread(target=self._refresh_loop, name="flopfleet-refresher", daemon=True)
                self._refresher.start()
            while len(self._writers) < WRITERS:
                writer = threading.Thread(target=self._write_loop, name=f"flopfleet-writer-{len(self._writers)}")
                writer.daemon = True
                writer.start()
                self._writers.append(writer)

    def warm(self) -> None:
        """Pay the first write's one-time costs (pyarrow's import, DuckDB's JSON extension, the writer thread)
        before the first run arrives, not in its latency: the INSERTs run once over no runs and are rolled back."""
        self._start_writer()
        self._insert(self._cursor(), [], commit=False)

    def _write_loop(self) -> None:
        """Commit groups of queued runs until told to stop. Nothing escapes it: a failure is answered to the runs it
        concerns and turns the store ``failed`` until a probe writes again."""
        cur = self._con.cursor()  # each writer its own connection to the database: its own transactions
        unflushed = False  # committed since the last checkpoint
        while True:
            if self.failure is not None:
                recovered = self._recover()
                if recovered is None:
                    return
                cur, unflushed = recovered, True  # the probe wrote: fold the log in at the next pause
                continue
            idle = FIGURES_IDLE_S if not self.settled else IDLE_CHECKPOINT_S if unflushed else self._until_archive()
            try:
                first = self._queue.get(timeout=idle)
            except queue.Empty:
                if not self.settled:
                    self._refresh_wanted.set()
                elif unflushed:
                    unflushed = not self._guarded(self._checkpoint, cur)
                elif self._until_archive() == 0:
                    unflushed = bool(self._guarded(self._archive_while_idle, cur))
                continue
            if first is None:
                return
            if not isinstance(first, _Pending):  # _WAKE: a reader saw the database fail
                continue
            group = [first]
            # Runs that queued during the last commit form the group at once; a run that found the writer idle
            # waits LINGER_S for a burst to gather.
            deadline = time.monotonic() + (LINGER_S if self._queue.empty() else 0.0)
            while len(group) < MAX_GROUP:
                try:
                    more = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if more is None:
                    self._queue.put(None)  # the stop signal is for the loop above; hand it back
                    break
                if isinstance(more, _Pending):
                    group.append(more)
            self._guarded(self._commit_group, cur, group)
            unflushed = True
            if self.failure is None and (self._unfigured >= FIGURES_EVERY or self._settle_wanted):
                self._refresh_wanted.set()

    def _refresh_loop(self) -> None:
        """Figures and summaries beside the writer, in a thread and transaction of their own, so that commits go
        on while a refresh runs (a few hundred ms of work each, measured on 2 cores)."""
        while True:
            self._refresh_wanted.wait()
            self._refresh_wanted.clear()
            if self.failure is None:
                self._guarded(self._compute_figures, self._con.cursor())
            if self._stopping:
                return

    def _guarded(self, work: Any, cur: duckdb.DuckDBPyConnection, group: list[_Pending] | None = None) -> Any:
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
            _resolve(p, error=error)
        return False

    def _fail(self, exc: BaseException) -> StorageFailure:
        invalidated = isinstance(exc, duckdb.FatalException)
        reason = scrub(_first_line(exc), self.path)
        if self.failure is None or (invalidated and not self.failure.invalidated):
            self.failure = StorageFailure(reason, datetime.now(timezone.utc), invalidated)
            log.error("storage failed: %s", reason, exc_info=exc)
        with self._figured:  # readers waiting for figures get the failure instead
            self._settle_wanted = False
            self._figured.notify_all()
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
            if isinstance(item, _Pending) and self.failure is not None:
                _resolve(item, error=StorageUnavailable(self.failure.message()))

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
                self._migrate()
            cur = self._con.cursor()
            cur.execute("INSERT OR REPLACE INTO meta VALUES ('last_probe', ?)", [datetime.now(timezone.utc)])
        except Exception as exc:
            why = scrub(_first_line(exc), self.path)
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
        return self._refreshed_to >= self._committed_to

    def settle(self, timeout_s: float = 30.0) -> None:
        """Wait until every run stored so far has its figures (a moment after its commit; at once when idle)."""
        with self._figured:
            if self.settled:
                return
            self._settle_wanted = True
            if self._refresher is not None:
                self._refresh_wanted.set()
        if self._refresher is None:  # no writer thread (a store used from one thread): refresh here
            self.refresh()
            return
        with self._figured:
            self._figured.wait_for(lambda: self.settled or self.failure is not None, timeout_s)

    @staticmethod
    def _count(cur: duckdb.DuckDBPyConnection, table: str) -> int:
        row = cur.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(row[0]) if row else 0

    def _take_seq(self) -> int:
        with self._seq_lock:
            self._next_seq += 1
            return self._next_seq - 1

    @staticmethod
    def _refresh(
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

    def _compute_figures(self, cur: duckdb.DuckDBPyConnection) -> None:
        """The figures and summaries of every run committed since the last time, in one transaction of their own
        (the only writer of the figures and summaries)."""
        with self._refresh_lock:
            with self._figured:
                start, end = self._refreshed_to, self._committed_to  # commits below ``end`` are visible from here
                self._unfigured = 0
            if end > start:
                new = f"commit_seq >= {start} AND commit_seq < {end}"
                cur.begin()
                try:
                    self._refresh(cur, {t: f"SELECT * FROM {t} WHERE {new}" for t in aggregates.SOURCES})
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
                self._refreshed_to = max(self._refreshed_to, end)
                if self.settled:
                    self._settle_wanted = False
                self._figured.notify_all()

    def _until_archive(self) -> float | None:
        """Seconds until the next archiving pass is due; None without retention."""
        if not self.retention_days:
            return None
        return max(0.0, self._archive_at - time.monotonic())

    def _archive_while_idle(self, cur: duckdb.DuckDBPyConnection) -> int:
        """Archive batches of old runs until none is due or a run is waiting; the runs archived."""
        moved = 0
        while self._queue.empty():
            done = retention.archive_batch(cur, self.archive_dir, self.retention_days)
            moved += done
            if not done:
                self._archive_at = time.monotonic() + ARCHIVE_EVERY_S
                break
        return moved

    def archive(self) -> int:
        """Archive every run due now (``flopfleet-collector archive``, with no server on the file); the runs moved."""
        if not self.retention_days:
            raise StorageUnavailable("retention_days is 0: nothing is archived (set FLOPFLEET_RETENTION_DAYS)")
        cur, moved = self._cursor(), 0
        while done := retention.archive_batch(cur, self.archive_dir, self.retention_days):
            moved += done
        return moved

    def _checkpoint(self, cur: duckdb.DuckDBPyConnection) -> bool:
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

    def _commit_group(self, cur: duckdb.DuckDBPyConnection, group: list[_Pending]) -> None:
        firsts: dict[str, _Pending] = {}
        later: list[_Pending] = []  # the same run_id again in this group, or already stored
        for p in group:
            if p.run_id in firsts:
                later.append(p)
            else:
                firsts[p.run_id] = p
        try:
            stored_now = self._insert(cur, list(firsts.values()))
        except STORAGE_ERRORS:
            raise
        except Exception:  # one bad run must not sink the others: try each alone
            log.warning("group commit of %d runs failed; committing them one by one", len(firsts), exc_info=True)
            for p in firsts.values():
                self._insert_alone(cur, p)
        else:
            for p in firsts.values():
                if p.run_id in stored_now:
                    _resolve(p, Stored(p.run_id, "created", p.results))
                else:
                    later.append(p)
        if later:
            stored = self._stored_hashes(cur, [p.run_id for p in later])
            for p in later:
                if p.run_id in stored:
                    self._settle_duplicate(cur, p, stored[p.run_id])
                else:  # its first copy failed to go in: this one gets its own chance
                    self._insert_alone(cur, p)

    @staticmethod
    def _stored_hashes(cur: duckdb.DuckDBPyConnection, run_ids: list[str]) -> dict[str, str]:
        rows = cur.execute(
            "SELECT run_id::VARCHAR, payload_sha256 FROM runs WHERE run_id IN (SELECT unnest(?::UUID[]))", [run_ids]
        ).fetchall()
        return dict(rows)

    def _insert_alone(self, cur: duckdb.DuckDBPyConnection, p: _Pending) -> None:
        error: Exception | None = None
        try:
            stored_now = self._insert(cur, [p])
        except STORAGE_ERRORS:
            raise
        except Exception as exc:  # handed to the request that sent this run
            stored_now, error = set(), exc
        if p.run_id in stored_now:
            _resolve(p, Stored(p.run_id, "created", p.results))
            return
        # Already stored (a retry racing its original, or a copy earlier in the same group), or it failed.
        stored = self._stored_hashes(cur, [p.run_id])
        if p.run_id in stored:
            self._settle_duplicate(cur, p, stored[p.run_id])
        else:
            _resolve(p, error=error or RuntimeError(f"run {p.run_id} was not stored"))

    def _insert(self, cur: duckdb.DuckDBPyConnection, runs: list[_Pending], *, commit: bool = True) -> set[str]:
        """Store those of ``runs`` not stored yet, in one transaction; the run_ids it stored."""
        import pyarrow as pa

        if not runs and commit:
            return set()
        incoming = pa.table(
            {
                "run_id": pa.array([p.run_id for p in runs], type=pa.string()),
                # bytes straight to Arrow's UTF-8 strings (checked there), never decoded to a Python str
                "document": pa.array([p.document for p in runs], type=pa.string()),
                "payload": pa.array([p.payload for p in runs], type=pa.binary()),
                "payload_sha256": pa.array([p.sha256 for p in runs], type=pa.string()),
                "received_at": pa.array([p.received_at for p in runs], type=pa.timestamp("us", tz="UTC")),
                "source": pa.array([p.source for p in runs], type=pa.string()),
                "token_name": pa.array([p.token_name for p in runs], type=pa.string()),
                "commit_seq": pa.array([seq := self._take_seq()] * len(runs), type=pa.int64()),
            }
        )
        assert tuple(incoming.column_names) == INCOMING
        cur.begin()
        try:
            cur.register("incoming", incoming)
            stored_now = {run_id for (run_id,) in cur.execute(self._statements).fetchall()}
            if commit:
                cur.commit()
            else:
                cur.rollback()
                stored_now = set()
        except BaseException:
            with suppress(duckdb.Error):  # a failed COMMIT has ended the transaction already
                cur.rollback()
            raise
        finally:
            cur.unregister("incoming")
        if commit:
            with self._figured:
                self._committed_to = max(self._committed_to, seq + 1)
                self._unfigured += bool(stored_now)
        return stored_now

    def _settle_duplicate(self, cur: duckdb.DuckDBPyConnection, p: _Pending, stored_sha: str) -> None:
        """Same bytes: a duplicate. Other bytes: a duplicate only if the content is equal (spacing, key order)."""
        if stored_sha != p.sha256:
            row = cur.execute("SELECT payload FROM runs WHERE run_id = ?::UUID", [p.run_id]).fetchone()
            same = row is not None and RunSubmission.model_validate_json(
                gzip.decompress(row[0])
            ) == RunSubmission.model_validate_json(p.document)
            if not same:
                _resolve(p, error=RunConflict(f"run {p.run_id} is already stored with different content"))
                return
        _resolve(p, Stored(p.run_id, "duplicate", p.results))

    # -- side tables: published figures and prices (rare administrative writes) ---------------------------------

    def add_reference(self, values: list[ReferenceValue]) -> int:
        """Store published figures, replacing earlier ones from the same source for the same card and metric."""
        cur = self._cursor()
        now = datetime.now(timezone.utc)
        cur.begin()
        try:
            for v in values:
                cur.execute(
                    "INSERT OR REPLACE INTO reference_values VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [v.card, v.metric, v.value, v.unit, v.source, v.note, now],
                )
            cur.commit()
        except BaseException:
            cur.rollback()
            raise
        return len(values)

    def set_price(self, model: str, price_usd: float, source: str | None = None) -> None:
        self._cursor().execute(
            "INSERT OR REPLACE INTO prices VALUES (?, ?, ?, ?)", [model, price_usd, source, datetime.now(timezone.utc)]
        )

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
            found = retention.archived_payload(self.archive_dir, run_id, *where) if where else None
            if found is None:
                raise NotFound(f"run {run_id} was archived, and its archive file is not in {self.archive_dir.name}")
            payload = found
        return gzip.decompress(payload).decode()

    def list_runs(self, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
        reads = self.reads()
        return reads.received_runs(limit, offset), reads.run_count()

    def snapshot(self, dest: Path) -> Path:
        """A consistent copy of every table into a new database file at ``dest``, taken while writes go on.

        The copy goes through Arrow into a second DuckDB instance, because this one may have external access
        off; the reads share one transaction, so the copy is one point in time.
        """
        if dest.exists():
            raise DatabaseBusy(f"{dest} exists; a snapshot never overwrites a file")
        self.settle()
        target = duckdb.connect(str(dest))
        src = self._cursor()
        try:
            target.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
            for table in TABLES:
                target.execute(ddl(table))
            for sql in (*DERIVED_TABLES.values(), *SIDE_TABLES.values(), *aggregates.ddl()):
                target.execute(sql)
            src.execute("BEGIN TRANSACTION READ ONLY")
            for table in ("meta", *TABLES, *DERIVED_TABLES, *SIDE_TABLES, *aggregates.DDL):
                batches = src.sql(f"SELECT * FROM {table}").to_arrow_reader(50_000)
                target.register("incoming", batches)
                target.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming")
                target.unregister("incoming")
            src.execute("ROLLBACK")
            for name, sql in VIEWS.items():
                target.execute(f"CREATE VIEW {name} AS {sql}")
            target.execute("CHECKPOINT")
        finally:
            target.close()
        return dest

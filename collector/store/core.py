"""The DuckDB store: the only writer, owner of the tables and views; a façade over its writer and its recovery.

One process owns the file and holds one connection; each request gets its own cursor. Writes go through the
``writer``'s thread, which commits the runs waiting at that moment together (``commits``: group commit). The figures
derived from a run's results and the summaries pages read follow its commit by a moment (``refresher``), and
``settle`` waits for them (pages, reports and SQL do). The file's layout and its migrations are ``layout``'s.
A storage failure turns the store failed until a probe writes again (``recovery``); the process does not exit, so
agents and a supervisor see one collector that says what is wrong until it is fixed.
"""

from __future__ import annotations

import gzip
import itertools
from collections.abc import Callable
from concurrent.futures import Future
from contextlib import closing, suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import duckdb

from schemas import RunSubmission
from schemas.baselines import BaselineBundle

from . import baselines, kept, retention
from .archive import ArchiveFolder, Observe
from .commits import GroupCommit, Pending, Stored, compress, digest
from .dbfile import check_db
from .errors import CollectorError, StorageUnavailable
from .failure import StorageFailure
from .layout import DB_VERSION, connect, copy_database, harden, open_file, prepare
from .published import ReferenceValue, published_bundle
from .reads import Reads
from .recovery import Recovery
from .refresher import Refresher
from .schedule import WriterSchedule
from .sqlguard import DEFAULT_MAX_BYTES, QueryResult, run_query
from .writer import Writer

#: DuckDB folds its write-ahead log into the file (a checkpoint) inside the commit that takes the log past this
#: size, a pause of 100-200 ms for every run in that commit. The writer checkpoints when no run is waiting
#: instead (``schedule``), so this size is the backstop for long unbroken load, and bounds the log that a restart
#: after a crash replays.
CHECKPOINT_LIMIT = "256MB"
#: Tells stores apart in ``Store.generation`` (an ``id()`` may be reused once a store is gone).
_INSTANCES = itertools.count()


class Store:
    def __init__(
        self,
        path: Path,
        *,
        read_only: bool = False,
        threads: int | None = None,
        retention_days: int = 0,
        archive_dir: Path | None = None,
        memory_limit: str | None = None,
    ) -> None:
        self.path = path
        self.read_only = read_only
        self._instance = next(_INSTANCES)
        #: Raw rows of runs older than this many days move to the archive (``retention``); 0 keeps them all.
        self.retention_days = retention_days
        self.archive_dir = archive_dir or retention.default_folder(path)
        self.folder = ArchiveFolder(self.archive_dir)
        check_db(path, read_only=read_only)  # a missing folder is refused: creating one is the caller's choice
        config: dict[str, Any] = {} if read_only else {"checkpoint_threshold": CHECKPOINT_LIMIT}
        if threads is not None:
            config["threads"] = threads
        if memory_limit is not None:  # what DuckDB as a whole may take (``harden`` sets it again for a server)
            config["memory_limit"] = memory_limit
        self._config = config
        self.refresher = Refresher()
        self.commits = GroupCommit(self.refresher)
        self.recovery = Recovery(self)
        self.writer = Writer(self)
        #: The writer's chores besides commits (refresh, checkpoint, archive), and the time archiving took.
        self.schedule = WriterSchedule(retention=bool(retention_days))
        self._hardened = False
        self._memory_limit: str | None = None
        self._con, seq = open_file(path, read_only=read_only, config=config, folder=self.folder)
        if seq is not None:
            self.commits.reset(seq)

    def close(self) -> None:
        """Stop the writer (it answers what is queued first) and close the file; never waits on a stuck disk for
        more than ``writer.CLOSE_WAIT_S``."""
        self.writer.stop()
        with suppress(duckdb.Error):
            self._con.close()

    @property
    def failure(self) -> StorageFailure | None:
        """Why the store cannot write now; None while it can."""
        return self.recovery.failure

    def report_fatal(self, exc: BaseException) -> None:
        """A reader saw DuckDB invalidate the database: fail, and wake the writer to reopen it."""
        self.recovery.report_fatal(exc)

    def connection(self) -> duckdb.DuckDBPyConnection:
        """The store's one connection, for its writer and recovery (everyone else gets a cursor or ``Reads``)."""
        return self._con

    def reopen(self) -> None:
        """Open the file again after DuckDB invalidated it (its log replayed), as configured and hardened before."""
        with suppress(duckdb.Error):
            self._con.close()
        self._con = connect(self.path, config=self._config)
        if self._hardened:
            self.harden(self._memory_limit)
        self.commits.reset(prepare(self._con, self.path, self.folder, read_only=False) or 0)

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
        return (self._instance, self.refresher.refreshed_to)

    def sql(self, query: str, *, max_rows: int = 10_000, timeout_s: float | None = None,
            max_bytes: int = DEFAULT_MAX_BYTES, max_memory: int | None = None) -> QueryResult:  # fmt: skip
        """A reader's SQL through ``sqlguard``'s limits; the archive stays put meanwhile (``all_results`` is whole)."""
        with self.folder.reading(), closing(self._cursor()) as cur:  # closed here, not whenever it is collected
            return run_query(cur, query, max_rows=max_rows, timeout_s=timeout_s, max_bytes=max_bytes,
                             max_memory=max_memory, gauge=self._cursor)  # fmt: skip

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
        """For a server that answers users' SQL (``layout.harden``); kept for when the file is reopened."""
        harden(self._con.cursor(), self.folder.allow_sql(), memory_limit)
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
        pending = [Pending.of(document, source=source, received_at=now) for document in documents]
        self.commits.commit(self._cursor(), pending)
        return [p.done.result() for p in pending]

    def refresh(self) -> None:
        """Compute the figures and summaries of the runs stored so far, in the caller's thread (after
        ``add_group``; the writer does this by itself for runs it stores)."""
        self.refresher.compute(self._cursor())

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
        not_understood: tuple[str, ...] = (),
    ) -> Future[Stored]:
        """``add_run`` without waiting, for the server's event loop, given the run's JSON as received (validated):
        ``sha256`` is its digest and ``payload`` the same gzip-compressed (as sent, or compressed once), as stored; a
        newer minor's: ``document`` what this collector knows of it, ``not_understood`` the rest (analysis/newer)."""
        if self.failure is not None:
            refused: Future[Stored] = Future()
            refused.set_exception(StorageUnavailable(self.failure.message()))
            return refused
        pending = Pending(run_id=run_id, results=results, document=document, payload=payload, sha256=sha256,
                          received_at=received_at or datetime.now(timezone.utc), source=source, token_name=token_name,
                          not_understood=not_understood)  # fmt: skip
        self.writer.put(pending)
        return pending.done

    def warm(self) -> None:
        """Pay the first write's one-time costs (pyarrow's import, DuckDB's JSON extension, the writer thread)
        before the first run arrives, not in its latency: the INSERTs run once over no runs and are rolled back."""
        self.writer.start()
        self.commits.insert(self._cursor(), [], commit=False)

    @property
    def settled(self) -> bool:
        """Whether every stored run has its figures."""
        return self.refresher.settled

    def settle(self, timeout_s: float = 30.0) -> None:
        """Wait until every run stored so far has its figures (a moment after its commit; at once when idle)."""
        if self.refresher.running:
            self.refresher.wait(timeout_s, lambda: self.failure is not None)
        elif not self.refresher.settled:  # no writer thread (a store used from one thread): refresh here
            self.refresh()

    def archive(self, observe: Observe | None = None) -> int:
        """Archive every run due now (``flopfleet-collector archive``, with no server on the file); the runs moved.
        ``observe`` is told each step of each batch (``retention.STEPS``)."""
        if not self.retention_days:
            raise StorageUnavailable("retention_days is 0: nothing is archived (set FLOPFLEET_RETENTION_DAYS)")
        summarised = self.refresher.refreshed_to  # no writer runs beside this: nothing is summarised meanwhile
        return retention.archive_due(self._cursor(), self.folder, self.retention_days, summarised, observe)

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

    def keep_metrics(self, lines: Callable[[Reads], tuple[str, bytes]]) -> None:
        """Stop the writer (the runs queued stored and summarised), then keep each GPU's series on ``/metrics`` and
        what they were judged from, as ``lines`` reads them, for the next collector's first scrapes (``kept``)."""
        self.writer.stop()
        kept.keep(self._cursor(), *lines(self.reads()))

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
        return gzip.decompress(retention.stored_payload(self._cursor(), self.folder, run_id)).decode()

    def list_runs(self, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
        reads = self.reads()
        return reads.received_runs(limit, offset), reads.run_count()

    def snapshot(self, dest: Path) -> Path:
        """A consistent copy of every table into a new database file at ``dest``, taken while writes go on."""
        if dest.exists():
            raise CollectorError(f"{dest} exists; a snapshot never overwrites a file")
        self.settle()
        return copy_database(self._cursor(), dest, self.folder.views())

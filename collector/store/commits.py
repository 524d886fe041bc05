"""Group commit: the runs waiting at one moment stored in one transaction, each whole or absent, none split.

DuckDB's per-statement and per-commit costs are paid once per group instead of once per run; the rows are
flattened inside DuckDB from each run's JSON (``tables.insert_sql``). A run already stored is a duplicate when its
content is equal and a conflict otherwise; one bad run in a group sinks none of the others (they go in one by one).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import queue
import threading
import time
from concurrent.futures import Future
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import duckdb
from pydantic import ValidationError

from schemas import RunSubmission

from . import aggregates
from .errors import RunConflict
from .failure import STORAGE_ERRORS
from .refresher import Refresher
from .tables import INCOMING, TABLES, insert_sql, parse_sql

log = logging.getLogger(__name__)

#: Most runs one commit takes.
MAX_GROUP = 64
#: How long a run that finds the writer idle waits for others to join its commit (runs that queued during the
#: last commit join it at once). A commit costs DuckDB tens of milliseconds however small it is, and a few
#: milliseconds per run on top, so under load sharing commits multiplies throughput.
LINGER_S = 0.01


def digest(document: bytes) -> str:
    return hashlib.sha256(document).hexdigest()


def compress(document: bytes) -> bytes:
    """How a run sent uncompressed is stored: gzip, fast level (stored runs are read back rarely)."""
    return gzip.compress(document, compresslevel=1)


@dataclass(frozen=True)
class Stored:
    run_id: str
    status: Literal["created", "duplicate"]
    results: int


@dataclass
class Pending:
    run_id: str
    results: int
    document: bytes  # the JSON as received (and validated, so UTF-8), parsed by DuckDB; a newer minor's: what is known
    payload: bytes  # the JSON as received, gzip-compressed, as stored
    sha256: str
    received_at: datetime
    source: str
    token_name: str | None
    not_understood: tuple[str, ...] = ()  # what of a newer minor's run is in the payload only
    done: Future[Stored] = field(default_factory=Future)

    @classmethod
    def of(cls, document: bytes, *, source: str, received_at: datetime) -> Pending:
        """A validated run's JSON for a bulk load, its id and result count read from it."""
        head = json.loads(document)
        return cls(run_id=str(head["run_id"]), results=len(head["results"]), document=document,
                   payload=compress(document), sha256=digest(document), received_at=received_at, source=source,
                   token_name=None)  # fmt: skip


def resolve(p: Pending, result: Stored | None = None, error: BaseException | None = None) -> None:
    """Answer a run's request once (a failure path may reach a run already answered)."""
    if p.done.done():
        return
    if error is not None or result is None:
        p.done.set_exception(error or RuntimeError(f"run {p.run_id} was not stored"))
    else:
        p.done.set_result(result)


def gather(waiting: queue.Queue[Pending | object | None], first: Pending) -> list[Pending]:
    """``first`` and the runs queued behind it, up to ``MAX_GROUP``: those that queued during the last commit at
    once; a run that found the writer idle waits ``LINGER_S`` for a burst to gather. A stop signal (None) met on
    the way is put back for the writer's loop."""
    group = [first]
    deadline = time.monotonic() + (LINGER_S if waiting.empty() else 0.0)
    while len(group) < MAX_GROUP:
        try:
            more = waiting.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        if more is None:
            waiting.put(None)
            break
        if isinstance(more, Pending):
            group.append(more)
    return group


class GroupCommit:
    """Stores groups of runs, numbering each commit (``commit_seq``) and telling the refresher what is visible."""

    def __init__(self, refresher: Refresher) -> None:
        self._refresher = refresher
        self._seq_lock = threading.Lock()
        self._next_seq = 0  # the commit_seq of the next commit
        #: Commits that stored runs, and the runs they stored, since this process started: their ratio is the mean
        #: group, which sets what a run costs the writer (a commit's fixed cost shared by its runs; /metrics).
        self.commits_made = 0
        self.runs_committed = 0
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

    def reset(self, seq: int) -> None:
        """The next commit is ``seq`` (the file was just opened)."""
        with self._seq_lock:
            self._next_seq = seq
        self._refresher.reset(seq)

    def _take_seq(self) -> int:
        with self._seq_lock:
            self._next_seq += 1
            return self._next_seq - 1

    def commit(self, cur: duckdb.DuckDBPyConnection, group: list[Pending]) -> None:
        """Store ``group`` and answer each of its runs: created, duplicate, conflict or the error it met."""
        firsts: dict[str, Pending] = {}
        later: list[Pending] = []  # the same run_id again in this group, or already stored
        for p in group:
            if p.run_id in firsts:
                later.append(p)
            else:
                firsts[p.run_id] = p
        try:
            stored_now = self.insert(cur, list(firsts.values()))
        except STORAGE_ERRORS:
            raise
        except Exception:  # one bad run must not sink the others: try each alone
            log.warning("group commit of %d runs failed; committing them one by one", len(firsts), exc_info=True)
            for p in firsts.values():
                self._insert_alone(cur, p)
        else:
            for p in firsts.values():
                if p.run_id in stored_now:
                    resolve(p, Stored(p.run_id, "created", p.results))
                else:
                    later.append(p)
        if later:
            stored = _stored_hashes(cur, [p.run_id for p in later])
            for p in later:
                if p.run_id in stored:
                    _settle_duplicate(cur, p, stored[p.run_id])
                else:  # its first copy failed to go in: this one gets its own chance
                    self._insert_alone(cur, p)

    def _insert_alone(self, cur: duckdb.DuckDBPyConnection, p: Pending) -> None:
        error: Exception | None = None
        try:
            stored_now = self.insert(cur, [p])
        except STORAGE_ERRORS:
            raise
        except Exception as exc:  # handed to the request that sent this run
            stored_now, error = set(), exc
        if p.run_id in stored_now:
            resolve(p, Stored(p.run_id, "created", p.results))
            return
        # Already stored (a retry racing its original, or a copy earlier in the same group), or it failed.
        stored = _stored_hashes(cur, [p.run_id])
        if p.run_id in stored:
            _settle_duplicate(cur, p, stored[p.run_id])
        else:
            resolve(p, error=error or RuntimeError(f"run {p.run_id} was not stored"))

    def insert(self, cur: duckdb.DuckDBPyConnection, runs: list[Pending], *, commit: bool = True) -> set[str]:
        """Store those of ``runs`` not stored yet, in one transaction; the run_ids it stored. ``commit=False``
        rolls it back (the first write's one-time costs paid before a run waits on them)."""
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
                "not_understood": pa.array([list(p.not_understood) or None for p in runs], type=pa.list_(pa.string())),
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
            self._refresher.committed(seq + 1, bool(stored_now))
            if stored_now:
                with self._seq_lock:
                    self.commits_made += 1
                    self.runs_committed += len(stored_now)
        return stored_now


def _stored_hashes(cur: duckdb.DuckDBPyConnection, run_ids: list[str]) -> dict[str, str]:
    rows = cur.execute(
        "SELECT run_id::VARCHAR, payload_sha256 FROM runs WHERE run_id IN (SELECT unnest(?::UUID[]))", [run_ids]
    ).fetchall()
    return dict(rows)


def _settle_duplicate(cur: duckdb.DuckDBPyConnection, p: Pending, stored_sha: str) -> None:
    """Same bytes: a duplicate. Other bytes: a duplicate only if the content is equal (spacing, key order)."""
    if stored_sha != p.sha256:
        row = cur.execute("SELECT payload FROM runs WHERE run_id = ?::UUID", [p.run_id]).fetchone()
        if row is None or not _same_content(gzip.decompress(row[0]), gzip.decompress(p.payload)):
            resolve(p, error=RunConflict(f"run {p.run_id} is already stored with different content"))
            return
    resolve(p, Stored(p.run_id, "duplicate", p.results))


def _same_content(stored: bytes, sent: bytes) -> bool:
    """As runs (defaults filled in) where this collector reads both whole; as JSON where one is of a newer minor."""
    try:
        return RunSubmission.model_validate_json(stored) == RunSubmission.model_validate_json(sent)
    except ValidationError:
        return bool(json.loads(stored) == json.loads(sent))

"""The archive folder: where a batch's Parquet files wait, when other readers may see them, and the views that read
them with the live rows in one snapshot.

A batch's files are written under ``_staging/`` (``<archive>/_staging/<table>/day=D/<batch>.parquet``, each
complete and on disk before it has that name) before the batch's transaction records it in ``archived_runs``, and
are moved to ``<archive>/<table>/day=D/<batch>.parquet`` (*published*) only after that transaction commits. The
published files are therefore always batches the database records: a reader of
``<archive>/results/*/*.parquet`` never sees a run that is still live, nor the files of an attempt that a crash or
a failed transaction left behind. ``tidy`` (before each batch, and when the store opens: ``recover``) publishes what
a recorded batch left in staging and removes the rest.

Inside the database, ``all_results`` and ``all_gpu_samples`` read the live table and both folders, keeping archived
rows only where ``archived_runs`` names that file's batch for their run, all in the reader's one snapshot: there a
run is live or archived, never both or neither, whatever the writer is doing. Files move or go only while no reader
of the store holds ``reading()``, so a query never loses a file it has listed.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from .figures import TRUSTED
from .tables import TABLES

log = logging.getLogger(__name__)

#: Where a batch's files are written before its transaction commits; no reader of the published folders sees it.
STAGING = "_staging"
#: The folders a batch writes one file into: the raw tables' rows and the runs' stored JSON.
FOLDERS = ("results", "gpu_samples", "payloads")
#: SQL users' views of live and archived rows together, and the table each reads.
VIEWS = {"all_results": "results", "all_gpu_samples": "gpu_samples"}
#: Columns a view has besides its table's: whether a result counts (the figures' rule, ``figures.TRUSTED``), so a
#: query over every result need not spell the rule again.
DERIVED = {"results": f"{TRUSTED} AS trusted"}
#: The longest the writer waits for the store's readers of the archive to finish before it moves files; if they
#: have not, the files are moved at its next pass.
MOVE_WAIT_S = 0.1
#: The longest a reader waits for batches to be published by the readers before it (they leave within the SQL time
#: limit); past it, it reads anyway (the views read staging too).
READER_HOLD_S = 10.0
#: Arrow record batches of this many rows at a time, so a batch's rows are never all in memory.
CHUNK = 50_000
#: ``meta`` key set once an archive an older collector wrote (straight to the published names) has been swept.
_SWEPT = "archive_staged"

#: Told each step of an archive batch as it is done (``retention.STEPS``): a seam for tests that stop there.
Observe = Callable[[str], None]


def _sync(path: Path) -> None:
    """``path`` (a file, or a folder's entries) on disk: a crash after this cannot lose it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _make_dirs(path: Path) -> None:
    """``path`` and its missing parents, each new one's entry on disk."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for folder in reversed(missing):
        folder.mkdir(exist_ok=True)
        _sync(folder.parent)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class ArchiveFolder:
    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._turn = threading.Condition()
        self._readers = 0
        self._moving = False
        #: Committed batches whose files wait for the readers in to leave: the last one out moves them, and readers
        #: that come meanwhile wait (at most ``READER_HOLD_S``), so readers that overlap without pause cannot put
        #: publishing off for as long as they poll (a loaded test saw a batch unpublished for 600 s).
        self._pending: list[tuple[str, str]] = []
        #: One batch at a time, and no ``tidy`` while a batch is being written.
        self.batch_lock = threading.Lock()
        #: Files wait in staging: a committed batch not yet published, or an attempt not yet removed.
        self.unpublished = False

    def path(self, folder: str, day: str, batch: str, *, staged: bool = False) -> Path:
        return (self.root / STAGING if staged else self.root) / folder / f"day={day}" / f"{batch}.parquet"

    @contextmanager
    def reading(self) -> Iterator[None]:
        """While held, no file of the archive moves or goes (many readers at once; files move only when none
        holds it). The last reader out publishes the batches that waited for it (``_pending``)."""
        with self._turn:
            self._turn.wait_for(lambda: not self._moving and not self._pending, READER_HOLD_S)
            self._readers += 1
        try:
            yield
        finally:
            with self._turn:
                self._readers -= 1
                if not self._readers and self._pending:
                    pending, self._pending = self._pending, []
                    try:
                        for day, batch in pending:
                            for folder in FOLDERS:
                                self._publish(self.path(folder, day, batch, staged=True))
                    except OSError as exc:  # left in staging for ``tidy``; the views read staging meanwhile
                        log.error("publishing archive batches failed: %s", exc)
                self._turn.notify_all()

    @contextmanager
    def _moves(self, wait_s: float) -> Iterator[bool]:
        """True, with the files to itself, once no reader holds them (within ``wait_s``); False if they still do."""
        with self._turn:
            free = self._turn.wait_for(lambda: not self._readers and not self._moving, wait_s)
            self._moving = free
        try:
            yield free
        finally:
            if free:
                with self._turn:
                    self._moving = False
                    self._turn.notify_all()

    def write(self, cur: duckdb.DuckDBPyConnection, sql: str, params: list[object], folder: str, day: str,
              batch: str) -> int:  # fmt: skip
        """The rows of ``sql`` into the batch's staged file of ``folder``; the rows written."""
        import pyarrow.parquet as pq

        reader = cur.sql(sql, params=params).to_arrow_reader(CHUNK)
        target = self.path(folder, day, batch, staged=True)
        _make_dirs(target.parent)
        partial = target.with_name(target.name + ".partial")
        rows = 0
        with pq.ParquetWriter(partial, reader.schema, compression="zstd") as writer:
            for chunk in reader:
                writer.write_batch(chunk)
                rows += chunk.num_rows
        _sync(partial)
        os.replace(partial, target)
        _sync(target.parent)  # the name too: the transaction that records the batch must not outlive its file
        return rows

    def publish(self, day: str, batch: str, observe: Observe) -> None:
        """Move a committed batch's files to where other readers find them, or leave them for ``tidy`` while the
        store's readers hold the folder."""
        with self._moves(MOVE_WAIT_S) as free:
            self.unpublished = True  # until each file has moved (an error on the way leaves the rest to ``tidy``)
            if not free:
                with self._turn:
                    if self._readers:
                        self._pending.append((day, batch))  # the last reader out moves them
                return
            for folder in FOLDERS:
                self._publish(self.path(folder, day, batch, staged=True))
                observe(f"published {folder}")
            self.unpublished = False

    def _publish(self, staged: Path) -> None:
        """One staged file to its published name; one already moved (by ``tidy`` or the last reader out) is left."""
        target = self.root / staged.relative_to(self.root / STAGING)
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(staged, target)
        except FileNotFoundError:
            if not target.exists():
                raise

    def tidy(self, cur: duckdb.DuckDBPyConnection, wait_s: float = MOVE_WAIT_S) -> None:
        """Publish what recorded batches left in staging (a crash or busy readers after their commit) and remove
        the files of attempts never recorded (a crash or a failed transaction before it): the database decides."""
        staged = sorted((self.root / STAGING).glob("*/day=*/*"))
        if not staged:
            self.unpublished = False
            return
        names = sorted({p.name.split(".")[0] for p in staged})
        recorded = {b for (b,) in cur.execute(
            "SELECT DISTINCT batch FROM archived_runs WHERE batch IN (SELECT unnest(?::VARCHAR[]))", [names]
        ).fetchall()}  # fmt: skip
        with self._moves(wait_s) as free:
            if not free:
                self.unpublished = True
                return
            for path in staged:
                if path.name.endswith(".parquet") and path.name.split(".")[0] in recorded:
                    self._publish(path)
                else:
                    log.warning("removing %s: an archive batch that was never recorded", path)
                    path.unlink()
            self.unpublished = False

    def recover(self, cur: duckdb.DuckDBPyConnection) -> None:
        """When the store opens: finish what a crash interrupted, and (once) remove the crash leftovers an older
        collector left among the published files, which it wrote there before recording them."""
        with self.batch_lock:
            try:
                if cur.execute("SELECT 1 FROM meta WHERE key = ?", [_SWEPT]).fetchone() is None:
                    recorded = {b for (b,) in cur.execute("SELECT DISTINCT batch FROM archived_runs").fetchall()}
                    for folder in FOLDERS:
                        for path in (self.root / folder).glob("day=*/*.parquet*"):
                            if not path.name.endswith(".parquet") or path.name.split(".")[0] not in recorded:
                                log.warning("removing %s: an archive batch that was never recorded", path)
                                path.unlink()
                    cur.execute("INSERT OR REPLACE INTO meta VALUES (?, 'yes')", [_SWEPT])
                self.tidy(cur, wait_s=10 * MOVE_WAIT_S)
            except OSError as exc:  # the store still opens: its views read staging, the next batch tidies again
                log.error("the archive folder could not be tidied: %s", exc)
                self.unpublished = True

    def payload(self, run_id: str, day: str, batch: str) -> bytes | None:
        """The stored (gzip-compressed) JSON of an archived run, read back from its batch's file."""
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        with self.reading():
            found = [p for s in (False, True) if (p := self.path("payloads", day, batch, staged=s)).exists()]
            if not found:
                return None
            table = pq.read_table(found[0], columns=["run_id", "payload"])
        rows = table.filter(pc.equal(table.column("run_id").cast("string"), run_id))
        return bytes(rows.column("payload")[0].as_py()) if rows.num_rows else None

    def allow_sql(self) -> str:
        """The statement that lets a database with external access off read this folder (and nothing else)."""
        return f"SET allowed_directories = [{_literal(str(self.root) + os.sep)}]"

    def views(self) -> dict[str, str]:
        """The SQL of ``all_results`` and ``all_gpu_samples``: live rows, and archived rows of recorded batches."""
        return {name: self._view(table) for name, table in VIEWS.items()}

    def _view(self, table: str) -> str:
        columns = TABLES[table].columns
        names = ", ".join(f'"{c.name}"' for c in columns)
        typed = ", ".join(f'CAST(f."{c.name}" AS {c.sql}) AS "{c.name}"' for c in columns)
        files = ", ".join(_literal(str(base / table / "*" / "*.parquet")) for base in (self.root / STAGING, self.root))
        # The typed empty row set gives every column (and ``filename``) even to an empty archive or older files.
        derived = f", {DERIVED[table]}" if table in DERIVED else ""
        return f"""
            SELECT *{derived} FROM (
            SELECT {names} FROM {table}
            UNION ALL
            SELECT {typed}
            FROM ((SELECT *, NULL::VARCHAR AS filename FROM {table} LIMIT 0) UNION ALL BY NAME
                  SELECT * FROM read_parquet([{files}], filename = true, union_by_name = true, allow_empty = true,
                                             hive_partitioning = false)) f
            SEMI JOIN archived_runs a
                ON a.run_id = CAST(f.run_id AS UUID) AND a.batch = regexp_extract(f.filename, '([^/]+)[.]parquet$', 1))
        """

"""The database file: opening it (in use, corrupt or newer files refused, each in its own words), its layout (raw,
derived, side and summary tables, views) and bringing a file an older collector wrote up to date.

A file is migrated in place when a collector opens it for writing: new tables and nullable columns are added,
views and figure definitions recreated, and runs stored without summaries (just before a crash, or by an older
collector) are summarised a batch per transaction. A file written by a newer collector is refused, untouched.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from contextlib import suppress
from pathlib import Path
from typing import Any

import duckdb

from . import aggregates, baselines, kept, retention
from .archive import ArchiveFolder
from .errors import CollectorError, CorruptDatabase, DatabaseBusy, NewerDatabase, OlderDatabase
from .figures import DEFINITIONS_DDL, FIGURES_DDL, definitions_insert
from .refresher import summarise
from .sqlviews import VIEWS
from .tables import TABLES, ddl

log = logging.getLogger(__name__)

#: The layout of the database file; a file written by a newer collector is refused, not misread. 2: the summaries
#: kept at ingest (``aggregates``), built for older files when they are first opened; 3: health_history; 4: the
#: suite of each value it keeps; 5: the views of results hold trusted results only (a reader of an older file would
#: answer through its views, which held every result: it is refused until a writer recreates them); 6:
#: ``device_runs`` keeps each run's fields and first device, which ``result_facts`` labels results with (an older
#: writer would add rows without them).
DB_VERSION = 6
#: Tables derived from stored results just after a run is stored, and the definitions they are derived by.
DERIVED_TABLES = {"figure_definitions": DEFINITIONS_DDL, "figures": FIGURES_DDL}
#: Tables that are not flattened from runs: the archive's record, prices for price/performance, baselines
#: (published tables among them), and the metrics a collector kept as it stopped.
SIDE_TABLES = {
    "archived_runs": retention.ARCHIVED_DDL,
    "prices": """CREATE TABLE IF NOT EXISTS prices (
        model VARCHAR PRIMARY KEY, price_usd DOUBLE NOT NULL, source VARCHAR, updated_at TIMESTAMPTZ NOT NULL)""",
    **baselines.DDL,
    "kept_metrics": kept.DDL,
}
#: Runs found without summaries when the file is opened are summarised this many per transaction.
MIGRATE_RUNS = 2000
#: What DuckDB says of a file another process holds (its own words: a damaged "block" is no "lock")...
_LOCKED = ("could not set lock", "conflicting lock")
#: ... of a file that is not a (whole) DuckDB database...
_CORRUPT = ("not a valid duckdb database", "corrupt", "could not read enough bytes", "checksum", "serializ")
#: ... and of a file a newer DuckDB wrote.
_NEWER_FORMAT = ("version number", "newer version")


def connect(path: Path, *, read_only: bool = False, config: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """The file opened, or why not: in use (``DatabaseBusy``), damaged (``CorruptDatabase``), a newer DuckDB's."""
    try:
        return duckdb.connect(str(path), read_only=read_only, config=config or {})
    except duckdb.Error as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise refusal(path, exc) or CollectorError(f"{path} cannot be opened: {first}") from exc


def harden(cur: duckdb.DuckDBPyConnection, allow_sql: str, memory_limit: str | None) -> None:
    """For a server that answers users' SQL: no file, network or extension access (nor installs), a memory limit
    on what DuckDB manages, memory handed back to the system after a large query, and no more SET."""
    cur.execute(allow_sql)  # the archive's files alone, for ``all_results``
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


def open_file(
    path: Path, *, read_only: bool, config: dict[str, Any], folder: ArchiveFolder
) -> tuple[duckdb.DuckDBPyConnection, int | None]:
    """The file opened and ``prepare``d, and the commit number to go on from (None read-only); a file that cannot be
    is closed again and refused with its own error (``refusal``)."""
    con = connect(path, read_only=read_only, config=config)
    try:
        return con, prepare(con, path, folder, read_only=read_only)
    except BaseException as exc:
        with suppress(duckdb.Error):
            con.close()
        refused = refusal(path, exc) if isinstance(exc, duckdb.Error) else None
        if refused is None:
            raise
        raise refused from exc


def prepare(con: duckdb.DuckDBPyConnection, path: Path, folder: ArchiveFolder, *, read_only: bool) -> int | None:
    """Read-only users (report, sql, snapshot) get no file access from SQL but the archive's (``all_results``;
    export opens its own) and a file of this layout; a writer migrates it and recovers the archive's staging."""
    if read_only:
        con.execute(folder.allow_sql())
        con.execute("SET enable_external_access = false")
        check_version(con, path)
        return None
    seq = migrate(con.cursor(), path, folder.views())
    folder.recover(con.cursor())
    return seq


def refusal(path: Path, exc: duckdb.Error) -> CollectorError | None:
    """The error a user reads for a file DuckDB could not open or read: in use, newer or damaged (None: none of
    these, an error to keep its traceback)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    lowered = re.sub(r'"[^"]*"', '""', text).lower()  # DuckDB's words only, not a quoted file name's
    if any(marker in lowered for marker in _LOCKED):
        return DatabaseBusy(f"{path} is in use by another process (a running collector?): stop it, or use its HTTP API")
    if any(marker in lowered for marker in _NEWER_FORMAT):
        return NewerDatabase(f"{path} was written by a newer DuckDB than this collector's ({duckdb.__version__}): "
                             f"upgrade the collector ({text})")  # fmt: skip
    if any(marker in lowered for marker in _CORRUPT):
        return CorruptDatabase(
            f"{path} is not a readable DuckDB database ({text}): left untouched; restore it from a snapshot, or move "
            "it away to start a new one"
        )
    return None


def count(cur: duckdb.DuckDBPyConnection, table: str, params: list[object] | None = None) -> int:
    row = cur.execute(f"SELECT count(*) FROM {table}", params).fetchone()
    return int(row[0]) if row else 0


def check_version(con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """A read-only store cannot add what a newer collector keeps: say so instead of failing on a missing table."""
    found = _version(con)
    if found is not None and found > DB_VERSION:
        raise _newer(path, found)
    if found is None or found < DB_VERSION:
        shown = "none" if found is None else found
        raise OlderDatabase(
            f"{path} was written by an older collector (db_version {shown}, this one keeps {DB_VERSION}): "
            f"open it for writing once, e.g. `flopfleet-collector serve --db {path}`, which brings it up to "
            "date as it starts"
        )


def _version(cur: duckdb.DuckDBPyConnection) -> int | None:
    """The file's ``db_version``; None for a new file (or one from before versions were kept)."""
    if not count(cur, "(SELECT 1 FROM information_schema.tables WHERE table_name = 'meta')"):
        return None
    row = cur.execute("SELECT value FROM meta WHERE key = 'db_version'").fetchone()
    return int(row[0]) if row else None


def _newer(path: Path, found: int) -> NewerDatabase:
    return NewerDatabase(
        f"{path} was written by a newer collector (db_version {found}, this one keeps {DB_VERSION}): left "
        "untouched; run that collector's version, or a newer one"
    )


def migrate(cur: duckdb.DuckDBPyConnection, path: Path, archive_views: dict[str, str]) -> int:
    """Bring the file up to this collector's layout, with the views over its archive (``archive``); the
    ``commit_seq`` of the next commit."""
    found = _version(cur)
    if found is not None and found > DB_VERSION:
        raise _newer(path, found)  # before anything is written to it
    # One transaction: a file whose damage shows only now (a bad block read while migrating) is left as it was.
    cur.begin()
    try:
        rewrote = _layout(cur, archive_views)
        cur.commit()
    except BaseException:
        with suppress(duckdb.Error):
            cur.rollback()
        raise
    baselines.migrate_reference_values(cur)  # published tables an older collector kept apart
    # Runs without summaries: stored just before a crash (summaries follow commits by a moment), or by an older
    # collector. Their figures are computed again with them, a batch of runs per transaction.
    summarised = 0
    while True:
        cur.begin()
        try:
            # Their ids first, from the id columns alone: a join that carried every column of ``runs`` would read
            # every stored payload to find none (9 s at 1,000,000 runs, most of a start).
            cur.execute(
                "CREATE OR REPLACE TEMP TABLE unsummarised AS "
                f"SELECT run_id FROM runs ANTI JOIN device_runs USING (run_id) LIMIT {MIGRATE_RUNS}"
            )
            done = count(cur, "unsummarised")
            if done:
                unsummarised = {"runs": "FROM runs SEMI JOIN unsummarised USING (run_id)"}
                unsummarised |= {t: f"FROM {t} SEMI JOIN new_runs USING (run_id)" for t in aggregates.SOURCES[1:]}
                forget = "DELETE FROM figures WHERE run_id IN (SELECT run_id FROM new_runs)"
                # Copied, not views: a view of "runs without summaries" would empty itself as the summaries go in.
                summarise(cur, unsummarised, before=(forget, aggregates.RUN_SUMMARIES_LATE), copy=True)
            cur.execute("INSERT OR REPLACE INTO meta VALUES ('db_version', ?)", [str(DB_VERSION)])
            cur.commit()
        except BaseException:
            with suppress(duckdb.Error):
                cur.rollback()
            raise
        summarised += done
        if done < MIGRATE_RUNS:
            break
        log.info("summarised %d runs stored without summaries; going on", done)
    if rewrote or summarised:  # folded in now: the log of a large migration would be replayed at every start
        cur.execute("CHECKPOINT")
    row = cur.execute("SELECT max(commit_seq) FROM runs").fetchone()
    return int(row[0]) + 1 if row and row[0] is not None else 0


def _layout(cur: duckdb.DuckDBPyConnection, archive_views: dict[str, str]) -> bool:
    """This collector's tables, columns, views, figure definitions and bundled baselines; whether it filled a
    summary an older collector kept without something (a write in proportion to the runs kept)."""
    cur.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    for table in TABLES:
        cur.execute(ddl(table))
        _add_new_columns(cur, table)
    had_history = count(cur, "(SELECT 1 FROM information_schema.tables WHERE table_name = 'health_history')") > 0
    device_runs = _columns(cur, "device_runs")  # none: a new file's, made below
    rewrote = not had_history
    for sql in _ddl():
        cur.execute(sql)
    if not had_history:  # an older collector's database: the verdicts' history from the figures it kept
        cur.execute(aggregates.HISTORY_BACKFILL)
    elif not count(
        cur, "(SELECT 1 FROM information_schema.columns WHERE table_name = 'health_history' AND column_name = 'suite')"
    ):  # kept before it said which suite measured each value
        cur.execute("ALTER TABLE health_history ADD COLUMN suite VARCHAR")
        cur.execute(aggregates.HISTORY_SUITES)
        rewrote = True
    if not count(
        cur, "(SELECT 1 FROM information_schema.columns WHERE table_name = 'run_summaries' AND column_name = 'starved')"
    ):  # summarised before results could be starved: NULL, none was
        cur.execute("ALTER TABLE run_summaries ADD COLUMN starved INTEGER")
    if device_runs and not device_runs >= set(aggregates.DEVICE_RUNS_ADDED):
        # kept before the GPU page read its counters from it, or before result_facts read each run's fields from it
        for sql in aggregates.device_runs_backfill(device_runs):
            cur.execute(sql)
        rewrote = True
    for name, sql in VIEWS.items():
        cur.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
    _create_archive_views(cur, archive_views)
    cur.execute("DELETE FROM figure_definitions")  # this version's, for runs stored from now on
    cur.executemany(*definitions_insert())
    baselines.sync_bundled(cur)  # this version's bundled baselines, as its figure definitions
    return rewrote


def _create_archive_views(cur: duckdb.DuckDBPyConnection, views: dict[str, str]) -> None:
    """The views over the archive, recreated only when their SQL changed: creating one reads every archive file's
    schema, which an open should not pay for."""
    digest = hashlib.sha256(json.dumps(views, sort_keys=True).encode()).hexdigest()
    row = cur.execute("SELECT value FROM meta WHERE key = 'archive_views'").fetchone()
    have = count(cur, f"duckdb_views() WHERE view_name IN ({', '.join('?' * len(views))})", list(views))
    if row is not None and row[0] == digest and have == len(views):
        return
    for name, sql in views.items():
        cur.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
    cur.execute("INSERT OR REPLACE INTO meta VALUES ('archive_views', ?)", [digest])


def _ddl() -> list[str]:
    return [*DERIVED_TABLES.values(), *SIDE_TABLES.values(), *aggregates.ddl()]


def _columns(cur: duckdb.DuckDBPyConnection, table: str) -> set[str]:
    """The columns of ``table`` (none where there is no such table)."""
    rows = cur.execute("SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table]).fetchall()
    return {name for (name,) in rows}


def _add_new_columns(cur: duckdb.DuckDBPyConnection, table: str) -> None:
    """Columns a newer collector added to a table (always nullable): older rows read NULL, as their runs never
    carried the field."""
    have = _columns(cur, table)
    for column in TABLES[table].columns:
        if column.name not in have:
            cur.execute(f"ALTER TABLE {table} ADD COLUMN {column.name} {column.sql}")


def copy_database(src: duckdb.DuckDBPyConnection, dest: Path, archive_views: dict[str, str]) -> Path:
    """A consistent copy of every table into a new database file at ``dest``, taken while writes go on.

    The copy goes through Arrow into a second DuckDB instance, because the source may have external access off;
    the reads share one transaction, so the copy is one point in time.
    """
    if dest.exists():
        raise CollectorError(f"{dest} exists; a snapshot never overwrites a file")
    target = duckdb.connect(str(dest))
    try:
        target.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        for table in TABLES:
            target.execute(ddl(table))
        for sql in _ddl():
            target.execute(sql)
        src.execute("BEGIN TRANSACTION READ ONLY")
        for table in ("meta", *TABLES, *DERIVED_TABLES, *SIDE_TABLES, *aggregates.DDL):
            batches = src.sql(f"SELECT * FROM {table}").to_arrow_reader(50_000)
            target.register("incoming", batches)
            target.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming")
            target.unregister("incoming")
        src.execute("ROLLBACK")
        for name, sql in (VIEWS | archive_views).items():
            target.execute(f"CREATE VIEW {name} AS {sql}")
        target.execute("CHECKPOINT")
    finally:
        target.close()
    return dest

"""History that does not grow without bound: raw rows of old runs moved to a Parquet archive, their figures kept.

With ``retention_days`` set, the writer moves the raw results, GPU samples and stored JSON of runs that started
more than that many days ago into Parquet files under the archive folder, a small batch of runs at a time between
commits (``schedule``: at most a quarter of its time while runs arrive), the oldest commits first:
``<archive>/<table>/day=YYYY-MM-DD/<batch>.parquet`` (hive-style, so DuckDB, Spark or Trino read the folder as one
table). The runs' rows in ``runs`` and ``gpus``, their figures and every summary stay, so pages, reports, health
and version checks are unchanged; SQL over ``results`` and the views built on it covers the runs not archived
(``archived_runs`` lists the others and where they went), ``all_results`` covers both (``archive``).

Every acknowledged run is live or archived, once, at every moment: a batch's files are written to staging first
(``archive``), then one transaction deletes the rows and records the batch in ``archived_runs``, and only then are
the files published. A crash at any step leaves files that the database says what to do with when the store opens
again: published if their batch was recorded, removed (and the runs archived again) if not.
"""

from __future__ import annotations

import hashlib
import logging
from contextlib import suppress
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb

from .archive import FOLDERS, ArchiveFolder, Observe
from .errors import NotFound

log = logging.getLogger(__name__)

ARCHIVED_DDL = """CREATE TABLE IF NOT EXISTS archived_runs (
    run_id UUID NOT NULL, day DATE NOT NULL, batch VARCHAR NOT NULL, archived_at TIMESTAMPTZ NOT NULL)"""
#: The raw tables whose rows move to the archive (``runs`` keeps its row, its stored JSON moves as ``payloads``).
MOVED = ("results", "gpu_samples")
#: Runs per batch: small, because the writer stores no run while it archives a batch (100 runs of 300 results
#: took about 0.3 s on 2 cores, benchmarks/collector_retention.py).
BATCH_RUNS = 100
#: The stored JSON of an archived run, in place of the compressed payload: an empty value.
ARCHIVED_PAYLOAD = b""
#: The steps of a batch, in order, as ``archive_batch`` tells its observer.
STEPS = (*(f"written {f}" for f in FOLDERS), "committed", *(f"published {f}" for f in FOLDERS))


def default_folder(db: Path) -> Path:
    return db.with_name(db.name + ".archive")


def stored_payload(cur: duckdb.DuckDBPyConnection, folder: ArchiveFolder, run_id: str) -> bytes:
    """A run's stored (gzip-compressed) JSON, from the database or, for an archived run, from its archive file."""
    row = cur.execute("SELECT payload FROM runs WHERE run_id = TRY_CAST(? AS UUID)", [run_id]).fetchone()
    if row is None:
        raise NotFound(f"no run {run_id}")
    payload = bytes(row[0])
    if payload == ARCHIVED_PAYLOAD:
        where = cur.execute(
            "SELECT CAST(day AS VARCHAR), batch FROM archived_runs WHERE run_id = ?::UUID", [run_id]
        ).fetchone()
        found = folder.payload(run_id, *where) if where else None
        if found is None:
            raise NotFound(f"run {run_id} was archived, and its archive file is not in {folder.root.name}")
        payload = found
    return payload


def archive_due(
    cur: duckdb.DuckDBPyConnection, folder: ArchiveFolder, days: int, summarised_before: int, observe: Observe | None
) -> int:
    """Every run due now, batch after batch (``archive``, with no writer on the file); the runs moved."""
    moved = 0
    while done := archive_batch(cur, folder, days, summarised_before=summarised_before, observe=observe):
        moved += done
    return moved


def archive_batch(
    cur: duckdb.DuckDBPyConnection,
    folder: ArchiveFolder,
    days: int,
    *,
    summarised_before: int,
    now: datetime | None = None,
    observe: Observe | None = None,
) -> int:
    """Archive one batch of runs (all of one day) started more than ``days`` days before ``now``; the runs moved.
    Only runs of commits below ``summarised_before`` are taken: a late run's rows stay until its figures exist.
    ``observe`` is told each of ``STEPS`` as it is done."""
    with folder.batch_lock:
        folder.tidy(cur)
        return _batch(cur, folder, days, summarised_before, now, observe or (lambda step: None))


def _batch(cur: duckdb.DuckDBPyConnection, folder: ArchiveFolder, days: int, summarised_before: int,
           now: datetime | None, observe: Observe) -> int:  # fmt: skip
    cutoff = (now or datetime.now(timezone.utc)) - timedelta(days=days)
    due = cur.execute(
        """WITH due AS (SELECT run_id, commit_seq, CAST(started_at AT TIME ZONE 'UTC' AS DATE) AS day FROM runs
                        ANTI JOIN archived_runs USING (run_id)
                        WHERE started_at < ? AND (commit_seq < ? OR commit_seq IS NULL))
           SELECT CAST(run_id AS VARCHAR), day, commit_seq FROM due WHERE day = (SELECT min(day) FROM due)
           ORDER BY commit_seq NULLS FIRST, run_id LIMIT ?""",
        [cutoff, summarised_before, BATCH_RUNS],
    ).fetchall()
    if not due:
        return 0
    ids = [run_id for run_id, _, _ in due]
    day = due[0][1].isoformat()
    # The oldest commits first, so a batch's rows lie in a few row groups: the commit_seq range lets DuckDB's zone
    # maps skip the rest of each table (without it, every batch read every stored payload, the largest column).
    seqs = [seq for _, _, seq in due if seq is not None]
    chosen = "run_id IN (SELECT unnest(?::UUID[]))"
    params: list[object] = [ids]
    if len(seqs) == len(ids):  # else runs an older collector stored before commits were numbered: by id alone
        chosen, params = f"commit_seq BETWEEN ? AND ? AND {chosen}", [seqs[0], seqs[-1], ids]
    at = datetime.now(timezone.utc)
    # Named by its runs and its moment: an attempt that was never recorded never shares a name with a later one.
    batch = hashlib.sha256("\n".join([*ids, at.isoformat()]).encode()).hexdigest()[:16]
    for table in MOVED:
        folder.write(cur, f"SELECT * FROM {table} WHERE {chosen}", params, table, day, batch)
        observe(f"written {table}")
    folder.write(cur, f"SELECT run_id, payload FROM runs WHERE {chosen}", params, "payloads", day, batch)
    observe("written payloads")
    cur.begin()
    try:
        for table in MOVED:
            cur.execute(f"DELETE FROM {table} WHERE {chosen}", params)
        cur.execute(f"UPDATE runs SET payload = ? WHERE {chosen}", [ARCHIVED_PAYLOAD, *params])
        cur.execute("INSERT INTO archived_runs SELECT unnest(?::UUID[]), ?, ?, ?", [ids, day, batch, at])
        cur.commit()
    except BaseException:
        folder.unpublished = True  # whether it committed is the database's to say (``tidy``), not this exception's
        with suppress(duckdb.Error):
            cur.rollback()
        raise
    observe("committed")
    folder.publish(day, batch, observe)
    log.info("archived %d runs of %s (batch %s) to %s", len(ids), day, batch, folder.root)
    return len(ids)

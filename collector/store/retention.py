"""History that does not grow without bound: raw rows of old runs moved to a Parquet archive, their figures kept.

With ``retention_days`` set, the writer moves the raw results, GPU samples and stored JSON of runs that started
more than that many days ago into Parquet files under the archive folder, a small batch of runs at a time between
commits (``schedule``: at most a quarter of its time while runs arrive), the oldest commits first:
``<archive>/<table>/day=YYYY-MM-DD/<batch>.parquet`` (hive-style, so DuckDB, Spark or Trino read the folder as one
table). The runs' rows in ``runs`` and ``gpus``, their figures and every summary stay, so pages, reports, health
and version checks are unchanged; SQL over ``results`` and the views built on it covers the runs not archived
(``archived_runs`` lists the others and where they went).

Crash-safe: a batch's files are written first (each to a temporary name, then renamed), and only then, in one
transaction, are the rows deleted and the batch recorded in ``archived_runs``. A crash in between leaves files that
no batch names; they are removed before the next batch of that day is written, and the runs are archived again.
"""

from __future__ import annotations

import hashlib
import logging
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb

log = logging.getLogger(__name__)

ARCHIVED_DDL = """CREATE TABLE IF NOT EXISTS archived_runs (
    run_id UUID NOT NULL, day DATE NOT NULL, batch VARCHAR NOT NULL, archived_at TIMESTAMPTZ NOT NULL)"""
#: The raw tables whose rows move to the archive (``runs`` keeps its row, its stored JSON moves as ``payloads``).
MOVED = ("results", "gpu_samples")
#: Runs per batch: small, because the writer stores no run while it archives a batch (100 runs of 300 results
#: took about 0.3 s on 2 cores, benchmarks/collector_retention.py); a batch's rows are held in memory as Arrow
#: record batches of ``CHUNK`` rows at a time.
BATCH_RUNS = 100
CHUNK = 50_000
#: The stored JSON of an archived run, in place of the compressed payload: an empty value.
ARCHIVED_PAYLOAD = b""


def default_folder(db: Path) -> Path:
    return db.with_name(db.name + ".archive")


def _write(cur: duckdb.DuckDBPyConnection, sql: str, params: list[object], target: Path) -> int:
    """The rows of ``sql`` into one Parquet file, atomically; the rows written."""
    import pyarrow.parquet as pq

    reader = cur.sql(sql, params=params).to_arrow_reader(CHUNK)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    rows = 0
    with pq.ParquetWriter(partial, reader.schema, compression="zstd") as writer:
        for batch in reader:
            writer.write_batch(batch)
            rows += batch.num_rows
    os.replace(partial, target)
    return rows


def _orphans(folder: Path, day: str, known: set[str]) -> None:
    """Files of ``day`` no recorded batch names: a crash between writing them and recording them."""
    for table in (*MOVED, "payloads"):
        for path in (folder / table / f"day={day}").glob("*.parquet*"):
            if path.name.split(".")[0] not in known:
                log.warning("removing %s: written by an archive batch that was never recorded", path)
                path.unlink()


def archive_batch(
    cur: duckdb.DuckDBPyConnection, folder: Path, days: int, *, summarised_before: int, now: datetime | None = None
) -> int:
    """Archive one batch of runs (all of one day) started more than ``days`` days before ``now``; the runs moved.
    Only runs of commits below ``summarised_before`` are taken: a late run's rows stay until its figures exist."""
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
    batch = hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]
    known = {b for (b,) in cur.execute("SELECT DISTINCT batch FROM archived_runs WHERE day = ?", [day]).fetchall()}
    _orphans(folder, day, known)
    for table in MOVED:
        _write(cur, f"SELECT * FROM {table} WHERE {chosen}", params, folder / table / f"day={day}" /
               f"{batch}.parquet")  # fmt: skip
    _write(cur, f"SELECT run_id, payload FROM runs WHERE {chosen}", params,
           folder / "payloads" / f"day={day}" / f"{batch}.parquet")  # fmt: skip
    cur.begin()
    try:
        for table in MOVED:
            cur.execute(f"DELETE FROM {table} WHERE {chosen}", params)
        cur.execute(f"UPDATE runs SET payload = ? WHERE {chosen}", [ARCHIVED_PAYLOAD, *params])
        cur.execute(
            "INSERT INTO archived_runs SELECT unnest(?::UUID[]), ?, ?, ?", [ids, day, batch, datetime.now(timezone.utc)]
        )
        cur.commit()
    except BaseException:
        cur.rollback()
        raise
    log.info("archived %d runs of %s (batch %s) to %s", len(ids), day, batch, folder)
    return len(ids)


def archived_payload(folder: Path, run_id: str, day: str, batch: str) -> bytes | None:
    """The stored (gzip-compressed) JSON of an archived run, read back from its batch's file."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path = folder / "payloads" / f"day={day}" / f"{batch}.parquet"
    if not path.exists():
        return None
    table = pq.read_table(path, columns=["run_id", "payload"])
    ids = table.column("run_id").cast("string")
    found = table.filter(pc.equal(ids, run_id))
    return bytes(found.column("payload")[0].as_py()) if found.num_rows else None

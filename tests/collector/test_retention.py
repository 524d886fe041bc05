"""Retention: raw rows of old runs move to a Parquet archive that other engines read; figures, summaries, pages and
the run's JSON stay; a crash between writing a batch and recording it loses and duplicates nothing."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest

import collector.store.retention as retention
from collector.read.report import build_report
from collector.store import SUMMARY_TABLES, Store
from collector.store.archive import ArchiveFolder
from collector.store.errors import QueryFailed, StorageUnavailable
from tests.collector.conftest import query
from tests.factories import bandwidth, make_run, matmul

NOW = datetime.now(timezone.utc)


def _runs(days_ago: list[int]) -> list:  # type: ignore[type-arg]
    return [
        make_run([matmul(4096, "bf16", 700.0 + i), bandwidth(1 << 26, 3000.0 + i)], hostname=f"h{i}",
                 started=NOW - timedelta(days=d, hours=i))
        for i, d in enumerate(days_ago)
    ]  # fmt: skip


def _summaries(store: Store) -> dict[str, list[str]]:
    return {t: sorted(map(str, query(store, f"SELECT * FROM {t}").fetchall())) for t in ("figures", *SUMMARY_TABLES)}


def test_old_runs_move_to_parquet_and_everything_derived_stays(tmp_path: Path) -> None:
    runs = _runs([40, 40, 35, 2])
    db = tmp_path / "db.duckdb"
    with Store(db, retention_days=30) as store:
        for run in runs:
            store.add_run(run)
        before, report = _summaries(store), build_report(store.reads(), "md")
        payload = store.run_payload(str(runs[0].run_id))
        assert store.archive() == 3
        assert query(store, "SELECT count(DISTINCT run_id) FROM results").fetchone() == (1,)  # the recent one
        assert query(store, "SELECT count(*) FROM runs").fetchone() == (4,)
        assert _summaries(store) == before
        assert build_report(store.reads(), "md") == report
        assert store.run_payload(str(runs[0].run_id)) == payload  # read back from the archive
        assert store.archive() == 0  # nothing is due twice
    archive = tmp_path / "db.duckdb.archive"
    days = sorted(p.name for p in (archive / "results").iterdir())
    assert days == sorted({f"day={(NOW - timedelta(days=d, hours=i)).date()}" for i, d in enumerate([40, 40, 35])})
    # Another engine reads the archive as one table, hive-partitioned by day.
    con = duckdb.connect()
    rows = con.execute(
        f"SELECT count(*), count(DISTINCT run_id) FROM read_parquet('{archive}/results/*/*.parquet', "
        "hive_partitioning = true)"
    ).fetchone()
    assert rows == (6, 3)


def test_an_older_collectors_unrecorded_batch_is_removed_and_written_again_once(tmp_path: Path) -> None:
    """An older collector wrote a batch's files straight to their published names before recording it; a crash in
    between left files no batch names, where readers of the archive see them. The first open removes them."""
    db = tmp_path / "db.duckdb"
    with Store(db, retention_days=30) as store:
        for run in _runs([40, 40]):
            store.add_run(run)
    # As a crash after the files and before the transaction leaves it: files, but no batch recorded.
    folder = tmp_path / "db.duckdb.archive"
    with Store(db, retention_days=30) as store:
        store.archive()
    con = duckdb.connect(str(db))
    con.execute("DELETE FROM meta WHERE key = 'archive_staged'")  # as an older collector left the file
    con.execute("DELETE FROM archived_runs")  # the record the crash lost; the rows are gone in the same commit,
    con.execute("CHECKPOINT")  # so put them back from the archive, as the uncommitted transaction left them
    for table in ("results", "gpu_samples"):
        files = f"read_parquet('{folder}/{table}/*/*.parquet', hive_partitioning = false)"
        con.execute(f"INSERT INTO {table} SELECT * FROM {files}")
    payloads = con.execute(f"SELECT run_id, payload FROM read_parquet('{folder}/payloads/*/*.parquet')").fetchall()
    con.executemany("UPDATE runs SET payload = ? WHERE run_id = ?", [[p, r] for r, p in payloads])
    con.close()
    stale = next((folder / "results").rglob("*.parquet"))
    orphan = stale.with_name("0123456789abcdef.parquet")
    stale.rename(orphan)
    with Store(db, retention_days=30) as store:
        assert store.archive() == 2
    files = sorted(p.name for p in (folder / "results").rglob("*.parquet"))
    assert orphan.name not in files and len(files) == 1
    con = duckdb.connect()
    assert con.execute(f"SELECT count(*) FROM read_parquet('{folder}/results/*/*.parquet')").fetchone() == (4,)


def test_the_writer_archives_by_itself_when_idle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import collector.store.schedule as schedule

    monkeypatch.setattr(schedule, "ARCHIVE_FIRST_S", 0.5)
    with Store(tmp_path / "db.duckdb", retention_days=30) as store:
        for run in _runs([40, 3]):
            store.add_run(run)
        deadline = time.monotonic() + 600  # a hang guard, not a speed target
        while query(store, "SELECT count(*) FROM archived_runs").fetchone() != (1,) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert query(store, "SELECT count(*) FROM archived_runs").fetchone() == (1,)


def test_archive_without_retention_says_how_to_turn_it_on(tmp_path: Path) -> None:
    with Store(tmp_path / "db.duckdb") as store, pytest.raises(StorageUnavailable, match="RETENTION_DAYS"):
        store.archive()


def test_the_writer_archives_while_runs_arrive_steadily(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run every 50 ms never leaves the writer idle for a chore's pause (the old rule archived nothing under such
    a load): the due runs go in small batches between commits, and the arriving runs are all stored."""
    import collector.store.retention as retention
    import collector.store.schedule as schedule
    from collector.store.commits import compress, digest

    monkeypatch.setattr(schedule, "ARCHIVE_FIRST_S", 0.5)
    monkeypatch.setattr(retention, "BATCH_RUNS", 2)
    with Store(tmp_path / "db.duckdb", retention_days=30) as store:
        for run in _runs([40, 40, 39, 39, 38]):
            store.add_run(run)
        arriving, archived = [], 0
        deadline = time.monotonic() + 600  # a hang guard, not a speed target
        while archived < 5:
            assert time.monotonic() < deadline, f"{archived} of 5 archived while {len(arriving)} runs arrived"
            doc = make_run([matmul(64, "fp32", float(len(arriving) + 1))]).model_dump_json().encode()
            arriving.append(store.submit(doc, run_id=json.loads(doc)["run_id"], results=1, sha256=digest(doc),
                                         payload=compress(doc)))  # fmt: skip
            time.sleep(0.05)
            archived = query(store, "SELECT count(*) FROM archived_runs").fetchone()[0]  # type: ignore[index]
        assert all(f.result(30).status == "created" for f in arriving)
        assert store.schedule.batches >= 3 and store.schedule.archive_s > 0


def test_runs_an_older_collector_stored_unnumbered_are_archived_too(tmp_path: Path) -> None:
    """Files from before commits were numbered hold runs without a commit_seq: they are the oldest, and due."""
    db = tmp_path / "db.duckdb"
    runs = _runs([40, 40, 2])
    with Store(db) as store:
        for run in runs:
            store.add_run(run)
    con = duckdb.connect(str(db))
    for table in ("runs", "gpus", "results", "gpu_samples"):
        con.execute(f"UPDATE {table} SET commit_seq = NULL WHERE run_id = ?", [str(runs[0].run_id)])
    con.close()
    with Store(db, retention_days=30) as store:
        assert store.archive() == 2
        assert query(store, "SELECT count(DISTINCT run_id) FROM results").fetchone() == (1,)
        assert store.run_payload(str(runs[0].run_id)) == runs[0].model_dump_json()


def test_a_read_only_store_reads_the_archive_through_all_results_and_no_other_file(tmp_path: Path) -> None:
    """``sql`` and ``report`` open the file read-only with file access off, but for the archive folder."""
    db = tmp_path / "db.duckdb"
    with Store(db, retention_days=30) as store:
        for run in _runs([40, 40, 2]):
            store.add_run(run)
        assert store.archive() == 2
    with Store(db, read_only=True, retention_days=30) as store:
        assert query(store, "SELECT count(*), count(DISTINCT run_id) FROM all_results").fetchone() == (6, 3)
        assert query(store, "SELECT count(*) FROM all_gpu_samples").fetchone() == (0,)
        with pytest.raises(QueryFailed, match="disabled"):
            store.sql(f"SELECT * FROM read_csv('{db.with_name('tokens.txt')}')")


def test_files_wait_in_staging_while_a_reader_holds_the_archive(tmp_path: Path) -> None:
    """A batch whose readers hold the folder commits, and its files stay in staging (``all_results`` still sees each
    run once) until the next pass, when no reader holds it any more."""
    db = tmp_path / "db.duckdb"
    with Store(db) as store:
        for run in _runs([40, 40, 2]):
            store.add_run(run)
    folder = ArchiveFolder(tmp_path / "db.duckdb.archive")
    con = duckdb.connect(str(db))
    with folder.reading():
        assert retention.archive_batch(con, folder, 30, summarised_before=1 << 62) == 2
        assert folder.unpublished and not (folder.root / "results").exists()
        assert len(list((folder.root / "_staging").rglob("*.parquet"))) == 3
        assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM all_results").fetchone() == (6, 3)
    assert retention.archive_batch(con, folder, 30, summarised_before=1 << 62) == 0  # nothing due: it publishes
    assert not folder.unpublished and not list((folder.root / "_staging").rglob("*.parquet"))
    assert len(list(folder.root.glob("*/day=*/*.parquet"))) == 3
    assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM all_results").fetchone() == (6, 3)
    con.close()


def test_a_batch_whose_transaction_fails_is_archived_again_once(tmp_path: Path) -> None:
    """The batch's files are written, then its transaction fails (another transaction holds its runs' rows): the
    runs stay live, and its files are never published. Archived again while a reader holds the folder (so the
    first attempt's files are still there), each run is still seen once; the next pass removes them."""
    db = tmp_path / "db.duckdb"
    with Store(db) as store:
        for run in _runs([40, 40, 2]):
            store.add_run(run)
    folder = ArchiveFolder(tmp_path / "db.duckdb.archive")
    con = duckdb.connect(str(db))
    other = con.cursor()
    other.execute("BEGIN")
    other.execute("DELETE FROM results")  # not committed: the batch's DELETE of these rows conflicts with it
    with pytest.raises(duckdb.TransactionException):
        retention.archive_batch(con, folder, 30, summarised_before=1 << 62)
    other.execute("ROLLBACK")
    assert folder.unpublished and len(list((folder.root / "_staging").rglob("*.parquet"))) == 3
    assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM all_results").fetchone() == (6, 3)
    with folder.reading():
        assert retention.archive_batch(con, folder, 30, summarised_before=1 << 62) == 2
        assert len(list((folder.root / "_staging").rglob("*.parquet"))) == 6  # both attempts' files
        assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM all_results").fetchone() == (6, 3)
    assert retention.archive_batch(con, folder, 30, summarised_before=1 << 62) == 0
    assert not list((folder.root / "_staging").rglob("*.parquet"))
    published = duckdb.connect().execute(
        f"SELECT count(*), count(DISTINCT run_id) FROM read_parquet('{folder.root}/results/*/*.parquet')"
    )
    assert published.fetchone() == (4, 2)
    assert con.execute("SELECT count(*), count(DISTINCT run_id) FROM all_results").fetchone() == (6, 3)
    con.close()

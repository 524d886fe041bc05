"""Compaction gives back the space archived runs leave in the file, which DuckDB reuses but never returns: a
generated fleet's history archived, the file rewritten by the CLI and swapped in, every run and page as before."""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import httpx

from benchmarks.collector_million import build
from collector.store import Store
from collector.store.compact import SUFFIX, free_bytes
from tests.collector.conftest import held_open
from tests.conftest import collector_cli
from tests.servers import serve_collector

#: 40 GPUs checked daily for 25 days; with 5 days kept, four fifths of the history goes to the archive.
GPUS, DAYS, KEPT = 40, 25, 5


def _answers(db: Path) -> dict[str, str]:
    """What a collector serving ``db`` says: every GPU's verdict, the runs as SQL counts them, live and archived."""
    with serve_collector(db) as site:
        counted = ("runs", "all_results", "results", "result_facts", "device_runs")
        sql = "SELECT " + ", ".join(f"(SELECT count(*) FROM {table})" for table in counted)
        return {
            "health": httpx.get(site.url + "/health.csv").text,
            "counts": str(httpx.get(site.url + "/api/v1/sql", params={"sql": sql}).json()["rows"]),
        }


def test_compacting_gives_back_what_the_archive_freed_and_keeps_every_run(tmp_path: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    build(db, GPUS * DAYS, gpus=GPUS, chunk=100_000, refresh_runs=50_000)
    with Store(db, retention_days=KEPT) as store:
        assert store.archive() >= GPUS * (DAYS - KEPT - 1)
        archived = next(iter(store.sql("SELECT run_id FROM archived_runs LIMIT 1").rows))[0]
        payload = store.run_payload(str(archived))
    before = _answers(db)
    size = db.stat().st_size
    with duckdb.connect(str(db), read_only=True) as con:
        assert free_bytes(con) > size / 4  # freed inside the file, not given back
    (tmp_path / f"fleet.duckdb{SUFFIX}").write_bytes(b"left by an interrupted compaction")

    done = collector_cli("compact", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert db.stat().st_size < size * 0.75 and str(db) in done.stdout and "MiB now" in done.stdout
    assert not (tmp_path / f"fleet.duckdb{SUFFIX}").exists()
    assert _answers(db) == before
    with Store(db, retention_days=KEPT) as store:
        assert store.run_payload(str(archived)) == payload  # an archived run's JSON, from its Parquet file


def test_a_file_a_collector_holds_is_left_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    Store(db).close()
    stat = os.stat(db)
    with held_open(db):
        refused = collector_cli("compact", "--db", str(db))
    assert refused.returncode == 75 and "in use" in refused.stderr
    assert os.stat(db).st_mtime_ns == stat.st_mtime_ns
    missing = collector_cli("compact", "--db", str(tmp_path / "typo.duckdb"))
    assert missing.returncode == 66 and "no database" in missing.stderr

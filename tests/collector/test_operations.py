"""Operations: readiness, Prometheus metrics, structured logs, export for other engines, snapshots."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import duckdb
import httpx
import pyarrow.dataset as ds
import pytest

from collector.store import Store
from collector.web.logs import JsonFormatter
from tests.collector.conftest import query
from tests.conftest import collector_cli
from tests.factories import bandwidth, layer, make_run, matmul, run_dict
from tests.servers import Collector, serve_collector


def _metric(text: str, name: str) -> float:
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name)]
    assert values, name
    return sum(values)


def test_readyz_and_metrics_count_what_happened(collector: Collector) -> None:
    assert httpx.get(f"{collector.url}/readyz").json() == {"status": "ready"}
    good = run_dict([matmul(64, "fp32", 1.0), matmul(128, "fp32", 2.0)])
    httpx.post(f"{collector.url}/api/v1/runs", content=json.dumps(good), headers=collector.auth)
    httpx.post(f"{collector.url}/api/v1/runs", content=json.dumps(good), headers=collector.auth)
    httpx.post(f"{collector.url}/api/v1/runs", content=b"{}", headers=collector.auth)
    httpx.post(f"{collector.url}/api/v1/runs", content=json.dumps(good))
    text = httpx.get(f"{collector.url}/metrics").text
    assert _metric(text, 'flopfleet_runs_ingested_total{status="created"}') == 1
    assert _metric(text, 'flopfleet_runs_ingested_total{status="duplicate"}') == 1
    assert _metric(text, "flopfleet_results_ingested_total") == 2
    assert _metric(text, 'flopfleet_payloads_rejected_total{reason="validation_error"}') == 1
    assert _metric(text, 'flopfleet_payloads_rejected_total{reason="unauthorized"}') == 1
    assert _metric(text, 'flopfleet_http_requests_total{method="POST",route="/api/v1/runs",status="201"}') == 1
    assert _metric(text, "flopfleet_db_size_bytes") > 0
    # the duplicate stored nothing: one commit, one run (their ratio is the mean group of the writer's commits)
    assert (_metric(text, "flopfleet_commits_total"), _metric(text, "flopfleet_runs_committed_total")) == (1, 1)
    assert 'flopfleet_http_request_duration_seconds_bucket{le="0.25",method="POST",route="/api/v1/runs"}' in text


def test_logs_are_one_json_object_per_line() -> None:
    record = logging.makeLogRecord({"name": "flopfleet.collector", "levelname": "INFO", "msg": "request",
                                    "status": 201, "route": "/api/v1/runs"})  # fmt: skip
    entry = json.loads(JsonFormatter().format(record))
    assert entry["msg"] == "request" and entry["status"] == 201 and entry["level"] == "info"


def _fixture_db(path: Path) -> None:
    with Store(path) as store:
        for i in range(3):
            store.add_run(make_run([matmul(1024, "bf16", 500.0 + i), layer("bert_layer", "fwd", 8, 128, 200.0),
                                    bandwidth(1 << 20, 3000.0)], hostname=f"n{i}"))  # fmt: skip


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_export_is_readable_by_other_engines(tmp_path: Path, fmt: str) -> None:
    db, out = tmp_path / "db.duckdb", tmp_path / "export"
    _fixture_db(db)
    done = collector_cli("export", "--db", str(db), "--format", fmt, "--output", str(out))
    assert done.returncode == 0, done.stderr
    if fmt == "parquet":
        assert (out / "results" / "benchmark=matmul").is_dir()
        results = ds.dataset(out / "results", format="parquet", partitioning="hive").to_table()
        assert results.num_rows == 9
        assert sorted(set(results.column("benchmark").to_pylist())) == ["bandwidth", "layer", "matmul"]
        n = duckdb.execute(f"SELECT count(*) FROM read_parquet('{out}/runs/*.parquet')").fetchone()
    else:
        n = duckdb.execute(f"SELECT count(*) FROM read_csv('{out}/runs.csv')").fetchone()
    assert n == (3,)
    again = collector_cli("export", "--db", str(db), "--format", fmt, "--output", str(out))
    assert again.returncode == 1 and "not empty" in again.stderr


def test_snapshots_from_the_file_and_from_a_running_collector(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    _fixture_db(db)
    offline = tmp_path / "offline.duckdb"
    assert collector_cli("snapshot", "--db", str(db), "--output", str(offline)).returncode == 0
    with serve_collector(db) as served:
        httpx.post(f"{served.url}/api/v1/runs", content=json.dumps(run_dict([matmul(64, "fp32", 1.0)])),
                   headers=served.auth)  # fmt: skip
        online = tmp_path / "online.duckdb"
        done = collector_cli("snapshot", "--collector", served.url, "--token", served.token, "--output", str(online))
        assert done.returncode == 0, done.stderr
        refused = collector_cli("snapshot", "--collector", served.url, "--output", str(tmp_path / "x.duckdb"))
        assert refused.returncode == 1 and "401" in refused.stderr
    for path, runs in ((offline, 3), (online, 4)):
        with Store(path, read_only=True) as copy:
            assert query(copy, "SELECT count(*) FROM runs").fetchone() == (runs,)
            assert query(copy, "SELECT count(*) FROM matmul").fetchone() == (runs,)


def test_validation_workers_are_running_before_the_first_run_arrives() -> None:
    # They used to start with the first post, which then waited for a Python process to start and import.
    import asyncio
    import multiprocessing

    from collector.web.validation import Validator

    validator = Validator(1)
    before = set(multiprocessing.active_children())
    validator.start()
    try:
        assert len(set(multiprocessing.active_children()) - before) == 1
        checked = asyncio.run(validator.check(json.dumps(run_dict([matmul(64, "fp32", 1.0)])).encode(), gzip_it=True))
        assert checked.results == 1 and checked.gzipped is not None and len(checked.sha256) == 64
    finally:
        validator.stop()

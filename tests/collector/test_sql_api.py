"""SQL over HTTP: one read-only SELECT, no file access, no configuration changes, time-limited and row-capped."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.factories import matmul, run_dict
from tests.servers import Collector, serve_collector

HOSTILE = [
    ("SELECT * FROM read_csv('/etc/passwd')", 400, "query_failed", "disabled"),
    ("SELECT * FROM read_text('/etc/hostname')", 400, "query_failed", "disabled"),
    ("SELECT * FROM '/etc/passwd'", 400, "query_failed", "does not exist"),  # no replacement scan of files
    ("SELECT * FROM glob('/*')", 400, "query_failed", "disabled"),
    ("COPY runs TO '/tmp/stolen.csv'", 400, "query_refused", "COPY"),
    ("ATTACH '/tmp/other.duckdb' AS other", 400, "query_refused", "ATTACH"),
    ("INSTALL httpfs", 400, "query_refused", "LOAD"),  # DuckDB classifies INSTALL as LOAD
    ("LOAD httpfs", 400, "query_refused", "LOAD"),
    ("SET enable_external_access = true", 400, "query_refused", "SET"),
    ("PRAGMA database_list", 400, "query_refused", "PRAGMA"),
    ("CALL pragma_version()", 400, "query_refused", "CALL"),
    ("SELECT 1; DROP TABLE runs", 400, "query_refused", "exactly one statement"),
    ("DROP TABLE runs", 400, "query_refused", "DROP"),
    ("DELETE FROM runs", 400, "query_refused", "DELETE"),
    ("CREATE TABLE x AS SELECT 1", 400, "query_refused", "CREATE"),
    ("EXPORT DATABASE '/tmp/x'", 400, "query_refused", "EXPORT"),
    ("CHECKPOINT", 400, "query_refused", "CALL"),
    ("/* hi */ SELECT 1 /* ; DROP TABLE runs */", 200, None, None),
    ("SELEC 1", 400, "query_failed", "parse"),
    ("", 422, "validation_error", "sql"),
]


@pytest.mark.parametrize(("sql", "status", "code", "words"), HOSTILE)
def test_hostile_sql_is_refused_with_a_clear_message(collector: Collector, sql: str, status: int, code: str | None,
                                                     words: str | None) -> None:  # fmt: skip
    answer = httpx.post(f"{collector.url}/api/v1/sql", json={"sql": sql})
    assert answer.status_code == status, answer.text
    if code is not None:
        error = answer.json()["error"]
        assert error["code"] == code
        assert words is not None and words in error["message"]
    assert httpx.get(f"{collector.url}/api/v1/sql", params={"sql": "SELECT count(*) FROM runs"}).status_code == 200


def test_a_query_that_runs_forever_is_stopped(tmp_path: Path) -> None:
    with serve_collector(tmp_path / "db.duckdb", sql_timeout_s=0.5) as served:
        forever = "SELECT count(*) FROM range(1000000000000) a, range(9) b"
        answer = httpx.post(f"{served.url}/api/v1/sql", json={"sql": forever}, timeout=30)
        assert answer.status_code == 400
        assert answer.json()["error"]["code"] == "query_timeout"
        assert "0.5 s" in answer.json()["error"]["message"]
        assert httpx.get(f"{served.url}/readyz").status_code == 200


def test_a_huge_result_is_cut_off_and_says_so(tmp_path: Path) -> None:
    with serve_collector(tmp_path / "db.duckdb", sql_max_rows=1000) as served:
        answer = httpx.post(
            f"{served.url}/api/v1/sql", json={"sql": "SELECT * FROM range(10000000)", "max_rows": 10**6}
        )
        body = answer.json()
        assert answer.status_code == 200
        assert (body["row_count"], body["truncated"]) == (1000, True)
        assert answer.headers["x-truncated"] == "true"


def test_views_answer_as_json_and_csv(collector: Collector) -> None:
    httpx.post(f"{collector.url}/api/v1/runs", content=json.dumps(run_dict([matmul(2048, "bf16", 600.0)])),
               headers=collector.auth)  # fmt: skip
    sql = "SELECT card, dtype, n, tflops FROM matmul"
    as_json = httpx.post(f"{collector.url}/api/v1/sql", json={"sql": sql}).json()
    assert as_json["columns"] == ["card", "dtype", "n", "tflops"]
    assert as_json["rows"] == [["NVIDIA H100 80GB HBM3 80 GiB · 700 W", "bf16", 2048, 600.0]]
    as_csv = httpx.get(f"{collector.url}/api/v1/sql", params={"sql": sql, "format": "csv"})
    assert as_csv.headers["content-type"].startswith("text/csv")
    assert as_csv.text.splitlines() == ["card,dtype,n,tflops", "NVIDIA H100 80GB HBM3 80 GiB · 700 W,bf16,2048,600.0"]

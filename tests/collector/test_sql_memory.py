"""A reader's query is bounded in memory as it is in time and rows: past its share (``sql_memory_limit``) it is
stopped with ``query_too_large`` while agents' runs go on being stored beside it, over HTTP and from the CLI; a value
of any size made in one step (``repeat``) is refused before it runs; the CLI asks a running collector instead of
failing on its locked file."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from collector.store import Store
from collector.store.sqlguard import QueryTooLarge
from collector.web.tokens import TokenStore
from tests.conftest import HANG_GUARD_S, collector_cli
from tests.factories import make_run, matmul
from tests.servers import CollectorProcess

#: The share the served collector gives one query; the query below would take gigabytes without it.
LIMIT_MB = 256
#: A DISTINCT over 100 million generated values: several GB and minutes on one thread if it were let run.
HUGE = "SELECT count(*) FROM (SELECT DISTINCT md5(range::VARCHAR) FROM range(100000000))"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[CollectorProcess, str]]:
    """A collector process whose queries may take LIMIT_MB each and (so that memory, not time, stops them) 10 min."""
    db = tmp_path_factory.mktemp("memory") / "db.duckdb"
    token = TokenStore(db).create("agent", ("write", "read"))
    env = {"FLOPFLEET_SQL_TIMEOUT_S": "600", "FLOPFLEET_SQL_MEMORY_LIMIT": f"{LIMIT_MB}MB"}
    server = CollectorProcess(db, env=env)
    try:
        yield server, token
    finally:
        server.stop()


def _memory_mb(pid: int, field: str) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split(f"{field}:")[1].split()[0]) / 1024


def test_a_query_past_its_share_is_stopped_while_runs_are_stored(served: tuple[CollectorProcess, str]) -> None:
    server, token = served
    posts: list[tuple[float, int]] = []  # (when answered, status)
    stop = threading.Event()

    def agent() -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {token}"}) as client:
            while not stop.is_set():
                run = make_run([matmul(64 + i, "fp32", 1.0 + i) for i in range(50)])
                answer = client.post(f"{server.url}/api/v1/runs", content=run.model_dump_json())
                posts.append((time.monotonic(), answer.status_code))
                time.sleep(0.05)

    feeding = threading.Thread(target=agent)
    feeding.start()
    try:
        while not posts:
            time.sleep(0.05)
        before = _memory_mb(server.proc.pid, "VmRSS")
        began = time.monotonic()
        answer = httpx.get(f"{server.url}/api/v1/sql", params={"sql": HUGE}, timeout=600)
        ended = time.monotonic()
        peak = _memory_mb(server.proc.pid, "VmHWM") - before
        while not any(when > ended for when, _ in posts):  # and one stored after it
            time.sleep(0.05)
    finally:
        stop.set()
        feeding.join()
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == "query_too_large"
    assert f"more than {LIMIT_MB * 10**6 / 2**20:.4g} MiB of memory" in error["message"]
    assert "sql_memory_limit" in error["message"]
    # Read every 20 ms while it runs: what it built meanwhile, and a busy machine's late reads, go past the share.
    assert peak < 4 * LIMIT_MB, f"the collector grew {peak:.0f} MB for a query limited to {LIMIT_MB} MB"
    assert {status for _, status in posts} == {201}, posts
    assert any(began < when < ended for when, _ in posts), "no run was stored while the query ran"
    stored = httpx.get(f"{server.url}/api/v1/sql", params={"sql": "SELECT count(*) FROM runs"}).json()["rows"]
    assert stored == [[len(posts)]]


@pytest.mark.parametrize(
    "sql", ["SELECT repeat('x', 1000000000) FROM range(2048)", "SELECT lpad('', 10, 'x')", "SELECT unnest(range(10))",
            "SELECT list_resize([1], 1000000000)", "SELECT 'x'.rpad(5, 'y')"],
)  # fmt: skip
def test_a_value_of_any_size_in_one_step_is_refused(served: tuple[CollectorProcess, str], sql: str) -> None:
    server, _ = served
    answer = httpx.post(f"{server.url}/api/v1/sql", json={"sql": sql})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "query_refused" and "a value of any size in one step" in error["message"], error


def test_range_and_generate_series_as_tables_are_still_readers(served: tuple[CollectorProcess, str]) -> None:
    server, _ = served
    sql = "SELECT count(*), sum(x) FROM range(1000) t(x), generate_series(1, 3)"
    assert httpx.post(f"{server.url}/api/v1/sql", json={"sql": sql}).json()["rows"] == [[3000, 1498500]]


def test_the_sql_command_asks_a_running_collector_and_says_so_when_the_file_is_held(
    served: tuple[CollectorProcess, str],
) -> None:
    server, token = served
    held = collector_cli("sql", "--db", str(server.db), "SELECT 1")
    assert held.returncode == 75, held.stderr
    assert "--collector URL" in held.stderr
    asked = collector_cli("sql", "--collector", server.url, "--token", token, "--format", "csv",
                          "SELECT 7 AS answer, 'x' AS word")  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout.splitlines() == ["answer,word", "7,x"]
    table = collector_cli("sql", "--collector", server.url, "SELECT 0.004205383872380331::DOUBLE AS share")
    assert " 0.00421 " in table.stdout and "0.0042053" not in table.stdout  # a table for people: as pages write it
    refused = collector_cli("sql", "--collector", server.url, HUGE)
    assert refused.returncode == 1
    assert "the collector answered 400: the query took more than" in refused.stderr


def test_the_sql_command_has_the_servers_memory_share(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    Store(db).close()
    env = {**os.environ, "FLOPFLEET_SQL_MEMORY_LIMIT": f"{LIMIT_MB}MB", "FLOPFLEET_SQL_TIMEOUT_S": "600"}
    done = subprocess.run([sys.executable, "-m", "collector", "sql", "--db", str(db), HUGE], capture_output=True,
                          text=True, env=env, timeout=HANG_GUARD_S)  # fmt: skip
    assert done.returncode == 1
    assert "error: the query took more than" in done.stderr and "sql_memory_limit" in done.stderr


def test_a_scan_of_a_large_table_is_not_counted_as_taken(tmp_path: Path) -> None:
    """Reading a table caches its blocks (memory DuckDB evicts by itself): a streaming aggregate over it takes
    nothing of its own, and is answered under a share smaller than those blocks; a DISTINCT over it is stopped."""
    import duckdb

    db = tmp_path / "db.duckdb"
    with duckdb.connect(str(db)) as con:  # written, checkpointed and closed: no block of it in memory
        con.execute(
            "CREATE TABLE wide AS SELECT range AS a, random() AS b, md5(range::VARCHAR) AS s FROM range(6000000)"
        )
    share = 64 * 10**6
    with Store(db, threads=1) as store:
        scanned = store.sql("SELECT sum(a), count(b), max(s) FROM wide", timeout_s=600, max_memory=share)
        assert scanned.rows[0][:2] == (17999997000000, 6000000)
        cached = store.connection().execute("SELECT memory_usage_bytes FROM duckdb_memory() WHERE tag = 'BASE_TABLE'")
        assert cached.fetchall()[0][0] > share  # its blocks, cached: more than the share, not the query's to keep
        with pytest.raises(QueryTooLarge):
            store.sql("SELECT count(*) FROM (SELECT DISTINCT s FROM wide)", timeout_s=600, max_memory=share)

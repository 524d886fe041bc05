"""A stopped query is an error: a statement interrupted at its time limit (or cancelled) answers ``query_timeout``,
never 200 with whatever rows it had, whenever the interrupt lands. Under a real competing load: every core busy."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import httpx
import pytest

from collector.store.core import Store
from collector.store.sqlguard import FETCH_ROWS, QueryStop, QueryTimeout, run_query
from tests.conftest import ROOT
from tests.servers import serve_collector

#: The issue's query: answered 200 once, after 9.1 s of a 10 s limit, in a loaded run.
FOREVER = "SELECT count(*) FROM range(100000000000)"
#: A thousand rows at once, then one row in a hundred billion: the fetch of the rows after the first thousand waits
#: inside DuckDB for minutes, so an interrupt lands while the answer's rows are being fetched, with rows in hand.
FAST_THEN_SLOW = "SELECT i FROM range(10000000000000) t(i) WHERE i < 1000 OR i % 100000000000 = 0"
IN_HAND = 1000 // FETCH_ROWS * FETCH_ROWS  # whole batches fetched before the fetch that waits


@pytest.fixture
def load() -> Iterator[None]:
    """A process spinning on each core while the test runs (the load of a busy test run, or of a busy server)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def _timed_out(answer: httpx.Response) -> str:
    assert answer.status_code == 400, answer.text[:300]
    error = answer.json()["error"]
    assert error["code"] == "query_timeout", error
    return str(error["message"])


@pytest.mark.usefixtures("load")
def test_the_issues_query_is_stopped_under_load_every_time(tmp_path: Path) -> None:
    with serve_collector(tmp_path / "db.duckdb", sql_timeout_s=0.5) as served:
        for _ in range(3):
            message = _timed_out(httpx.post(f"{served.url}/api/v1/sql", json={"sql": FOREVER}, timeout=120))
            assert "time limit of 0.5 s" in message
        _timed_out(httpx.get(f"{served.url}/api/v1/sql", params={"sql": FOREVER, "format": "csv"}, timeout=120))
        assert httpx.get(f"{served.url}/api/v1/sql", params={"sql": "SELECT 42"}).json()["rows"] == [[42]]


@pytest.mark.usefixtures("load")
def test_an_interrupt_while_rows_are_fetched_answers_none_of_them(tmp_path: Path) -> None:
    with serve_collector(tmp_path / "db.duckdb", sql_timeout_s=1.0, sql_max_rows=10**6) as served:
        for fmt in ("json", "csv"):
            answer = httpx.post(f"{served.url}/api/v1/sql", json={"sql": FAST_THEN_SLOW, "format": fmt}, timeout=120)
            assert _timed_out(answer).endswith(f"and was stopped after {IN_HAND:,} rows")


@pytest.mark.usefixtures("load")
def test_answers_that_race_their_time_limit_are_whole_or_refused(tmp_path: Path) -> None:
    """Queries of 1,000 to 512,000 rows against a limit that some of them pass while fetching: each answer is all of
    its rows or ``query_timeout``."""
    seen = set()
    with serve_collector(tmp_path / "db.duckdb", sql_timeout_s=0.05, sql_max_rows=10**6) as served:
        for rows in [1000 * 2**k for k in range(10)] * 2:
            answer = httpx.post(f"{served.url}/api/v1/sql", json={"sql": f"SELECT i FROM range({rows}) t(i)"},
                                timeout=120)  # fmt: skip
            if answer.status_code == 200:
                body = answer.json()
                assert (body["row_count"], body["truncated"], body["rows"][-1]) == (rows, False, [rows - 1])
            else:
                _timed_out(answer)
            seen.add(answer.status_code)
    assert 400 in seen  # the limit was reached at least once (no machine converts 512,000 rows in 0.05 s)


@contextlib.contextmanager
def _cursor(db: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A cursor of a real database file, as the store hands one to each SQL request."""
    con = duckdb.connect(str(db), config={"threads": 1})
    try:
        yield con.cursor()
    finally:
        con.close()


@pytest.mark.usefixtures("load")
def test_a_stop_before_duckdb_begins_the_statement_still_stops_it(tmp_path: Path) -> None:
    """DuckDB forgets an interrupt that lands before it begins executing a statement (the statement then runs to its
    end, past any limit): a stopped statement is interrupted again until it has ended."""
    with _cursor(tmp_path / "db.duckdb") as cur:
        stop = QueryStop()
        assert stop.stop()  # before the statement exists
        with pytest.raises(QueryTimeout, match=r"the query was cancelled$"):
            run_query(cur, FOREVER, max_rows=10, stop=stop)
        assert run_query(cur, "SELECT 1", max_rows=10).rows == [(1,)]  # the connection is usable after


@pytest.mark.usefixtures("load")
def test_a_stop_while_rows_are_fetched_is_an_error_not_the_rows_so_far(tmp_path: Path) -> None:
    with _cursor(tmp_path / "db.duckdb") as cur:
        stop = QueryStop()
        stopper = threading.Thread(target=_stop_at, args=(stop, IN_HAND))
        stopper.start()
        with pytest.raises(QueryTimeout, match=f"cancelled after {IN_HAND:,} rows$"):
            run_query(cur, FAST_THEN_SLOW, max_rows=10**6, timeout_s=600, stop=stop)
        stopper.join()


@pytest.mark.usefixtures("load")
def test_a_closed_store_lets_go_of_its_file_once_a_watched_query_has_returned(tmp_path: Path) -> None:
    """A watcher still holding its statement's cursor after the answer kept the database open in DuckDB after the
    store closed: opening the file read-only then failed ("a different configuration than existing connections");
    once on a loaded CI machine (test_store's checkpoint test). The watcher is now joined."""
    for i in range(20):
        db = tmp_path / f"db{i}.duckdb"
        with Store(db, threads=1) as store:
            assert store.sql("SELECT 42", timeout_s=60).rows == [(42,)]
            assert not [t for t in threading.enumerate() if t.name == "flopfleet-sql-stop"]
        duckdb.connect(str(db), read_only=True).close()


def _stop_at(stop: QueryStop, rows: int, answer: list[bool] | None = None) -> None:
    """Stop once ``rows`` rows are fetched (or the statement ended), noting whether the stop came in time."""
    while stop.rows < rows and not stop.ended:
        time.sleep(0)
    took = stop.stop()
    if answer is not None:
        answer.append(took)


@pytest.mark.usefixtures("load")
def test_whenever_a_stop_lands_a_stop_that_came_in_time_is_the_answer(tmp_path: Path) -> None:
    """Stops at every point of a 20,000-row answer, the last ones after its final rows were fetched: a stop that came
    before the statement ended (``stop`` says True) is always ``query_timeout``, one that came after leaves the whole
    answer."""
    total, outcomes = 20_000, set()
    with _cursor(tmp_path / "db.duckdb") as cur:
        for at in [*range(0, total + 1, 1000), *[total] * 20]:
            stop, took = QueryStop(), []
            stopper = threading.Thread(target=_stop_at, args=(stop, at, took))
            stopper.start()
            try:
                result = run_query(cur, f"SELECT i FROM range({total}) t(i)", max_rows=10**6, stop=stop)
            except QueryTimeout:
                stopper.join()
                assert took == [True]
                outcomes.add("stopped")
            else:
                stopper.join()
                assert took == [False] and len(result.rows) == total and result.rows[-1] == (total - 1,)
                outcomes.add("whole")
    assert "stopped" in outcomes


def test_the_cli_refuses_a_stopped_query_in_one_line(tmp_path: Path) -> None:
    from collector.store import Store

    db = tmp_path / "db.duckdb"
    Store(db).close()
    env = {**os.environ, "FLOPFLEET_SQL_TIMEOUT_S": "0.5", "COLUMNS": "200"}
    forever = "SELECT count(*) FROM range(1000000000000) a, range(9) b"  # on every core: the CLI's DuckDB uses them
    done = subprocess.run([sys.executable, "-m", "collector", "sql", "--db", str(db), forever], capture_output=True,
                          text=True, env=env, timeout=120, cwd=ROOT)  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.splitlines() == ["error: the query ran past the time limit of 0.5 s and was stopped"]

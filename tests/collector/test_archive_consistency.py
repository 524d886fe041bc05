"""Every acknowledged run exactly once, at every moment: live or archived, never both, never neither, for a reader
polling the collector's SQL and the archive folder while runs arrive and batches are archived on a loaded machine,
and after a collector killed at each step of an archive batch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest

from collector.store import Store
from collector.store.retention import STEPS
from tests.collector.conftest import query
from tests.factories import bandwidth, make_run, matmul
from tests.servers import serve_collector

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime.now(timezone.utc)
#: Each run has two results and three GPU samples, so a run seen twice (or half) shows in its count.
RESULTS, SAMPLES = 2, 3
#: What an outside reader runs over the published folder (docs/operations.md): the batch is the file's name.
PUBLISHED = """SELECT run_id::VARCHAR, regexp_extract(filename, '([^/]+)[.]parquet$', 1), count(*)
               FROM read_parquet('{folder}/{table}/*/*.parquet', hive_partitioning = true, filename = true)
               GROUP BY ALL"""
#: Stops the archive at one step of its first batch, as a SIGKILL there would (a real one: nothing is cleaned up).
KILLED_AT = """
import os, signal, sys
from pathlib import Path
from typing import Any
from collector.store import Store

def observe(step: str) -> None:
    if step == sys.argv[2]:
        os.kill(os.getpid(), signal.SIGKILL)

with Store(Path(sys.argv[1]), retention_days=30) as store:
    store.archive(observe=observe)
"""


def _run(i: int, days_ago: float) -> bytes:
    samples = {"t_s": [0.0, 1.0, 2.0], "gpu_index": [0, 0, 0], "sm_clock_mhz": [1980] * 3, "mem_clock_mhz": [2619] * 3,
               "power_w": [650.0] * 3, "temperature_c": [60] * 3, "utilization_pct": [99] * 3,
               "throttle_reasons": [[], [], []]}  # fmt: skip
    run = make_run([matmul(64, "fp32", 1.0 + i), bandwidth(1 << 20, 100.0 + i)], hostname=f"h{i % 5}",
                   started=NOW - timedelta(days=days_ago, minutes=i % 50), gpu_samples=samples)  # fmt: skip
    return run.model_dump_json().encode()


def _published(folder: Path, table: str = "results") -> list[tuple[str, str, int]]:
    """What a reader of the documented path sees: (run, batch, rows) for each run of each file."""
    con = duckdb.connect()
    try:
        return con.execute(PUBLISHED.format(folder=folder, table=table)).fetchall()
    except duckdb.IOException as exc:
        if "No files found" in str(exc):
            return []
        raise
    finally:
        con.close()


def _wrong(counts: dict[str, int], expected: set[str], each: int) -> dict[str, object]:
    """What a reader saw wrong: runs it should have seen and did not, runs seen more (or less) than once."""
    return {
        "neither": sorted(expected - counts.keys()),
        "not once": sorted(r for r, n in counts.items() if n != each),
    }


def _once(counts: dict[str, int], expected: set[str], each: int) -> None:
    assert _wrong(counts, expected, each) == {"neither": [], "not once": []}
    assert counts.keys() == expected


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str], set[str]]:
    """A database of 6 runs over two days past a 30-day retention (two batches) and 2 recent ones."""
    db = tmp_path_factory.mktemp("template") / "db.duckdb"
    bodies = [_run(i, d) for i, d in enumerate([40, 40, 40, 39, 39, 39, 2, 1])]
    with Store(db) as store:
        store.add_group(bodies)
        store.refresh()
        ids = [str(r) for (r,) in query(store, "SELECT run_id::VARCHAR FROM runs ORDER BY started_at").fetchall()]
    return db, set(ids), set(ids[:6])


Read = Callable[[str], list[tuple[Any, ...]]]


def _consistent(read: Read, folder: Path, runs: set[str]) -> set[str]:
    """The collector's views hold every run once; every published file is a batch the database records, each run in
    one of them, none still live; the runs published."""
    for view, each in (("all_results", RESULTS), ("all_gpu_samples", SAMPLES)):
        _once(dict(read(f"SELECT run_id::VARCHAR, count(*) FROM {view} GROUP BY ALL")), runs, each)
    recorded = set(read("SELECT run_id::VARCHAR, batch FROM archived_runs"))
    live = {r for (r,) in read("SELECT DISTINCT run_id::VARCHAR FROM results")}
    published: set[str] = set()
    for table, each in (("results", RESULTS), ("gpu_samples", SAMPLES), ("payloads", 1)):
        files = _published(folder, table)
        assert {(r, b) for r, b, _ in files} <= recorded, f"{table}: a file no recorded batch names"
        assert sorted(r for r, _, n in files if n == each) == sorted(r for r, _, _ in files), f"{table}: not once"
        published |= {r for r, _, _ in files}
    assert not published & live
    return published


@pytest.mark.parametrize("step", STEPS)
def test_a_collector_killed_at_any_step_of_a_batch_leaves_every_run_once(
    tmp_path: Path, template: tuple[Path, set[str], set[str]], step: str
) -> None:
    source, runs, due = template
    db = tmp_path / "db.duckdb"
    shutil.copy(source, db)
    folder = tmp_path / "db.duckdb.archive"
    killed = subprocess.run([sys.executable, "-c", KILLED_AT, str(db), step], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    stray = folder / "_staging" / "results" / "day=2000-01-01" / "0123456789abcdef.parquet.partial"
    stray.parent.mkdir(parents=True, exist_ok=True)
    stray.write_bytes(b"a file a kill cut short")  # as a kill while a file was being written leaves one
    # Before any collector opens it again: a DuckDB client reading the file sees every run once in the views, and
    # the published folder only batches the database records.
    con = duckdb.connect(str(db), read_only=True)
    try:
        published = _consistent(lambda sql: con.execute(sql).fetchall(), folder, runs)
    finally:
        con.close()
    assert published <= due
    with Store(db, retention_days=30) as store:  # opening it finishes what the kill interrupted
        assert not [p for p in (folder / "_staging").rglob("*") if p.is_file()]
        read: Read = lambda sql: query(store, sql).fetchall()  # noqa: E731
        recovered = _consistent(read, folder, runs)
        archived = {r for (r,) in query(store, "SELECT run_id::VARCHAR FROM archived_runs").fetchall()}
        assert recovered == archived and published <= recovered
        assert (len(recovered) == 3) == (step.startswith("published") or step == "committed")
        store.archive()
        assert _consistent(read, folder, runs) == due
        assert query(store, "SELECT count(*), count(DISTINCT run_id) FROM archived_runs").fetchone() == (6, 6)
        assert '"run_id"' in store.run_payload(sorted(due)[0])  # its JSON, read back from its file


class _Load:
    """Agents posting runs (half of them already past retention) and recording each one acknowledged."""

    def __init__(self, url: str, auth: dict[str, str], clients: int, each: int) -> None:
        self.acked: list[str] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._post, args=(url, auth, c, each)) for c in range(clients)]

    def _post(self, url: str, auth: dict[str, str], client: int, each: int) -> None:
        with httpx.Client(base_url=url, headers=auth, timeout=60) as http:
            for i in range(each):
                n = 1000 * (client + 1) + i
                body = _run(n, 2.0 if i % 2 else 0.1)
                answer = http.post("/api/v1/runs", content=body, headers={"Content-Type": "application/json"})
                with self._lock:
                    if answer.status_code == 201:
                        self.acked.append(answer.json()["run_id"])
                    else:
                        self.errors.append(f"{answer.status_code}: {answer.text[:200]}")

    def __enter__(self) -> _Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for t in self._threads:
            t.join()

    def snapshot(self) -> set[str]:
        with self._lock:
            return set(self.acked)


@pytest.fixture
def busy_machine() -> Iterator[None]:
    """A process that keeps a core busy while the test runs, as other work on the collector's machine does."""
    with subprocess.Popen([sys.executable, "-c", "while True: pass"]) as spinner:
        try:
            yield
        finally:
            spinner.kill()


def test_a_reader_polling_during_posts_and_archiving_sees_every_run_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, busy_machine: None
) -> None:
    import collector.store.retention as retention
    import collector.store.schedule as schedule

    monkeypatch.setattr(schedule, "ARCHIVE_FIRST_S", 0.2)
    # A pass that finds nothing due (the posts' old runs not yet in) would otherwise wait 600 s for the next.
    monkeypatch.setattr(schedule, "ARCHIVE_EVERY_S", 0.5)
    monkeypatch.setattr(retention, "BATCH_RUNS", 3)
    db = tmp_path / "db.duckdb"
    with Store(db) as store:
        store.add_group([_run(i, 3.0) for i in range(30)])
        store.refresh()
        stored = {str(r) for (r,) in query(store, "SELECT run_id::VARCHAR FROM runs").fetchall()}
    folder = tmp_path / "db.duckdb.archive"
    problems: list[str] = []
    archived_seen: set[int] = set()
    stop = threading.Event()
    with serve_collector(db, retention_days=1) as collector:
        http = httpx.Client(base_url=collector.url, headers=collector.auth, timeout=60)

        def sql(text: str) -> list[list[Any]]:
            answer = http.post("/api/v1/sql", json={"sql": text})
            if answer.status_code != 200:
                raise AssertionError(f"{answer.status_code}: {answer.text}")
            return answer.json()["rows"]  # type: ignore[no-any-return]

        def polling(poll: Callable[[], None]) -> Callable[[], None]:
            def loop() -> None:
                try:
                    while not stop.is_set():
                        poll()
                except Exception as exc:  # the test fails on it, in its own thread
                    problems.append(repr(exc))

            return loop

        def poll_sql() -> None:  # through the collector: live and archived rows in one snapshot
            expected = stored | load.snapshot()  # acknowledged before the query was sent
            rows = sql("SELECT run_id::VARCHAR, count(*), (SELECT count(*) FROM archived_runs) FROM all_results "
                       "GROUP BY ALL")  # fmt: skip
            archived_seen.update(a for _, _, a in rows)
            if (wrong := _wrong({r: n for r, n, _ in rows}, expected, RESULTS)) != {"neither": [], "not once": []}:
                problems.append(f"all_results: {wrong}")

        published_before: dict[str, str] = {}

        def poll_folder() -> None:  # from outside: the documented path, then what the collector has recorded
            files = _published(folder)
            recorded = {(r, b) for r, b in sql("SELECT run_id::VARCHAR, batch FROM archived_runs")}
            now = {r: b for r, b, _ in files}
            if len(now) != len(files) or any(n != RESULTS for _, _, n in files):
                problems.append(f"published: a run in two files or cut: {files}")
            if not set(now.items()) <= recorded:
                problems.append(f"published before its commit: {set(now.items()) - recorded}")
            if any(now.get(r) != b for r, b in published_before.items()):
                problems.append("a published file went away")
            published_before.clear()
            published_before.update(now)

        pollers = [threading.Thread(target=polling(poll_sql)), threading.Thread(target=polling(poll_folder))]
        with _Load(collector.url, collector.auth, clients=3, each=12) as load:
            for t in pollers:
                t.start()
        due = 30 + len(load.acked) // 2
        deadline = time.monotonic() + 600  # a hang guard: a loaded machine archives slowly, not never
        while sql("SELECT count(*) FROM archived_runs") != [[due]] or len(_published(folder)) != due:
            assert time.monotonic() < deadline, f"the due runs were never all archived and published: {problems[:3]}"
            time.sleep(0.1)
        stop.set()
        for t in pollers:
            t.join()
        final = dict(sql("SELECT run_id::VARCHAR, count(*) FROM all_results GROUP BY ALL"))
        http.close()
    assert load.errors == [] and len(load.acked) == 36
    assert problems == []
    _once(final, stored | set(load.acked), RESULTS)
    # The check means something only if polls landed while runs were being archived: at least one saw a count
    # between none and all (a quiet machine sees many; a loaded 2-core one, where each poll waits, saw two).
    assert archived_seen - {0, due}, f"the polls never landed mid-archive: {sorted(archived_seen)}"

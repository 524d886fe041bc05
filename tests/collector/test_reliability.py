"""Many agents at once, and a collector killed mid-load: every acknowledged run stored exactly once, never half."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from agent.run.config import UploadConfig
from agent.run.upload import post
from collector.store import Store
from collector.web.tokens import TokenStore
from schemas import RunSubmission
from schemas.contract import Version
from tests.collector.conftest import query
from tests.factories import make_run, matmul
from tests.servers import CollectorProcess, serve_collector

CLIENTS = 16
RUNS_EACH = 20
RESULTS = 12


def _runs() -> list[list[RunSubmission]]:
    return [
        [make_run([matmul(64 * (i + 1), "fp32", float(c * 1000 + r + 1)) for i in range(RESULTS)], hostname=f"c{c}")
         for r in range(RUNS_EACH)]
        for c in range(CLIENTS)
    ]  # fmt: skip


def _agents(
    url: str, token: str, runs: list[list[RunSubmission]], acked: list[str], errors: list[str], retries: int = 14
) -> list[threading.Thread]:
    config = UploadConfig(collector_url=url, token=token, retries=retries, timeout_s=30)
    lock = threading.Lock()

    def agent(mine: list[RunSubmission]) -> None:
        with httpx.Client() as client:
            for run in mine:
                version = Version(run.schema_version, run.schema_minor)
                try:
                    sent = post(client, config, run.model_dump_json().encode(), run.run_id, version)
                except Exception as exc:  # said, not lost with the thread: the test would wait out its deadline
                    sent = None
                    why = f"{type(exc).__name__}: {exc}"
                with lock:
                    if sent is not None and sent.receipt is not None:
                        acked.append(str(run.run_id))
                    else:
                        errors.append(sent.why if sent is not None else why)
                if sent is None:
                    return

    return [threading.Thread(target=agent, args=(mine,)) for mine in runs]


def _check_stored(db: Path, runs: list[list[RunSubmission]], acked: list[str]) -> None:
    expected = {str(r.run_id) for mine in runs for r in mine}
    assert sorted(acked) == sorted(expected)  # every run acknowledged, once each
    with Store(db, read_only=True) as store:
        stored = dict(query(store, "SELECT run_id::VARCHAR, count(*) FROM results GROUP BY run_id").fetchall())
        assert query(store, "SELECT count(*), count(DISTINCT run_id) FROM runs").fetchone() == (len(expected),) * 2
        # every run has its figures (computed just after commits, or at the restart after a kill), each once
        assert query(store, "SELECT count(DISTINCT run_id) FROM figures").fetchone() == (len(expected),)
        twice = "SELECT count(*) FROM (SELECT run_id, gpu_index, figure FROM figures GROUP BY ALL HAVING count(*) > 1)"
        assert query(store, twice).fetchone() == (0,)
    assert set(stored) == expected
    assert set(stored.values()) == {RESULTS}  # no run stored in part


def test_sixteen_agents_posting_hundreds_of_runs(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    token = TokenStore(db).create("fleet")
    runs, acked, errors = _runs(), [], []
    server = CollectorProcess(db)
    try:
        threads = _agents(server.url, token, runs, acked, errors)
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        server.stop()
    assert errors == []
    _check_stored(db, runs, acked)


def _children(pid: int) -> dict[int, str]:
    """A process's children (Linux /proc) and their command lines."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found[int(child)] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return found


def _alive(pid: int) -> bool:
    """Running or sleeping: neither gone nor a zombie waiting for init to reap it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_collector_killed_mid_load_loses_nothing_and_leaves_no_process(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    token = TokenStore(db).create("fleet")
    runs, acked, errors = _runs(), [], []
    server = CollectorProcess(db, env={"FLOPFLEET_VALIDATE_WORKERS": "2"})
    children = _children(server.proc.pid)
    assert sum("resource_tracker" in c for c in children.values()) == 1, children
    assert sum("spawn_main" in c for c in children.values()) == 2, children  # the validation workers
    threads = _agents(server.url, token, runs, acked, errors)
    for t in threads:
        t.start()
    deadline = time.monotonic() + 600
    while len(acked) < CLIENTS * RUNS_EACH // 3:
        assert time.monotonic() < deadline and not errors, f"load never got going: {errors[:1]}"
        time.sleep(0.01)
    server.kill()  # SIGKILL, as the OOM killer does: the collector cannot stop its workers
    killed_at = len(acked)
    deadline = time.monotonic() + 600  # the workers see their parent gone, and the resource tracker follows them
    while (left := [pid for pid in children if _alive(pid)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], {pid: children[pid] for pid in left}
    restarted = CollectorProcess(db, port=server.port)
    try:
        for t in threads:
            t.join()
    finally:
        restarted.stop()
    assert errors == []
    assert killed_at < CLIENTS * RUNS_EACH  # the kill really happened mid-load
    _check_stored(db, runs, acked)


def test_sigterm_lets_the_request_in_flight_finish(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    token = TokenStore(db).create("fleet")
    run = make_run([matmul(64, "fp32", 1.0)])
    body = run.model_dump_json().encode()
    server = CollectorProcess(db)
    started = threading.Event()
    answer: list[httpx.Response] = []

    def slow_body() -> Iterator[bytes]:
        yield body[:100]
        started.set()
        time.sleep(1.0)  # the server is told to stop while this request is still arriving
        yield body[100:]

    def send() -> None:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        answer.append(httpx.post(f"{server.url}/api/v1/runs", content=slow_body(), headers=headers, timeout=30))

    sender = threading.Thread(target=send)
    sender.start()
    assert started.wait(10)
    server.proc.terminate()
    sender.join()
    assert server.proc.wait(timeout=30) in (0, -15)  # uvicorn re-raises SIGTERM after its graceful shutdown
    assert answer[0].status_code == 201
    with Store(db, read_only=True) as store:
        assert query(store, "SELECT run_id::VARCHAR FROM runs").fetchall() == [(str(run.run_id),)]


def test_a_validation_worker_killed_is_replaced_and_no_run_is_lost(tmp_path: Path) -> None:
    """Agents keep posting while the validation worker is SIGKILLed, twice: the runs it held are refused with 503,
    which the agents send again, and new workers take over."""
    db = tmp_path / "db.duckdb"
    runs, acked, errors = _runs()[:4], [], []
    others = {p.pid for p in multiprocessing.active_children()}
    with serve_collector(db, validate_workers=1) as collector:

        def workers() -> list[int]:  # the children this process has gained: the collector's validation workers
            return [p.pid for p in multiprocessing.active_children() if p.pid and p.pid not in others]

        first = workers()
        assert len(first) == 1
        threads = _agents(collector.url, collector.token, runs, acked, errors, retries=5)  # ~15 s of backoff
        for t in threads:
            t.start()
        killed: list[int] = []
        deadline = time.monotonic() + 600
        for _ in range(2):
            while len(acked) < 10 * (len(killed) + 1):
                assert time.monotonic() < deadline, f"ingest stopped after worker {killed} was killed: {errors[:1]}"
                time.sleep(0.01)
            (pid,) = workers() or [0]
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        for t in threads:
            t.join()
        deadline = time.monotonic() + 600
        while not (now := workers()) or now[0] in killed:
            assert time.monotonic() < deadline, "no new validation worker"
            time.sleep(0.05)
        assert len(killed) == 2 and now[0] not in killed
    assert errors == []  # the runs after the kills went through the workers started in their place
    _check_stored(db, runs, acked)

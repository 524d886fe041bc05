"""Peers that answer wrongly, slowly or endlessly, and spool folders with things in them that are not runs.

Each peer is a real socket server on 127.0.0.1 that reads the request whole and then answers as a captive portal,
a wrong server, a trickle or a flood would; the agent talks to it through its real client or its real CLI.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from agent.run.config import UploadConfig
from agent.run.spool import read_spooled, spooled, write_spool
from agent.run.upload import MAX_ANSWER_BYTES, deliver, new_client, push
from schemas import RunSubmission
from tests.conftest import ROOT, agent_cli
from tests.factories import make_run, matmul
from tests.servers import Collector

Answer = Callable[[socket.socket, threading.Event], None]


@dataclass
class Peer:
    url: str
    requests: list[bytes] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)  # answer bytes each connection got out before it ended


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lengths = [line.split(b":")[1] for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")]
    length = int(lengths[0]) if lengths else 0
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


@contextlib.contextmanager
def serve(answer: Answer) -> Iterator[Peer]:
    """A peer on a free port of 127.0.0.1 that reads each request, then lets ``answer`` write what it likes."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)
    peer = Peer(url=f"http://127.0.0.1:{listener.getsockname()[1]}")
    stop = threading.Event()

    def one(conn: socket.socket) -> None:
        with conn:
            peer.requests.append(_read_request(conn))
            with contextlib.suppress(OSError):
                answer(conn, stop)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield peer
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def fixed(status: str, body: bytes = b"", **headers: str) -> Answer:
    def answer(conn: socket.socket, _: threading.Event) -> None:
        lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", "Connection: close"]
        lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
        conn.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)

    return answer


def trickle(head: bytes, interval_s: float) -> Answer:
    """Sends ``head`` one byte every ``interval_s`` (then spaces), until the test ends (at most 600 s): never a
    per-read timeout."""

    def answer(conn: socket.socket, stop: threading.Event) -> None:
        ends = time.monotonic() + 600
        for byte in head + b" " * 10_000:
            if stop.wait(interval_s) or time.monotonic() > ends:
                return
            conn.sendall(bytes([byte]))

    return answer


def flood(peer_sent: list[int], total: int) -> Answer:
    """A 200 of ``total`` bytes of HTML, sent as fast as the reader takes it; records how much got out."""
    chunk = b"<p>portal</p>" * (1 << 16)

    def answer(conn: socket.socket, _: threading.Event) -> None:
        conn.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {total}\r\n\r\n".encode())
        sent = 0
        try:
            while sent < total:
                part = chunk[: total - sent]
                conn.sendall(part)
                sent += len(part)
        finally:
            peer_sent.append(sent)

    return answer


def _no_sleep(_: float) -> None:
    return None


def _receipt(run_id: object, status: str = "created") -> bytes:
    return json.dumps({"run_id": str(run_id), "status": status, "results": 1}).encode()


RUN = make_run([matmul(64, "fp32", 1.0)])
OTHER = uuid.UUID("00000000-0000-4000-8000-000000000001")
HTML = b"<html><body>Please accept the terms of use</body></html>"

NOT_A_RECEIPT = {
    "captive portal: HTML with 200": (
        fixed("200 OK", HTML, Content_Type="text/html"),
        f"HTTP 200 but the answer is not a flopfleet receipt (text/html, {len(HTML)} bytes)",
    ),
    "{} with 201": (
        fixed("201 Created", b"{}", Content_Type="application/json"),
        "HTTP 201 but the answer is not a flopfleet receipt (application/json, 2 bytes)",
    ),
    "204": (fixed("204 No Content"), "HTTP 204 but the answer is not a flopfleet receipt (no content type, 0 bytes)"),
    "another run's receipt": (
        fixed("200 OK", _receipt(OTHER, "duplicate"), Content_Type="application/json"),
        f"HTTP 200 but the answer names run {OTHER}, not this run",
    ),
    "a receipt with a status it never sends": (
        fixed("201 Created", _receipt(RUN.run_id, "ok"), Content_Type="application/json"),
        "HTTP 201 but the answer is not a flopfleet receipt (application/json,",
    ),
    "a gzip-encoded receipt (asked for identity)": (
        fixed("201 Created", gzip.compress(_receipt(RUN.run_id)), Content_Type="application/json",
              Content_Encoding="gzip"),
        "HTTP 201 but the answer is not a flopfleet receipt (gzip-encoded application/json,",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", NOT_A_RECEIPT)
def test_a_2xx_that_is_not_this_runs_receipt_keeps_it_spooled_and_is_not_retried(case: str, tmp_path: Path) -> None:
    answer, why = NOT_A_RECEIPT[case]
    with serve(answer) as peer, new_client() as client:
        config = UploadConfig(collector_url=peer.url, spool_dir=tmp_path / "spool", retries=3)
        delivery = deliver(RUN, config, client, sleep=_no_sleep)
        assert len(peer.requests) == 1  # a portal or a wrong URL will not answer better the second time
        (path,) = spooled(config.spool_dir)
        assert (delivery.status, delivery.path) == ("spooled", path)
        assert delivery.detail.startswith(why), delivery.detail
        assert b"accept-encoding: identity" in peer.requests[0].lower()

        (kept,) = push(config, client, sleep=_no_sleep)
    assert (kept.status, kept.detail) == ("spooled", delivery.detail)
    assert RunSubmission.model_validate_json(path.read_bytes()).run_id == RUN.run_id


def test_run_measures_nothing_and_exits_78_when_the_collector_url_is_a_captive_portal(tmp_path: Path) -> None:
    spool, out = tmp_path / "spool", tmp_path / "run.json"
    with serve(fixed("200 OK", HTML, Content_Type="text/html")) as portal:
        done = agent_cli("run", "--suite", "quick", "--device", "cpu", "--only", "matmul", "-q",
                         "--collector", portal.url, "--spool-dir", str(spool), "--output", str(out))  # fmt: skip
        assert len(portal.requests) == 1 and portal.requests[0].startswith(b"GET /api/v1/token")  # the first contact
    assert done.returncode == 78, done.stderr
    assert done.stderr.startswith(f"error: {portal.url} is not a flopfleet collector: GET /api/v1/token answered "
                                  "HTTP 200 (text/html")  # fmt: skip
    assert done.stdout == "" and not out.exists() and spooled(spool) == []  # nothing measured, nothing to retry


def test_a_good_receipt_deletes_the_spool_file_and_says_stored_or_already_stored(
    collector: Collector, tmp_path: Path
) -> None:
    spool, out = tmp_path / "spool", tmp_path / "run.json"
    auth = ("--collector", collector.url, "--token", collector.token, "--spool-dir", str(spool))
    done = agent_cli("run", "--suite", "quick", "--device", "cpu", "--only", "matmul", "-q", "--output", str(out),
                     *auth)  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = RunSubmission.model_validate_json(out.read_text())
    assert f"run {run.run_id}: stored by the collector (HTTP 201)" in done.stdout
    assert spooled(spool) == []

    write_spool(spool, run, run.model_dump_json().encode())  # as `run` spools it
    again = agent_cli("push", *auth)
    assert again.returncode == 0, again.stderr
    assert f"run {run.run_id}: already stored by the collector (HTTP 200)" in again.stdout
    assert spooled(spool) == []


def _head_then_trickle(head: bytes, interval_s: float) -> Answer:
    def answer(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(head)
        trickle(b"", interval_s)(conn, stop)

    return answer


TRICKLES = {
    "the status line never ends": trickle(b"HTTP/1.1 201 Created\r\n", 0.5),
    # A close-delimited receipt followed by a space every 0.5 s: cut at the deadline it would parse, but is late.
    "the body never ends": _head_then_trickle(
        b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" + _receipt(RUN.run_id),
        0.5,
    ),
}


@pytest.mark.parametrize("case", TRICKLES)
def test_a_trickling_peer_is_cut_off_at_the_deadline(case: str, tmp_path: Path) -> None:
    with serve(TRICKLES[case]) as peer, new_client() as client:
        config = UploadConfig(collector_url=peer.url, spool_dir=tmp_path / "spool", retries=0, timeout_s=2.0)
        started = time.monotonic()
        delivery = deliver(RUN, config, client, sleep=_no_sleep)
        took = time.monotonic() - started
    assert took < 2.0 + 30, took  # the trickle never ends: only the deadline ends the attempt
    assert (delivery.status, delivery.detail) == ("spooled", "no complete answer within the 2 s deadline")
    assert len(spooled(config.spool_dir)) == 1


def test_each_retry_gets_its_own_deadline(tmp_path: Path) -> None:
    sleeps: list[float] = []
    with serve(trickle(b"HTTP/1.1 200 OK\r\n", 0.3)) as peer, new_client() as client:
        config = UploadConfig(collector_url=peer.url, spool_dir=tmp_path / "spool", retries=1, timeout_s=1.0)
        started = time.monotonic()
        delivery = deliver(RUN, config, client, sleep=sleeps.append)
        took = time.monotonic() - started
    assert len(peer.requests) == 2 and len(sleeps) == 1
    assert 2.0 <= took < 2.0 + 30, took  # two deadlines of 1 s, not one; the trickles never end
    assert delivery.status == "spooled"


def test_5xx_is_retried_with_backoff_and_then_spooled(tmp_path: Path) -> None:
    body = json.dumps({"error": {"code": "storage_unavailable", "message": "disk full"}}).encode()
    sleeps: list[float] = []
    with serve(fixed("503 Service Unavailable", body, Content_Type="application/json")) as peer:
        config = UploadConfig(collector_url=peer.url, spool_dir=tmp_path / "spool", retries=2)
        with new_client() as client:
            delivery = deliver(RUN, config, client, sleep=sleeps.append)
    assert len(peer.requests) == 3 and len(sleeps) == 2
    assert (delivery.status, delivery.detail) == ("spooled", "HTTP 503: disk full")


def test_a_busy_collector_is_given_the_time_it_asks_for_with_jitter(tmp_path: Path) -> None:
    # 429 (its queue is full) is retried, not spooled at once as other 4xx are; Retry-After sets the wait, spread
    # by up to half again so that the agents it turned away come back apart; a 503 that asks is waited for too.
    body = json.dumps({"error": {"code": "busy", "message": "queue full"}}).encode()
    for status in ("429 Too Many Requests", "503 Service Unavailable"):
        sleeps: list[float] = []
        with serve(fixed(status, body, Content_Type="application/json", Retry_After="7")) as peer:
            config = UploadConfig(collector_url=peer.url, spool_dir=tmp_path / "spool", retries=2)
            with new_client() as client:
                delivery = deliver(RUN, config, client, sleep=sleeps.append)
        assert len(peer.requests) == 3, status
        asked = [s for s in sleeps if s >= 7.0]
        assert len(asked) == 2 and all(7.0 <= s <= 10.5 for s in asked), sleeps
        assert delivery.status == "spooled" and delivery.detail == f"HTTP {status[:3]}: queue full"
    with serve(fixed("429 Too Many Requests", body, Retry_After="86400")) as peer:
        sleeps = []
        with new_client() as client:
            deliver(RUN, UploadConfig(collector_url=peer.url, spool_dir=tmp_path / "s2", retries=1), client,
                    sleep=sleeps.append)  # fmt: skip
    assert max(sleeps) <= 120 * 1.5  # a day is not waited for


#: Runs its arguments and writes their peak RSS (KiB) to argv[1]. Linux counts a child's memory from before its
#: exec in ru_maxrss, so the agent is started from this small process, not straight from a pytest that holds torch.
_MEASURE = (
    "import pathlib, resource, subprocess, sys; code = subprocess.call(sys.argv[2:]); "
    "pathlib.Path(sys.argv[1]).write_text(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); "
    "sys.exit(code)"
)


def _agent_with_peak_rss(args: list[str], tmp_path: Path, timeout: float = 60) -> tuple[int, str, int]:
    """``python -m agent ...`` in a child process: its exit code, its output, and its peak RSS in bytes."""
    rss = tmp_path / "rss"
    command = [sys.executable, "-c", _MEASURE, str(rss), sys.executable, "-m", "agent", *args]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                            env={**os.environ, "COLUMNS": "1000"}, start_new_session=True)  # fmt: skip
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return proc.returncode, output, int(rss.read_text()) * 1024


def test_a_huge_answer_is_read_only_up_to_the_cap_in_bounded_memory(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    path = write_spool(spool, RUN, RUN.model_dump_json().encode())
    sent: list[int] = []
    total = 192 << 20
    with serve(flood(sent, total)) as peer:
        args = ["push", "--collector", peer.url, "--spool-dir", str(spool)]
        code, output, peak = _agent_with_peak_rss(args, tmp_path)
        deadline = time.monotonic() + 600
        while not sent and time.monotonic() < deadline:
            time.sleep(0.02)
    assert code == 75, output
    assert f"not a flopfleet receipt (text/html, over {MAX_ANSWER_BYTES:,} bytes)" in output
    assert peak < 128 << 20, f"peak RSS {peak >> 20} MiB"  # about 47 MiB, as an empty push; 431 MiB before
    assert sent and sent[0] < 32 << 20  # the agent hung up; the rest of the 192 MiB never left the peer
    assert spooled(spool) == [path]


MARKUP = "[/] [link=http://x]click[/link] \x1b[31mred\x1b[0m\r\x07"


def test_markup_and_escapes_in_a_collector_message_are_shown_literally(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    write_spool(spool, RUN, RUN.model_dump_json().encode())
    body = json.dumps({"error": {"code": "validation_error", "message": MARKUP}}).encode()
    with serve(fixed("422 Unprocessable Entity", body, Content_Type="application/json")) as peer:
        done = agent_cli("push", "--collector", peer.url, "--spool-dir", str(spool), env={"COLUMNS": "1000"})
    output = done.stdout + done.stderr
    assert done.returncode == 75, output
    assert "MarkupError" not in output and "Traceback" not in output
    assert "\x1b" not in output and "\x07" not in output and "\r" not in output
    assert "HTTP 422: [/] [link=http://x]click[/link] \\e[31mred\\e[0m\\r\\x07; kept at" in done.stderr


def test_an_error_message_is_printed_literally() -> None:
    done = agent_cli("run", "--device", "cpu", "--tag", "[/][link=http://x]\x1b[31m=x", "-q", env={"COLUMNS": "1000"})
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "\x1b" not in done.stderr
    assert "error: --tag '[/][link=http://x]\\x1b[31m=x' is not key=value" in done.stderr


def test_push_skips_a_fifo_and_a_symlink_and_sends_the_good_runs(collector: Collector, tmp_path: Path) -> None:
    spool, elsewhere = tmp_path / "spool", tmp_path / "elsewhere"
    elsewhere.mkdir()
    good = [make_run([matmul(64, "fp32", 1.0)]) for _ in range(2)]
    secret = make_run([matmul(64, "fp32", 2.0)])
    paths = [write_spool(spool, run, run.model_dump_json().encode()) for run in good]
    os.mkfifo(spool / "0-fifo.json")  # sorted first: an agent that opens it blocking never gets further
    (elsewhere / "secret.json").write_text(secret.model_dump_json())
    (spool / "1-link.json").symlink_to(elsewhere / "secret.json")
    (spool / "2-folder.json").mkdir()

    done = agent_cli("push", "--collector", collector.url, "--token", collector.token, "--spool-dir", str(spool),
                     env={"COLUMNS": "1000"}, timeout=300)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{spool / '0-fifo.json'}: skipped, left alone: not a regular file (FIFO)" in done.stderr
    assert f"{spool / '1-link.json'}: skipped, left alone: a symbolic link: not followed" in done.stderr
    assert f"{spool / '2-folder.json'}: skipped, left alone: not a regular file (directory)" in done.stderr
    listed = httpx.get(f"{collector.url}/api/v1/runs", headers=collector.auth).json()
    assert sorted(r["run_id"] for r in listed["data"]) == sorted(str(run.run_id) for run in good)
    assert not any(p.exists() for p in paths)
    assert (spool / "0-fifo.json").is_fifo() and (spool / "1-link.json").is_symlink()
    assert (elsewhere / "secret.json").read_text() == secret.model_dump_json()


def test_a_spool_file_is_checked_on_the_open_file_and_size_capped(tmp_path: Path) -> None:
    from agent.errors import NotARegularFile, SpoolError

    os.mkfifo(tmp_path / "fifo.json")
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    (tmp_path / "real.json").write_bytes(b"{}")
    with open(tmp_path / "sparse.json", "wb") as sparse:
        sparse.truncate(300 << 20)  # no disk used, but larger than a run can be
    started = time.monotonic()
    with pytest.raises(NotARegularFile, match=r"not a regular file \(FIFO\)"):
        read_spooled(tmp_path / "fifo.json")
    assert time.monotonic() - started < 30  # refused, not blocked on a FIFO no one writes
    with pytest.raises(NotARegularFile, match="a symbolic link: not followed"):
        read_spooled(tmp_path / "link.json")
    with pytest.raises(SpoolError, match="larger than a run can be"):
        read_spooled(tmp_path / "sparse.json")
    assert read_spooled(tmp_path / "real.json") == b"{}"

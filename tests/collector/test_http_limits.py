"""HTTP limits before any auth, against ``flopfleet-collector serve`` in its own process with real sockets: huge
headers, half-sent requests, trickled bodies, more stalled sockets than the process may open files."""

from __future__ import annotations

import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from collector.web.http_limits import FD_RESERVE
from tests.servers import CollectorProcess

LIMITS = {"FLOPFLEET_HEADER_TIMEOUT_S": "1.5", "FLOPFLEET_BODY_TIMEOUT_S": "1.5", "FLOPFLEET_IDLE_TIMEOUT_S": "1"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[CollectorProcess]:
    server = CollectorProcess(tmp_path / "db.duckdb", env=LIMITS)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def opened() -> Iterator[list[socket.socket]]:
    """Sockets a test opens, closed at its end whatever happens."""
    socks: list[socket.socket] = []
    yield socks
    for sock in socks:
        sock.close()


def _rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split("VmRSS:")[1].split()[0]) / 1024


def _connect(port: int, opened: list[socket.socket]) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    opened.append(sock)
    return sock


def _answer(sock: socket.socket) -> bytes:
    """What the server sent before closing (b'' when it closed, or reset, without answering)."""
    chunks = []
    try:
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    except (ConnectionResetError, TimeoutError):
        pass
    return b"".join(chunks)


def _refusals(url: str) -> dict[str, float]:
    """The refusals /metrics counts, by status."""
    counts: dict[str, float] = {}
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith("flopfleet_http_requests_total{") and "(refused" in line:
            status = line.split('status="')[1].split('"')[0]
            counts[status] = counts.get(status, 0) + float(line.rsplit(" ", 1)[1])
    return counts


def test_headers_of_tens_of_kib_get_431_and_megabytes_cost_no_memory(
    served: CollectorProcess, opened: list[socket.socket]
) -> None:
    answer = httpx.get(f"{served.url}/api/v1/runs", headers={"X-Big": "a" * 20_000})
    assert answer.status_code == 431
    assert answer.json()["error"]["code"] == "headers_too_large"
    assert httpx.get(f"{served.url}/api/v1/runs", headers={"X-Fine": "a" * 8_000}).status_code == 200

    before = _rss_mb(served.proc.pid)
    for _ in range(8):  # unfinished 64 MiB headers, as the issue sent them: the server stops reading each at once
        sock = _connect(served.port, opened)
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Huge: ")
        sent = 0
        try:
            while sent < 64 << 20:
                sock.sendall(b"a" * (1 << 20))
                sent += 1 << 20
        except OSError:  # the collector answered 431 and closed: the rest cannot be sent
            pass
        assert sent < 64 << 20
    grown = _rss_mb(served.proc.pid) - before
    for sock in opened:  # the 431, or a reset where the server closed on bytes it never read
        assert _answer(sock)[:12] in (b"HTTP/1.1 431", b"")
    assert grown < 50, f"eight 64 MiB headers grew the collector by {grown:.0f} MB"
    assert httpx.get(f"{served.url}/healthz").status_code == 200
    assert _refusals(served.url).get("431", 0) >= 9


def test_half_sent_requests_are_answered_408_and_closed(served: CollectorProcess, opened: list[socket.socket]) -> None:
    half = []
    for _ in range(40):
        sock = _connect(served.port, opened)
        sock.sendall(b"GET /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never the blank line
        half.append(sock)
    silent = _connect(served.port, opened)  # connects and says nothing at all
    began = time.monotonic()
    answers = [_answer(sock) for sock in half]
    assert _answer(silent) == b""
    assert time.monotonic() - began < 60  # the header deadline, not the sockets' own timeouts
    assert all(a.startswith(b"HTTP/1.1 408") for a in answers), answers[0]
    assert b"headers took over 1.5 s" in answers[0]
    assert b"x-content-type-options: nosniff" in answers[0]

    # a body that trickles in is cut at its deadline too (the SQL endpoint reads its body before answering)
    sock = _connect(served.port, opened)
    head = b"POST /api/v1/sql HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000"
    sock.sendall(head + b"\r\n\r\n{")
    for _ in range(150):  # a byte every 0.2 s for 30 s, unless the server closes first
        try:
            sock.sendall(b" ")
        except OSError:
            break
        time.sleep(0.2)
    else:
        pytest.fail("a trickle of header bytes kept the connection open for 30 s")
    assert _answer(sock).startswith(b"HTTP/1.1 408")
    assert _refusals(served.url).get("408", 0) >= 41


def test_kept_alive_connections_are_closed_when_idle(served: CollectorProcess, opened: list[socket.socket]) -> None:
    sock = _connect(served.port, opened)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    first = b""
    while not first.endswith(b'{"status":"ok"}'):
        first += sock.recv(65536)
    assert first.startswith(b"HTTP/1.1 200")
    began = time.monotonic()
    assert _answer(sock) == b""  # closed by the server after the idle timeout
    assert time.monotonic() - began < 30  # the idle timeout, not the socket's own


def _open_files(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def test_more_stalled_sockets_than_open_files_leave_healthz_answering(
    tmp_path: Path, opened: list[socket.socket]
) -> None:
    limit = 200  # as the issue tried it: 200 stalled sockets made every /healthz fail
    env = {**LIMITS, "FLOPFLEET_HEADER_TIMEOUT_S": "30"}  # the stalls outlast the test: only the cap can help
    server = CollectorProcess(tmp_path / "db.duckdb", env=env, preexec=lambda: _open_files(limit))
    try:
        for _ in range(250):
            _connect(server.port, opened).sendall(b"GET /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        time.sleep(0.5)
        for _ in range(20):
            assert httpx.get(f"{server.url}/healthz", timeout=5).status_code == 200
        answer = httpx.get(f"{server.url}/api/v1/runs", timeout=5)
        assert answer.status_code == 200
        fds = len(list(Path(f"/proc/{server.proc.pid}/fd").iterdir()))
        assert fds <= limit - FD_RESERVE + 40, fds  # the connections stay under the cap, with room for the rest
        shed = [line for line in httpx.get(f"{server.url}/metrics").text.splitlines()
                if line.startswith("flopfleet_http_connections_shed_total")]  # fmt: skip
        assert float(shed[0].split()[-1]) >= 250 - (limit - FD_RESERVE)
    finally:
        server.stop()


def test_without_httptools_the_collector_still_serves_and_caps_headers(tmp_path: Path) -> None:
    shadow = tmp_path / "shadow"  # a Python path on which httptools cannot be imported, as on a bare host
    (shadow / "httptools").mkdir(parents=True)
    (shadow / "httptools" / "__init__.py").write_text("raise ImportError('httptools is not installed here')\n")
    server = CollectorProcess(tmp_path / "db.duckdb", env={"PYTHONPATH": str(shadow)})
    try:
        assert httpx.get(f"{server.url}/healthz").status_code == 200
        # h11 caps what is still incomplete at a read (uvicorn answers 400, or resets on the unread rest)
        try:
            status: int | None = httpx.get(f"{server.url}/healthz", headers={"X-Big": "a" * (1 << 20)}).status_code
        except httpx.TransportError:
            status = None
        assert status in (400, None)
        assert "httptools is not installed" in server.log.read_text()
    finally:
        server.stop()


def test_a_body_still_trickling_after_an_early_answer_is_cut_at_its_deadline(
    served: CollectorProcess, opened: list[socket.socket]
) -> None:
    sock = _connect(served.port, opened)  # no token: answered 401 before the body is read
    sock.sendall(b"POST /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\n{")
    for _ in range(150):  # a byte every 0.2 s for 30 s, unless the server closes first
        try:
            sock.sendall(b" ")
        except OSError:
            break
        time.sleep(0.2)
    else:
        pytest.fail("closed at the 1.5 s body deadline, not kept open by the trickle: it was kept open for 30 s")

"""What hostile clients and a failing disk cost the collector: memory for huge headers, /healthz under more stalled
sockets than open files, memory for an SQL answer of huge values, time to answer and to recover while the disk
refuses writes. Prints figures; run on demand:

    .venv/bin/python benchmarks/collector_limits.py
    .venv/bin/python benchmarks/collector_limits.py --skip storage      # e.g. on a collector without that part

It starts ``python -m collector serve`` itself, with only flags every version has, so the same script measures an
older commit checked out in another worktree (copy the script in) side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import httpx

ROOT = Path.cwd()


def _status(pid: int, field: str) -> float:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(text.split(f"{field}:")[1].split()[0]) / 1024


@contextmanager
def collector(db: Path, preexec: Callable[[], None] | None = None, env: dict[str, str] | None = None) -> Iterator[
        tuple[subprocess.Popen[bytes], str]]:  # fmt: skip
    port_file = db.with_name("port")
    proc = subprocess.Popen(
        [sys.executable, "-m", "collector", "serve", "--db", str(db), "--port", "0", "--port-file", str(port_file),
         "--log-level", "error"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=preexec,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text()):
            assert proc.poll() is None and time.monotonic() < deadline, "the collector did not start"
            time.sleep(0.05)
        url = f"http://127.0.0.1:{port_file.read_text()}"
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the collector never became ready"
            time.sleep(0.05)
        yield proc, url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        port_file.unlink(missing_ok=True)


def headers(folder: Path) -> None:
    with collector(folder / "h.duckdb") as (proc, url):
        port = int(url.rsplit(":", 1)[1])
        for size_mib in (1, 16):
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            began = time.perf_counter()
            try:
                head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
                sock.sendall(head + b"a" * (size_mib << 20) + b"\r\n\r\n")
                answer = sock.recv(200).split(b"\r\n", 1)[0].decode()
            except OSError as exc:
                answer = f"connection closed while sending ({type(exc).__name__})"
            print(f"headers: one complete {size_mib} MiB header: {answer!r} after {time.perf_counter() - began:.2f} s")
            sock.close()
        before = _status(proc.pid, "VmRSS")
        socks, accepted = [], []
        began = time.perf_counter()
        for _ in range(8):
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Huge: ")
            sent = 0
            try:
                while sent < 64 << 20:
                    sock.sendall(b"a" * (1 << 20))
                    sent += 1 << 20
            except OSError:
                pass
            accepted.append(sent >> 20)
            socks.append(sock)
        grown = _status(proc.pid, "VmRSS") - before
        print(
            f"headers: 8 unfinished 64 MiB headers: collector RSS {grown:+.0f} MB, MiB sent before the server "
            f"closed each: {accepted}, {time.perf_counter() - began:.1f} s"
        )
        for sock in socks:
            sock.close()


def _limit_files(limit: int) -> Callable[[], None]:
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))


def stalled(folder: Path, limit: int = 200, sockets: int = 250) -> None:
    with collector(folder / "s.duckdb", preexec=_limit_files(limit)) as (proc, url):
        port = int(url.rsplit(":", 1)[1])
        socks = []
        began = time.monotonic()
        for _ in range(sockets):
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                sock.sendall(b"GET /api/v1/runs HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                socks.append(sock)
            except OSError:
                break
        time.sleep(0.5)
        answered, slowest = 0, 0.0
        for _ in range(20):
            t = time.perf_counter()
            with suppress(httpx.HTTPError):
                answered += httpx.get(f"{url}/healthz", timeout=5).status_code == 200
            slowest = max(slowest, time.perf_counter() - t)
        fds = len(os.listdir(f"/proc/{proc.pid}/fd"))
        print(
            f"stalled: {len(socks)} half-sent requests, open-file limit {limit}: /healthz answered {answered}/20 "
            f"(slowest {slowest * 1000:.0f} ms), the collector holds {fds} file descriptors"
        )
        closed_at = None
        for sock in socks[-50:]:  # the newest, which the cap has not shed: when the header deadline closes them
            sock.settimeout(max(0.1, 40 - (time.monotonic() - began)))
            try:
                sock.recv(1024)
                closed_at = time.monotonic() - began
            except OSError:
                pass
        print(f"stalled: the last of them closed by the server {closed_at or float('nan'):.1f} s after they connected")
        for sock in socks:
            sock.close()


def sql(folder: Path) -> None:
    """A query of huge values: under the collector's defaults (a version with a memory share stops it there), then
    with the whole of DuckDB's memory as its share (what the byte cap alone does)."""
    query = "SELECT printf('%1000000d', range) AS x FROM range(1000)"  # repeat() is refused now (sqlguard)
    for label, env in (("defaults", {}), ("FLOPFLEET_SQL_MEMORY_LIMIT=100%", {"FLOPFLEET_SQL_MEMORY_LIMIT": "100%"})):
        with collector(folder / f"q-{len(env)}.duckdb", env=env) as (proc, url):
            before = _status(proc.pid, "VmRSS")
            began = time.perf_counter()
            answer = httpx.get(f"{url}/api/v1/sql", params={"sql": query}, timeout=120)
            elapsed = time.perf_counter() - began
            body = answer.json()
            peak = _status(proc.pid, "VmHWM") - before
            time.sleep(3)
            held = _status(proc.pid, "VmRSS") - before
            said = body["error"]["code"] if answer.status_code != 200 else f"truncated_by {body.get('truncated_by')}"
            print(
                f"sql ({label}): {query}: HTTP {answer.status_code} {said}, {len(answer.content) / 2**20:.1f} MiB "
                f"answer, {body.get('row_count')} rows, {elapsed:.2f} s; collector peak RSS {peak:+.0f} MB, "
                f"{held:+.0f} MB held 3 s later"
            )


def _run_body(results: int = 300) -> tuple[str, bytes]:
    from tests.factories import make_run, matmul

    run = make_run([matmul(64 + i, "fp32", float(i + 1)) for i in range(results)])
    return str(run.run_id), run.model_dump_json().encode()


def storage(folder: Path) -> None:
    from collector.web.tokens import TokenStore

    db = folder / "f.duckdb"
    token = TokenStore(db).create("bench")
    auth = {"Authorization": f"Bearer {token}"}

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (3 << 20, resource.RLIM_INFINITY))

    with collector(db, preexec=limited) as (proc, url):
        acked = 0
        for _ in range(400):
            _, body = _run_body()
            answer = httpx.post(f"{url}/api/v1/runs", content=body, headers=auth, timeout=120)
            if answer.status_code != 201:
                break
            acked += 1
        print(f"storage: file-size limit 3 MiB: {acked} runs stored, then HTTP {answer.status_code}")
        times = []
        for _ in range(10):
            _, body = _run_body()
            began = time.perf_counter()
            answer = httpx.post(f"{url}/api/v1/runs", content=body, headers=auth, timeout=120)
            times.append((time.perf_counter() - began) * 1000)
        health = httpx.get(f"{url}/healthz", timeout=5)
        print(
            f"storage: while failed, posts answered {answer.status_code} in {min(times):.0f}-{max(times):.0f} ms; "
            f"/healthz {health.status_code} {json.loads(health.text).get('status')}"
        )
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        began = time.monotonic()
        while httpx.get(f"{url}/healthz", timeout=5).status_code != 200 and time.monotonic() - began < 120:
            time.sleep(0.1)
        print(f"storage: healthy again {time.monotonic() - began:.1f} s after the limit was lifted")
        sigterm = time.monotonic()
    print(f"storage: SIGTERM to exit {time.monotonic() - sigterm:.1f} s")


PARTS = {"headers": headers, "stalled": stalled, "sql": sql, "storage": storage}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--skip", action="append", default=[], choices=sorted(PARTS))
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    for name, part in PARTS.items():
        if name in args.skip:
            continue
        with tempfile.TemporaryDirectory(prefix=f"flopfleet-{name}-{uuid.uuid4().hex[:6]}-") as folder:
            part(Path(folder))


if __name__ == "__main__":
    main()

"""A real collector served by uvicorn on 127.0.0.1 in a thread, as httpx's own tests serve theirs."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from collector.app import create_app
from collector.server import server_config
from collector.settings import Settings
from collector.tokens import SCOPES, TokenStore


class _ThreadServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # signals belong to the test runner's main thread
        yield


@dataclass
class Collector:
    url: str
    db: Path
    server: uvicorn.Server
    token: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@contextlib.contextmanager
def serve_collector(db: Path, **settings: object) -> Iterator[Collector]:
    """A collector on a free port of 127.0.0.1 with one token of every scope, ``Collector.token``."""
    tokens = TokenStore(db)
    token = tokens.create(f"test-{len(tokens.list())}", SCOPES)
    chosen = Settings(db=db, port=0, log_level="warning", **settings)  # type: ignore[arg-type]
    config = server_config(create_app(chosen), chosen, host="127.0.0.1", port=0, lifespan="on")
    server = _ThreadServer(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("collector did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Collector(url=f"http://127.0.0.1:{port}", db=db, server=server, token=token)
    finally:
        server.should_exit = True
        thread.join(timeout=20)


class CollectorProcess:
    """``flopfleet-collector serve`` in its own process, so a test can SIGKILL it and start it again."""

    def __init__(
        self, db: Path, port: int = 0, env: dict[str, str] | None = None, preexec: Callable[[], None] | None = None
    ) -> None:
        import os
        import subprocess
        import sys

        self.db = db
        port_file = db.with_name(f"port-{time.monotonic_ns()}")
        self.log = db.with_name(port_file.name + ".log")  # the collector's own log, for a failing test to show
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "collector", "serve", "--db", str(db), "--port", str(port), "--port-file",
                 str(port_file), "--log-level", "warning"],
                stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, **(env or {})}, preexec_fn=preexec,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("collector process did not start")
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        self.url = f"http://127.0.0.1:{self.port}"
        import httpx

        while True:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("collector process never became ready")
            time.sleep(0.05)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)

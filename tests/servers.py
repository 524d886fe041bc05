"""A real collector served by uvicorn on 127.0.0.1 in a thread, as httpx's own tests serve theirs."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from benchmarks.serving import CollectorProcess as CollectorProcess
from collector.web.app import create_app
from collector.web.server import server_config
from collector.web.settings import Settings
from collector.web.tokens import SCOPES, TokenStore


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
    deadline = time.monotonic() + 600
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

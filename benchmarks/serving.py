"""A collector served in its own process (``flopfleet-collector serve``), for benchmarks and tests: ``root`` runs
another checkout's collector (side-by-side comparisons of two versions in one invocation)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


class CollectorProcess:
    """``flopfleet-collector serve`` in its own process, so a test can SIGKILL it and start it again."""

    def __init__(
        self,
        db: Path,
        port: int = 0,
        env: dict[str, str] | None = None,
        preexec: Callable[[], None] | None = None,
        root: Path | None = None,
    ) -> None:

        self.db = db
        port_file = db.with_name(f"port-{time.monotonic_ns()}")
        self.log = db.with_name(port_file.name + ".log")  # the collector's own log, for a failing test to show
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "collector", "serve", "--db", str(db), "--port", str(port), "--port-file",
                 str(port_file), "--log-level", "warning"],
                stdout=subprocess.DEVNULL, stderr=log, env={**os.environ, **(env or {})}, preexec_fn=preexec,
                cwd=root,
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

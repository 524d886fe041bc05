"""`make demo`'s script, as a newcomer meets it: on a terminal it ends serving the pages of the run it measured until
Ctrl-C, which stops the collector cleanly; from a pipe (CI) it ends at once, printing how to serve them. Real child
processes (the agent measures one benchmark on the CPU), a real pseudo-terminal, a real Ctrl-C."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from collector.store import Store
from tests.conftest import HANG_GUARD_S, ROOT

DEMO = [sys.executable, str(ROOT / "scripts" / "demo.py")]


def _env(out: Path) -> dict[str, str]:
    # One benchmark keeps it short; the rest of the demo is as `make demo` runs it.
    return {**os.environ, "DEMO_DIR": str(out), "DEMO_ONLY": "matmul", "OMP_NUM_THREADS": "1"}


def _not_held(db: Path) -> None:
    """The collector let the database go: another process may open it now."""
    with Store(db, read_only=True) as store:
        assert store.reads().run_count() == 1


def test_off_a_terminal_the_demo_ends_and_says_how_to_serve_its_pages(tmp_path: Path) -> None:
    done = subprocess.run(DEMO, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=_env(tmp_path),
                          cwd=ROOT, timeout=HANG_GUARD_S)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"flopfleet-collector serve --db {tmp_path / 'flopfleet.duckdb'}" in done.stdout, done.stdout
    assert "http://127.0.0.1:8000/" in done.stdout and "bin/flopfleet-agent and " in done.stdout  # where they are
    assert (tmp_path / "report.html").read_text().startswith("<!doctype html>")
    _not_held(tmp_path / "flopfleet.duckdb")


def _read_until(fd: int, pattern: bytes, seen: bytearray, timeout: float) -> re.Match[bytes]:
    deadline = time.monotonic() + timeout
    while (found := re.search(pattern, seen)) is None:
        assert time.monotonic() < deadline, seen.decode(errors="replace")[-3000:]
        if select.select([fd], [], [], 0.2)[0]:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the terminal closed: the demo ended before saying it
                raise AssertionError(seen.decode(errors="replace")[-3000:]) from None
    return found


def test_on_a_terminal_the_demo_serves_its_pages_until_ctrl_c(tmp_path: Path) -> None:
    pid, fd = pty.fork()
    if pid == 0:  # the child: the demo on a terminal, as `make demo` runs it
        os.chdir(ROOT)
        os.execve(DEMO[0], DEMO, _env(tmp_path))
    seen = bytearray()
    try:
        url = _read_until(fd, rb"served at (http://127\.0\.0\.1:\d+)/", seen, HANG_GUARD_S).group(1).decode()
        with urllib.request.urlopen(url + "/") as home:
            assert home.status == 200 and b'href="/runs/' in home.read()  # the run it measured, a click away
        os.write(fd, b"\x03")  # Ctrl-C, through the terminal
        _read_until(fd, rb"collector stopped", seen, 120)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, seen.decode(errors="replace")[-3000:]
    with pytest.raises(urllib.error.URLError, match="refused"):  # nothing answers there any more
        urllib.request.urlopen(url + "/healthz", timeout=5)
    _not_held(tmp_path / "flopfleet.duckdb")

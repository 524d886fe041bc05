"""A newcomer's first commands: ``check`` on a machine without a GPU answers at once, a long check shows progress on
a terminal (and only there), and every help screen reads like the tools people know, without type names."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import pty
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from agent.check import NO_GPU
from schemas.helpscreen import plain_help
from tests.conftest import ROOT, agent_cli

NO_GPU_ENV = {"CUDA_VISIBLE_DEVICES": ""}  # no GPU here, even on the GPU machine
TINY = {"FLOPFLEET_PLUGINS": "tests.agent.tiny_suite"}
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_check_without_a_gpu_is_unknown_at_once_and_measures_nothing() -> None:
    done = agent_cli("check", "--json", env=NO_GPU_ENV)
    assert done.returncode == 3, done.stderr
    body = json.loads(done.stdout)
    assert [v["reasons"] for v in body["verdicts"]] == [[NO_GPU]] and body["runs"] == []
    assert "measure" not in body["seconds"]  # the health profile took 211 s on this machine's CPU


def _on_a_terminal(*args: str) -> tuple[int, str, str]:
    """The agent with its stderr on a pseudo-terminal: exit code, stdout, what the terminal showed (plain text)."""
    master, slave = pty.openpty()
    env = {**os.environ, **TINY, "COLUMNS": "120", "TERM": "xterm"}
    with subprocess.Popen([sys.executable, "-m", "agent", *args], stdout=subprocess.PIPE, stderr=slave, env=env,
                          cwd=ROOT) as proc:  # fmt: skip
        os.close(slave)
        shown = b""
        while select.select([master], [], [], 120)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        os.close(master)
        out = proc.stdout.read().decode() if proc.stdout else ""
        code = proc.wait(timeout=60)
    return code, out, _ESCAPES.sub("", shown.decode(errors="replace"))


def test_a_check_shows_its_progress_on_a_terminal_and_not_in_a_log() -> None:
    code, out, shown = _on_a_terminal("check", "--device", "cpu", "--suite", "tiny")
    assert code == 3 and "UNKNOWN" in out, (out, shown)
    assert "matmul fp32 n=128" in shown and "━" in shown, shown  # the case being measured, and the bar
    piped = agent_cli("check", "--device", "cpu", "--suite", "tiny", env=TINY)
    assert piped.returncode == 3 and "━" not in piped.stderr and "n=128" not in piped.stderr, piped.stderr


def _paths(command: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield prefix
    for name, sub in getattr(command, "commands", {}).items():
        yield from _paths(sub, (*prefix, name))


@pytest.mark.parametrize("cli", ["agent", "collector"])
def test_help_screens_show_no_type_names(cli: str) -> None:
    """Every command's help, as ``main`` builds the CLI: no ``<bool>``, ``<list[str]>`` or ``<path>`` anywhere."""
    app = importlib.import_module(f"{cli}.cli").app
    command = plain_help(app)
    seen = 0
    for path in _paths(command):
        shown = io.StringIO()
        with contextlib.redirect_stdout(shown):
            command.main([*path, "--help"], prog_name=f"flopfleet-{cli}", standalone_mode=False)
        assert "Usage:" in shown.getvalue(), path
        assert not re.search(r"<[A-Za-z_\[\], ]+>", shown.getvalue()), (path, shown.getvalue())
        seen += 1
    assert seen > 6
    done = subprocess.run([sys.executable, "-m", cli, "--help"], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0 and "Usage:" in done.stdout and "<" not in done.stdout, done.stdout  # main's own

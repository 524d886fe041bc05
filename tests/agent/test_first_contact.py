"""A newcomer's first commands: ``check`` on a machine without a GPU answers at once, a long check shows progress on
a terminal (and only there), every help screen reads like the tools people know, without type names, and a wrong
token or URL costs one line before anything is measured (the first contact: ``GET /api/v1/token``)."""

from __future__ import annotations

import contextlib
import importlib
import io
import itertools
import json
import os
import pty
import re
import select
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent.run.check import NO_GPU
from collector.web.tokens import TokenStore
from schemas.helpscreen import plain_help
from tests.conftest import ROOT, agent_cli
from tests.servers import Collector

#: Where each package's typer app is.
CLI_MODULES = {"agent": "agent.cli", "collector": "collector.cli.main"}
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
    progress = [line for line in piped.stderr.splitlines() if "n=128" in line and not line.startswith("note: ")]
    assert piped.returncode == 3 and "━" not in piped.stderr and not progress, piped.stderr  # a note may name a case


def _paths(command: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield prefix
    for name, sub in getattr(command, "commands", {}).items():
        yield from _paths(sub, (*prefix, name))


@pytest.mark.parametrize("cli", ["agent", "collector"])
def test_help_screens_show_no_type_names(cli: str) -> None:
    """Every command's help, as ``main`` builds the CLI: no ``<bool>``, ``<list[str]>`` or ``<path>`` anywhere."""
    app = importlib.import_module(CLI_MODULES[cli]).app
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


#: click's help width at 80 columns: two short of the terminal's.
HELP_WIDTH = 78


def _continues(above: str, line: str, listing: bool) -> bool:
    """Whether ``line`` carries on the text of ``above`` (a paragraph's next line, or an option's or command's help
    wrapped under its column) rather than starting a row or a paragraph of its own."""
    at = len(line) - len(line.lstrip())
    if not line.strip() or not above.strip() or at == 0:
        return False
    if at == len(above) - len(above.lstrip()):
        return not listing  # in a list of options or commands, the same indent starts the next row
    return len(above) > at and above[at - 2 : at] == "  " and above[at] != " "


def _filled(text: str) -> list[tuple[str, str]]:
    """Pairs of lines where the first ends before its width while the next line's first word would have fitted:
    a paragraph broken in the middle of a sentence."""
    broken, listing = [], False
    lines = text.splitlines()
    for above, line in itertools.pairwise(lines):
        listing = listing or (above.endswith(":") and not above.startswith(" "))  # Options:, Commands:, Arguments:
        if _continues(above, line, listing) and len(above) + 1 + len(line.split()[0]) <= HELP_WIDTH:
            broken.append((above, line))
    return broken


@pytest.mark.parametrize("cli", ["agent", "collector"])
def test_help_screens_read_well_at_80_columns(cli: str) -> None:
    """Every command's help as the real CLI shows it on an 80-column terminal: every line fits, nothing is cut
    (``FLOPFLEET_COLLECTO…``) or split at a hyphen, every paragraph is filled (not broken where its source line
    ended: "an error⏎counter"), and each option's, argument's and subcommand's help is there whole."""
    command = plain_help(importlib.import_module(CLI_MODULES[cli]).app)
    for path in _paths(command):
        done = subprocess.run([sys.executable, "-m", cli, *path, "--help"], capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, "COLUMNS": "80"}, timeout=600)  # fmt: skip
        assert done.returncode == 0, done.stderr
        shown = done.stdout
        assert [line for line in shown.splitlines() if len(line) > 80] == [], (path, shown)
        assert "…" not in shown and not re.search(r"[a-z]\.\.\.", shown), (path, shown)  # cut, by Rich or click
        assert _filled(shown) == [], (path, shown)
        flat = " ".join(shown.split())
        sub = command
        for name in path:
            sub = sub.commands[name]
        wanted = [p.help for p in sub.params if getattr(p, "help", None)]
        wanted += [c.help.strip().split("\n\n")[0] for c in getattr(sub, "commands", {}).values() if c.help]
        assert [w for w in wanted if " ".join(w.split()) not in flat] == [], (path, shown)


def _run(collector_url: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return agent_cli("run", "--suite", "quick", "--device", "cpu", "--only", "matmul", "-q", "--collector",
                     collector_url, "--output", str(tmp_path / "run.json"), "--spool-dir", str(tmp_path / "spool"),
                     *extra)  # fmt: skip


def _nothing_measured(tmp_path: Path, done: subprocess.CompletedProcess[str]) -> bool:
    spool = tmp_path / "spool"
    return done.stdout == "" and not (tmp_path / "run.json").exists() and not (spool.exists() and any(spool.iterdir()))


def test_a_wrong_token_is_one_line_and_a_permanent_exit_before_anything_is_measured(
    collector: Collector, tmp_path: Path
) -> None:
    wrong = _run(collector.url, tmp_path, "--token", "not-the-token")
    assert wrong.returncode == 78, wrong.stderr  # EX_CONFIG: a scheduler does not retry it, as it would 75
    assert wrong.stderr.strip().splitlines() == [
        f"error: {collector.url}: the token was refused: HTTP 401: the token is not valid: unknown or revoked"
    ]
    assert _nothing_measured(tmp_path, wrong)
    none = _run(collector.url, tmp_path)
    assert none.returncode == 78 and "no token was given (--token-file, FLOPFLEET_TOKEN)" in none.stderr
    reader = TokenStore(collector.db).create("reader", ("read",))
    read_only = _run(collector.url, tmp_path, "--token", reader)
    assert read_only.returncode == 78 and "the token 'reader' has scopes read; this needs 'write'" in read_only.stderr
    assert _nothing_measured(tmp_path, read_only)
    check = agent_cli("check", "--device", "cpu", "--suite", "tiny", "--json", "--collector", collector.url,
                      "--token", "not-the-token", env=TINY)  # fmt: skip
    assert check.returncode == 3 and "the token was refused" in check.stderr  # UNKNOWN, as a monitoring plugin says
    assert check.stdout == ""


def test_a_url_that_is_not_a_collector_is_refused_and_one_that_is_down_still_measures(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    down = _run(closed, tmp_path)
    assert down.returncode == 75, down.stderr  # measured, and waits in the spool for `push`
    assert "could not be reached now (ConnectError): the run will wait in the spool" in down.stderr
    assert (tmp_path / "run.json").exists() and any((tmp_path / "spool").iterdir())

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with _plain_http_server() as url:
        other = _run(url, elsewhere)
    assert other.returncode == 78
    assert f"error: {url} is not a flopfleet collector: GET /api/v1/token answered HTTP 404" in other.stderr
    assert _nothing_measured(elsewhere, other)


def test_check_on_a_cpu_with_the_gpu_profile_is_refused_before_measuring() -> None:
    done = agent_cli("check", "--device", "cpu", "--json")
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.startswith("error: check judges GPUs: its health profile") and "--suite quick" in done.stderr
    assert "run --device cpu --suite quick" in NO_GPU  # the no-GPU line says what to do instead


@contextlib.contextmanager
def _plain_http_server() -> Iterator[str]:
    """Some other web server on the URL (python -m http.server): 404 for the collector's paths."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd="/") as server:  # fmt: skip
        try:
            for _ in range(600):
                with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
                select.select([], [], [], 0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.kill()

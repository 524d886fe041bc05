"""The ``flopfleet-agent`` command: its commands registered in the order ``--help`` lists them, and ``main``, which
catches the agent's one error type once and turns it into an exit code."""

from __future__ import annotations

import logging
import os
import sys

import typer
from rich.text import Text

from schemas.helpscreen import plain_help
from schemas.terminal import literal

from ..errors import AgentError, CollectorRefused, HostBusy
from .check import CheckCommand, check
from .common import EXIT_FAILED, EXIT_KEPT, EXIT_REFUSED, err
from .info import info, list_benchmarks, version
from .push import config_show, push
from .run import run

app = typer.Typer(
    name="flopfleet-agent",
    help="Measure what this machine's GPUs (or CPU) really deliver, and send it to a flopfleet collector.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command()(info)
app.command("list")(list_benchmarks)
app.command()(run)
app.command(cls=CheckCommand)(check)
app.command()(push)
config_app = typer.Typer(help="The agent's settings: file, environment and flags.", no_args_is_help=True)
app.add_typer(config_app, name="config")
config_app.command("show")(config_show)
app.command()(version)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        try:
            if os.environ.get("FLOPFLEET_PLUGINS"):
                from ..harness.plugins import load_plugins

                load_plugins(os.environ)
            plain_help(app)()
        except (CollectorRefused, HostBusy) as exc:  # 78: permanent; 75: try again later, nothing measured
            err.print(Text.assemble(("error", "red"), ": ", literal(exc)), soft_wrap=True)
            sys.exit(EXIT_REFUSED if isinstance(exc, CollectorRefused) else EXIT_KEPT)
        except AgentError as exc:
            err.print(Text.assemble(("error", "red"), ": ", literal(exc)), soft_wrap=True)  # one line, unwrapped
            sys.exit(EXIT_FAILED)
    except SystemExit as done:
        leave(done)
        raise


def leave(done: SystemExit) -> None:
    """End a process that imported torch at once, its output flushed, without the interpreter's teardown: tearing
    torch down took 0.5 s against 0.02 s this way (``benchmarks/agent_exit.py``, this repository's CPU venv; 334
    against 19 ms on an H200 machine's host), after the run had been written and posted, time a scheduler's job or a
    timer's unit still counts as the run's. Everything the agent keeps is written before this (the run file, the
    spool, the collector's answer), and its children have stopped."""
    if "torch" not in sys.modules:
        return
    code = done.code
    if isinstance(code, str):
        print(code, file=sys.stderr)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else (0 if code is None else 1))

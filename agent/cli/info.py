"""``info``, ``list`` and ``version``: what this machine and a suite are, without measuring anything."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from .. import __version__
from ..run.config import RunConfig
from . import render
from .common import default_device, out
from .options import DeviceOpt


def info(
    as_json: Annotated[bool, typer.Option("--json", help="Print the machine as the wire schema's JSON.")] = False,
    device: DeviceOpt = None,
) -> None:
    """Show this machine: software versions and, per GPU, memory, clocks, power limit and PCIe link."""
    from ..run.describe import describe_machine

    machine = describe_machine(device or default_device())
    if as_json:
        sys.stdout.write(machine.model_dump_json(indent=2) + "\n")
    else:
        out.print(render.machine_table(machine))


def list_benchmarks(
    suite: Annotated[str, typer.Option(help="quick, standard, full or health")] = "standard",
    device: DeviceOpt = None,
) -> None:
    """List every benchmark in a suite with its cases (the names --only and --skip take)."""
    from ..harness.suites import suite as find_suite
    from ..run.session import targets_for

    chosen = find_suite(suite)
    benchmarks = chosen.benchmarks()
    from ..run.runner import cases_of, span_of

    targets = targets_for(RunConfig(suite=suite, device=device or default_device(), gpus=None))
    cases = {b.NAME: [c.label for c in cases_of(b, targets[0], span_of(targets))] for b in benchmarks}
    out.print(render.benchmarks_table(chosen, benchmarks, cases))


def version() -> None:
    """Print the agent's version."""
    out.print(__version__)

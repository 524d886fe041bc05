"""``check``: the health profile measured and judged; one line per GPU and an exit code a job prolog acts on."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text
from typer.core import TyperCommand

try:  # click's UsageError: typer vendors click from 0.20 on, earlier releases use click's own
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer
    from click.exceptions import UsageError  # type: ignore[no-redef, import-not-found, assignment, unused-ignore]

from schemas import Gpu, RunSubmission
from schemas.terminal import literal
from schemas.verdicts import EXIT_CODES, Level

from ..errors import AgentError
from ..run.config import RunConfig
from . import render
from .common import (
    err,
    first_contact,
    out,
    progress,
    ready_host,
    resolved,
    run_config,
    start_delay,
    tags,
    upload_config,
)
from .options import (
    BusyWaitOpt,
    CaseTimeoutOpt,
    CollectorOpt,
    ConfigOpt,
    DeviceOpt,
    GpusOpt,
    JitterOpt,
    PriorityOpt,
    SpoolOpt,
    TagOpt,
    TokenFileOpt,
    TokenOpt,
    WhenBusyOpt,
)


class CheckCommand(TyperCommand):
    """``check``'s bad options exit 3 (UNKNOWN), not click's 2, which is CRITICAL to a prolog, Slurm or NPD: a
    mistyped option must never read as a bad GPU."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except UsageError as exc:
            exc.exit_code = EXIT_CODES[Level.unknown]
            raise


def check(
    device: DeviceOpt = None,
    gpus: GpusOpt = None,
    collector: CollectorOpt = None,
    token: TokenOpt = None,
    token_file: TokenFileOpt = None,
    config: ConfigOpt = None,
    spool_dir: SpoolOpt = None,
    from_collector: Annotated[
        bool, typer.Option("--from-collector", help="Measure nothing: read this machine's latest verdicts.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdicts as JSON, for programs.")] = False,
    suite: Annotated[str, typer.Option(help="The profile measured (default: health).")] = "health",
    remeasure: Annotated[
        bool, typer.Option(help="Measure a figure that failed once again before giving the verdict.")
    ] = True,
    baseline: Annotated[
        Path | None,
        typer.Option(
            help="A baseline bundle to judge against here, instead of the bundled ones "
            "(flopfleet-collector baseline export)."
        ),
    ] = None,
    tag: TagOpt = None,
    case_timeout: CaseTimeoutOpt = None,
    when_busy: WhenBusyOpt = None,
    busy_wait: BusyWaitOpt = None,
    priority: PriorityOpt = None,
    jitter: JitterOpt = None,
) -> None:
    """A preflight for job prologs and health checks: one line per GPU, and the exit code to act on.

    Exits 0 OK, 1 WARNING (a figure failed once and was not confirmed), 2 CRITICAL (confirmed slow, or an error
    counter says the GPU is faulty), 3 UNKNOWN (nothing to compare with, or the check itself failed). With a
    collector the run is posted and the collector judges it against the fleet and its baselines; without one,
    against this machine's other GPUs, the card's baseline (bundled, or --baseline) and the model's floor.
    """
    import json

    from ..run.check import CheckConfig, baselines_for
    from ..run.check import check as run_check
    from ..run.session import execute
    from ..run.upload import new_client

    try:
        # The profile is check's own (--suite only): a configured suite is run's.
        settings = resolved(config, token, device=device, gpus=gpus, collector=collector,
                            token_file=token_file, spool_dir=spool_dir, case_timeout=case_timeout,
                            when_busy=when_busy, busy_wait=busy_wait, priority=priority,
                            jitter=jitter)  # fmt: skip
        check_config = CheckConfig(
            run=run_config(
                settings,
                suite=suite,
                tags={"check": "profile", **tags(settings, tag)},
                upload=replace(upload_config(settings), retries=1),
            ),
            from_collector=from_collector,
            remeasure=remeasure,
            measure_cpu=settings["device"] == "cpu",
            baselines=baselines_for(baseline),
        )
        if not from_collector:
            first_contact(check_config.run.upload)
        start_delay(settings["jitter"])
        ready: list[bool] = []

        def measure(run: RunConfig) -> RunSubmission:
            if not ready:  # at the first measurement: a check that measures nothing (no GPU, refused) waits for nothing
                ready_host(check_config.run)
                ready.append(True)
            return execute(run, on_event)

        def machine_gpus() -> tuple[Gpu, ...]:
            from ..run.describe import describe_machine

            return describe_machine(check_config.run.device).gpus

        # Progress only where a person watches (a terminal): a prolog's or a timer's log gets the verdict lines alone.
        with new_client() as client, progress(disable=not err.is_terminal) as on_event:
            outcome = run_check(check_config, client, measure, machine_gpus)
    except AgentError as exc:  # the check could not say: UNKNOWN, as a monitoring plugin does
        err.print(Text.assemble(("error", "red"), ": ", literal(exc)), soft_wrap=True)
        raise typer.Exit(EXIT_CODES[Level.unknown]) from None
    if as_json:
        body = {
            "level": outcome.level.value,
            "exit_code": outcome.exit_code,
            "verdicts": [v.model_dump(mode="json") for v in outcome.verdicts],
            "notes": list(outcome.notes),
            "runs": [str(r.run_id) for r in outcome.runs],
            "seconds": {**outcome.seconds, "process": process_age_s()},
        }
        sys.stdout.write(json.dumps(body, indent=1) + "\n")
    else:
        for line in render.verdict_lines(outcome.verdicts):
            out.print(line, soft_wrap=True)  # one line per GPU, as a prolog's log keeps it
        for delivery in outcome.deliveries:
            err.print(render.delivery_line(delivery))
        for note in outcome.notes:
            err.print(Text.assemble(("note", "yellow"), ": ", literal(note)))
    raise typer.Exit(outcome.exit_code)


def process_age_s() -> float | None:
    """Seconds since this process started (Linux: /proc), the interpreter's start and imports included."""
    try:
        started_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return round(uptime - started_ticks / os.sysconf("SC_CLK_TCK"), 2)

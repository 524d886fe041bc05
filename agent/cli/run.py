"""``run``: measure a suite, then show, write and post the run."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from schemas import RunSubmission
from schemas.terminal import literal

from ..run.config import RunConfig
from ..stop import Stop, stopping_on_signals
from . import render
from .common import (
    EXIT_FAILED,
    EXIT_KEPT,
    EXIT_REFUSED,
    err,
    first_contact,
    names,
    out,
    progress,
    resolved,
    run_config,
    settle,
    tags,
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


def run(
    suite: Annotated[str | None, typer.Option(help="quick, standard, full or health (default: quick)")] = None,
    device: DeviceOpt = None,
    gpus: GpusOpt = None,
    collector: CollectorOpt = None,
    token: TokenOpt = None,
    token_file: TokenFileOpt = None,
    config: ConfigOpt = None,
    output: Annotated[Path | None, typer.Option(help="Write the run JSON here.")] = None,
    tag: TagOpt = None,
    only: Annotated[list[str] | None, typer.Option(help="Run only these benchmarks (names or a,b).")] = None,
    skip: Annotated[list[str] | None, typer.Option(help="Skip these benchmarks (names or a,b).")] = None,
    time_budget: Annotated[float | None, typer.Option(help="Seconds; cases after it are 'skipped'.")] = None,
    attn: Annotated[
        str | None, typer.Option(help="Attention implementation for layers and training (default: sdpa).")
    ] = None,
    spool_dir: SpoolOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    parallel: Annotated[
        bool | None,
        typer.Option(help="Measure the GPUs at once (results flagged 'parallel'), not one after another."),
    ] = None,
    nnodes: Annotated[int, typer.Option(help="Machines in a multi-node collective/DDP run.")] = 1,
    node_rank: Annotated[int, typer.Option(help="This machine's number, 0..nnodes-1.")] = 0,
    master_addr: Annotated[str, typer.Option(help="Host of node 0, where the workers meet.")] = "127.0.0.1",
    master_port: Annotated[int | None, typer.Option(help="Free TCP port on node 0, the same on every node.")] = None,
    nodes_from_env: Annotated[
        bool, typer.Option(help="Read the node layout from torchrun's or Slurm's environment.")
    ] = False,
    isolation: Annotated[
        str | None, typer.Option(help="Where device benchmarks run: process (a child per device) or inline.")
    ] = None,
    case_timeout: CaseTimeoutOpt = None,
    when_busy: WhenBusyOpt = None,
    busy_wait: BusyWaitOpt = None,
    priority: PriorityOpt = None,
    jitter: JitterOpt = None,
) -> None:
    """Run a suite, print a summary, write the run JSON and post it to a collector.

    Exits 75 when the run was measured but not delivered: it is kept in the spool for `flopfleet-agent push`. Exits
    78, before measuring, when the collector refuses the token or is not a flopfleet collector. Stopped by SIGTERM
    or SIGINT, it keeps what it measured (written, posted) and exits 143 or 130.
    """
    from ..distributed.nodes import Nodes, from_launcher
    from ..run.session import execute

    settings = resolved(config, token, suite=suite, device=device, gpus=gpus, collector=collector,
                        token_file=token_file, spool_dir=spool_dir,
                        time_budget=time_budget, attn=attn, parallel=parallel, isolation=isolation,
                        case_timeout=case_timeout, when_busy=when_busy, busy_wait=busy_wait,
                        priority=priority, jitter=jitter)  # fmt: skip
    configured = run_config(
        settings,
        suite=settings["suite"],
        tags=tags(settings, tag),
        only=names(only or []),
        skip=names(skip or []),
        time_budget_s=settings["time_budget"],
        attn_implementation=settings["attn"],
        output=output,
        nodes=from_launcher(os.environ)
        if nodes_from_env
        else Nodes(count=nnodes, rank=node_rank, master_addr=master_addr, master_port=master_port),
        parallel=settings["parallel"],
        isolation=settings["isolation"],
    )
    first_contact(configured.upload)
    settle(configured, settings["jitter"])
    with stopping_on_signals(Stop()) as stop:  # a signal stops the measuring; the run is still written and posted
        with progress(disable=quiet) as on_event:
            submission = execute(configured, on_event, stop)
        keep(submission, configured, stop)


def keep(submission: RunSubmission, run_config: RunConfig, stop: Stop) -> None:
    """Show, write and post a run; the exit code says what became of it (and of a run told to stop)."""
    from ..run.upload import deliver

    out.print(render.summary_table(submission))
    for line in render.problems(submission):
        err.print(Text.assemble(("note", "yellow"), ": ", line))
    if run_config.output is not None:
        run_config.output.parent.mkdir(parents=True, exist_ok=True)
        run_config.output.write_text(submission.model_dump_json(indent=1), encoding="utf-8")
        out.print(literal(f"run written to {run_config.output}"))
    if run_config.upload.collector_url:
        from ..run.upload import new_client

        # Told to stop, the agent has moments before SIGKILL (Slurm's KillWait, Kubernetes' grace period: 30 s by
        # default): one attempt, then the spool.
        upload = replace(run_config.upload, retries=1) if stop.requested else run_config.upload
        with new_client() as client:
            delivery = deliver(submission, upload, client)
        delivered = delivery.status in ("sent", "duplicate")
        (out if delivered else err).print(render.delivery_line(delivery))
        if not delivered:
            codes = {"spooled": EXIT_KEPT, "held": EXIT_REFUSED}
            raise typer.Exit(codes.get(delivery.status, EXIT_FAILED))
    if stop.requested:
        raise typer.Exit(stop.exit_code)

"""``flopfleet-agent``: parses flags, builds the config, calls plain functions, renders what they return."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TimeElapsedColumn
from rich.text import Text

from schemas import Gpu
from schemas.terminal import literal
from schemas.verdicts import EXIT_CODES, Level

from . import __version__, render
from .config import RunConfig, UploadConfig, default_spool_dir, parse_gpus, parse_tags
from .errors import AgentError

#: Bad options, no such device, a run that could not even be spooled, a spool entry that is not a readable run.
EXIT_FAILED = 1
#: EX_TEMPFAIL (sysexits.h): measured fine but not delivered; the run is kept in the spool for ``push`` to send.
EXIT_KEPT = 75

app = typer.Typer(
    name="flopfleet-agent",
    help="Measure what this machine's GPUs (or CPU) really deliver, and send it to a flopfleet collector.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

CollectorOpt = Annotated[
    str | None, typer.Option("--collector", envvar="FLOPFLEET_COLLECTOR", help="Collector base URL.")
]
TokenOpt = Annotated[
    str | None, typer.Option("--token", envvar="FLOPFLEET_TOKEN", help="Bearer token for writes.", show_default=False)
]
SpoolOpt = Annotated[
    Path | None,
    typer.Option("--spool-dir", envvar="FLOPFLEET_SPOOL_DIR", help="Where undelivered runs wait [default: cache]."),
]


def _names(values: list[str]) -> tuple[str, ...]:
    return tuple(n.strip() for v in values for n in v.split(",") if n.strip())


def _upload_config(collector: str | None, token: str | None, spool_dir: Path | None) -> UploadConfig:
    return UploadConfig(collector_url=collector, token=token, spool_dir=spool_dir or default_spool_dir(os.environ))


class _CaseColumn(ProgressColumn):
    """The benchmark and case being measured, as plain text (a TextColumn would read them as markup)."""

    def render(self, task: Task) -> Text:
        return Text.assemble(literal(task.fields.get("bench", ""), "bold"), " ", literal(task.description))


def _default_device() -> str:
    from .target import default_device

    return default_device()


@app.command()
def info(
    as_json: Annotated[bool, typer.Option("--json", help="Print the machine as the wire schema's JSON.")] = False,
    device: Annotated[str | None, typer.Option(help="cuda or cpu [default: cuda when present]")] = None,
) -> None:
    """Show this machine: software versions and, per GPU, memory, clocks, power limit and PCIe link."""
    from .machine import describe_machine

    machine = describe_machine(device or _default_device())
    if as_json:
        sys.stdout.write(machine.model_dump_json(indent=2) + "\n")
    else:
        out.print(render.machine_table(machine))


@app.command("list")
def list_benchmarks(
    suite: Annotated[str, typer.Option(help="quick, standard, full or health")] = "standard",
    device: Annotated[str | None, typer.Option(help="cuda or cpu [default: cuda when present]")] = None,
) -> None:
    """List every benchmark in a suite with its cases (the names --only and --skip take)."""
    from .session import targets_for
    from .suites import suite as find_suite

    chosen = find_suite(suite)
    benchmarks = chosen.benchmarks()
    from .runner import cases_of, span_of

    targets = targets_for(RunConfig(suite=suite, device=device or _default_device(), gpus=None))
    cases = {b.NAME: [c.label for c in cases_of(b, targets[0], span_of(targets))] for b in benchmarks}
    out.print(render.benchmarks_table(chosen, benchmarks, cases))


@app.command()
def run(
    suite: Annotated[str, typer.Option(help="quick, standard, full or health")] = "quick",
    device: Annotated[str | None, typer.Option(help="cuda or cpu [default: cuda when present]")] = None,
    gpus: Annotated[str | None, typer.Option(help="GPU indices, e.g. 0,1 [default: all]")] = None,
    collector: CollectorOpt = None,
    token: TokenOpt = None,
    output: Annotated[Path | None, typer.Option(help="Write the run JSON here.")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="key=value label stored with the run; repeatable.")] = None,
    only: Annotated[list[str] | None, typer.Option(help="Run only these benchmarks (names or a,b).")] = None,
    skip: Annotated[list[str] | None, typer.Option(help="Skip these benchmarks (names or a,b).")] = None,
    time_budget: Annotated[float | None, typer.Option(help="Seconds; cases after it are 'skipped'.")] = None,
    attn: Annotated[str, typer.Option(help="Attention implementation for layers and training.")] = "sdpa",
    spool_dir: SpoolOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
    parallel: Annotated[
        bool, typer.Option(help="Measure the GPUs at once (results flagged 'parallel'), not one after another.")
    ] = False,
    nnodes: Annotated[int, typer.Option(help="Machines in a multi-node collective/DDP run.")] = 1,
    node_rank: Annotated[int, typer.Option(help="This machine's number, 0..nnodes-1.")] = 0,
    master_addr: Annotated[str, typer.Option(help="Host of node 0, where the workers meet.")] = "127.0.0.1",
    master_port: Annotated[int | None, typer.Option(help="Free TCP port on node 0, the same on every node.")] = None,
    nodes_from_env: Annotated[
        bool, typer.Option(help="Read the node layout from torchrun's or Slurm's environment.")
    ] = False,
    isolation: Annotated[
        str, typer.Option(help="Where device benchmarks run: process (a child per device) or inline.")
    ] = "process",
    case_timeout: Annotated[
        float | None, typer.Option(help="Seconds a case may make no progress before it counts as a hang.")
    ] = None,
) -> None:
    """Run a suite, print a summary, write the run JSON and post it to a collector.

    Exits 75 when the run was measured but not delivered: it is kept in the spool for `flopfleet-agent push`.
    """
    from .distributed.nodes import Nodes, from_launcher
    from .session import execute
    from .upload import deliver

    config = RunConfig(
        suite=suite,
        device=device or _default_device(),
        gpus=parse_gpus(gpus),
        only=_names(only or []),
        skip=_names(skip or []),
        time_budget_s=time_budget,
        attn_implementation=attn,  # type: ignore[arg-type]  # RunConfig names the allowed values
        tags=parse_tags(tag or []),
        output=output,
        upload=_upload_config(collector, token, spool_dir),
        nodes=from_launcher(os.environ)
        if nodes_from_env
        else Nodes(count=nnodes, rank=node_rank, master_addr=master_addr, master_port=master_port),
        parallel=parallel,
        isolation=isolation,  # type: ignore[arg-type]  # RunConfig names the allowed values
        case_timeout_s=case_timeout,
    )
    with Progress(
        _CaseColumn(),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=quiet,
    ) as progress:
        task = progress.add_task("", total=None, bench="planning")

        def on_event(event: object) -> None:
            from .runner import CaseEvent

            assert isinstance(event, CaseEvent)
            progress.update(
                task, total=event.total, completed=event.done, bench=event.benchmark, description=event.label
            )

        submission = execute(config, on_event)
    out.print(render.summary_table(submission))
    for line in render.problems(submission):
        err.print(Text.assemble(("note", "yellow"), ": ", line))
    if config.output is not None:
        config.output.parent.mkdir(parents=True, exist_ok=True)
        config.output.write_text(submission.model_dump_json(indent=1), encoding="utf-8")
        out.print(literal(f"run written to {config.output}"))
    if config.upload.collector_url:
        from .upload import new_client

        with new_client() as client:
            delivery = deliver(submission, config.upload, client)
        delivered = delivery.status in ("sent", "duplicate")
        (out if delivered else err).print(render.delivery_line(delivery))
        if not delivered:
            raise typer.Exit(EXIT_KEPT if delivery.status == "spooled" else EXIT_FAILED)


@app.command()
def check(
    device: Annotated[str | None, typer.Option(help="cuda or cpu [default: cuda when present]")] = None,
    gpus: Annotated[str | None, typer.Option(help="GPU indices, e.g. 0,1 [default: all]")] = None,
    collector: CollectorOpt = None,
    token: TokenOpt = None,
    spool_dir: SpoolOpt = None,
    from_collector: Annotated[
        bool, typer.Option("--from-collector", help="Measure nothing: read this machine's latest verdicts.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdicts as JSON, for programs.")] = False,
    suite: Annotated[str, typer.Option(help="The profile measured [default: health].")] = "health",
    remeasure: Annotated[
        bool, typer.Option(help="Measure a figure that failed once again before giving the verdict.")
    ] = True,
    tag: Annotated[list[str] | None, typer.Option(help="key=value label stored with the run; repeatable.")] = None,
    case_timeout: Annotated[
        float | None, typer.Option(help="Seconds a case may make no progress before it counts as a hang.")
    ] = None,
) -> None:
    """A preflight for job prologs and health checks: one line per GPU, and the exit code to act on.

    Exits 0 OK, 1 WARNING (a figure failed once and was not confirmed), 2 CRITICAL (confirmed slow, or an error
    counter says the GPU is faulty), 3 UNKNOWN (nothing to compare with, or the check itself failed). With a
    collector the run is posted and the collector judges it against the fleet; without one, against this
    machine's other GPUs and the model's bundled floor.
    """
    import json

    from .check import CheckConfig
    from .check import check as run_check
    from .session import execute
    from .upload import new_client

    try:
        config = CheckConfig(
            run=RunConfig(
                suite=suite,
                device=device or _default_device(),
                gpus=parse_gpus(gpus),
                tags={"check": "profile", **parse_tags(tag or [])},
                upload=replace(_upload_config(collector, token, spool_dir), retries=1),
                case_timeout_s=case_timeout,
            ),
            from_collector=from_collector,
            remeasure=remeasure,
        )

        def machine_gpus() -> tuple[Gpu, ...]:
            from .machine import describe_machine

            return describe_machine(config.run.device).gpus

        with new_client() as client:
            outcome = run_check(config, client, execute, machine_gpus)
    except AgentError as exc:  # the check could not say: UNKNOWN, as a monitoring plugin does
        err.print(Text.assemble(("error", "red"), ": ", literal(exc)))
        raise typer.Exit(EXIT_CODES[Level.unknown]) from None
    if as_json:
        body = {
            "level": outcome.level.value,
            "exit_code": outcome.exit_code,
            "verdicts": [v.model_dump(mode="json") for v in outcome.verdicts],
            "notes": list(outcome.notes),
            "runs": [str(r.run_id) for r in outcome.runs],
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


@app.command()
def push(collector: CollectorOpt = None, token: TokenOpt = None, spool_dir: SpoolOpt = None) -> None:
    """Send every spooled run to the collector; each file is removed only on the collector's receipt for it.

    Exits 75 when a run is still spooled, 1 when a spool entry is not a readable run (skipped or failed).
    """
    from .upload import new_client
    from .upload import push as push_spooled

    config = _upload_config(collector, token, spool_dir)
    if not config.collector_url:
        raise AgentError("push needs --collector URL (or FLOPFLEET_COLLECTOR)")
    with new_client() as client:
        deliveries = push_spooled(config, client)
    if not deliveries:
        out.print(literal(f"nothing spooled in {config.spool_dir}"))
    for delivery in deliveries:
        (out if delivery.status in ("sent", "duplicate") else err).print(render.delivery_line(delivery))
    statuses = {d.status for d in deliveries}
    if statuses & {"failed", "skipped"}:
        raise typer.Exit(EXIT_FAILED)  # a person has to look: sending again will not help
    if "spooled" in statuses:
        raise typer.Exit(EXIT_KEPT)


@app.command()
def version() -> None:
    """Print the agent's version."""
    out.print(__version__)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if os.environ.get("FLOPFLEET_PLUGINS"):
            from .plugins import load_plugins

            load_plugins(os.environ)
        app()
    except AgentError as exc:
        err.print(Text.assemble(("error", "red"), ": ", literal(exc)))
        sys.exit(EXIT_FAILED)

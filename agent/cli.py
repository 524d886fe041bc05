"""``flopfleet-agent``: parses flags, builds the config, calls plain functions, renders what they return."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperCommand

try:  # click's UsageError: typer vendors click from 0.20 on, earlier releases use click's own
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older typer
    from click.exceptions import UsageError  # type: ignore[no-redef, import-not-found, assignment, unused-ignore]
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TimeElapsedColumn
from rich.text import Text

from schemas import Gpu, RunSubmission
from schemas.helpscreen import plain_help
from schemas.terminal import literal
from schemas.verdicts import EXIT_CODES, Level

from . import __version__, render
from .errors import AgentError, CollectorRefused, ConfigError, HostBusy
from .machine.occupancy import check_when_busy
from .machine.priority import apply as lower_priority
from .machine.priority import check_priority
from .run.config import RunConfig, UploadConfig, default_spool_dir, parse_gpus, parse_tags
from .settings import KEYS, Resolved
from .stop import Stop, stopping_on_signals
from .timing.starvation import decide_host

#: Bad options, no such device, a run that could not even be spooled, a spool entry that is not a readable run.
EXIT_FAILED = 1
#: EX_TEMPFAIL (sysexits.h): try again later. Measured fine but not delivered (the run is kept in the spool for
#: ``push`` to send), or, at ``--priority low``, the host was too busy to measure (nothing measured).
EXIT_KEPT = 75
#: EX_CONFIG (sysexits.h): the collector refused the token, or the URL is not a flopfleet collector; found before
#: anything was measured. Unlike 75, trying again will not help: a scheduler should not retry.
EXIT_REFUSED = 78

app = typer.Typer(
    name="flopfleet-agent",
    help="Measure what this machine's GPUs (or CPU) really deliver, and send it to a flopfleet collector.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

# Each of these is also read from FLOPFLEET_<NAME> and the config file (agent/settings.py: flags > env > file).
CollectorOpt = Annotated[
    str | None, typer.Option("--collector", metavar="URL", help="Collector base URL (env FLOPFLEET_COLLECTOR).")
]
TokenOpt = Annotated[
    str | None,
    typer.Option("--token", help="Bearer token for writes (env FLOPFLEET_TOKEN); prefer --token-file.",
                 show_default=False),
]  # fmt: skip
TokenFileOpt = Annotated[
    Path | None, typer.Option("--token-file", help="File holding the token (env FLOPFLEET_TOKEN_FILE).")
]
SpoolOpt = Annotated[
    Path | None,
    typer.Option("--spool-dir", help="Where undelivered runs wait (env FLOPFLEET_SPOOL_DIR; default: cache)."),
]
DeviceOpt = Annotated[str | None, typer.Option(help="cuda or cpu (default: cuda when present)")]
GpusOpt = Annotated[str | None, typer.Option(help="GPU indices, e.g. 0,1 (default: all)")]
TagOpt = Annotated[list[str] | None, typer.Option(metavar="KEY=VALUE", help="A label stored with the run; repeatable.")]
CaseTimeoutOpt = Annotated[
    float | None, typer.Option(help="Seconds a case may make no progress before it counts as a hang.")
]
WhenBusyOpt = Annotated[
    str | None,
    typer.Option(help="A GPU another process uses: skip (reported 'skipped', the default), wait or measure."),
]
BusyWaitOpt = Annotated[float | None, typer.Option(help="Seconds --when-busy wait waits (default: 600).")]
PriorityOpt = Annotated[
    str | None,
    typer.Option(
        help="The agent's CPU and I/O priority: normal (the default) or low (nice 19, idle I/O: a busy "
        "host is then skipped, waited for or measured as --when-busy says)."
    ),
]
JitterOpt = Annotated[
    float | None,
    typer.Option(help="Start after a random delay of up to this many seconds, so that agents started together "
                      "(a CronJob, cron) do not post together (default 0)."),
]  # fmt: skip
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="Settings file (TOML) (env FLOPFLEET_CONFIG; default: /etc/flopfleet/agent.toml)."),
]


def _names(values: list[str]) -> tuple[str, ...]:
    return tuple(n.strip() for v in values for n in v.split(",") if n.strip())


def _settings(config: Path | None, token: str | None, **flags: object) -> Resolved:
    """Flags (None: not given) over FLOPFLEET_<NAME> over the config file over the defaults; paths as text, as a
    file or the environment gives them."""
    from .settings import resolve

    given = {k: str(v) if isinstance(v, Path) else v for k, v in flags.items()}
    return resolve(given, os.environ, config, token)


def _upload_config(settings: Resolved) -> UploadConfig:
    spool = settings["spool_dir"]
    return UploadConfig(
        collector_url=settings["collector"],
        token=settings.token,
        spool_dir=Path(spool) if spool else default_spool_dir(os.environ),
    )


def _tags(settings: Resolved, flags: list[str] | None) -> dict[str, str]:
    """The configured tags, then the command's ``--tag`` over them; each checked as ``--tag`` is."""
    return parse_tags([*(f"{k}={v}" for k, v in settings["tags"].items()), *(flags or [])])


class _CaseColumn(ProgressColumn):
    """The benchmark and case being measured, as plain text (a TextColumn would read them as markup)."""

    def render(self, task: Task) -> Text:
        return Text.assemble(literal(task.fields.get("bench", ""), "bold"), " ", literal(task.description))


@contextmanager
def _progress(*, disable: bool) -> Iterator[Callable[[object], None]]:
    """A progress bar on stderr while cases are measured, fed by the runner's events (gone once done)."""
    with Progress(_CaseColumn(), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True,
                  disable=disable) as progress:  # fmt: skip
        task = progress.add_task("", total=None, bench="planning")
        said: set[str] = set()

        def on_event(event: object) -> None:
            from .run.runner import CaseEvent

            assert isinstance(event, CaseEvent)
            progress.update(
                task, total=event.total, completed=event.done, bench=event.benchmark, description=event.label
            )
            if event.result is not None and "starved" in event.result.flags and "starved" not in said:
                said.add("starved")  # at once, not only in the summary: the run may take longer than it should
                err.print(Text.assemble(("note", "yellow"), ": ", literal(render.starved_note(event))))

        yield on_event


def _settle(config: RunConfig, jitter: float) -> None:
    """Before measuring: the random start delay, whether the host lets the agent measure at its priority
    (``starvation.decide_host``, before anything heavy is imported or started: at nice 19 on a busy host torch's
    import alone would take minutes), then that priority (its measuring processes inherit it)."""
    _start_delay(jitter)
    host_busy = decide_host(config.priority, config.when_busy, config.busy_wait_s)
    if host_busy:
        raise HostBusy(host_busy)
    lower_priority(config.priority)


def _first_contact(upload: UploadConfig) -> None:
    """One cheap authenticated request before measuring: a wrong token or URL ends here (``CollectorRefused``); a
    collector that cannot be reached now is said, and the run measured and spooled."""
    if not upload.collector_url:
        return
    from .run.upload import first_contact, new_client

    with new_client() as client:
        note = first_contact(client, upload)
    if note:
        err.print(Text.assemble(("note", "yellow"), ": ", literal(note)))


def _start_delay(jitter: float) -> None:
    """Wait a random time up to ``jitter`` seconds (systemd's RandomizedDelaySec for schedulers that have none)."""
    if jitter < 0 or jitter > 86_400:
        raise ConfigError(f"--jitter {jitter:g} must be a number of seconds in [0, 86400]")
    if jitter:
        import random
        import time

        time.sleep(random.uniform(0, jitter))


def _process_age_s() -> float | None:
    """Seconds since this process started (Linux: /proc), the interpreter's start and imports included."""
    try:
        started_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return round(uptime - started_ticks / os.sysconf("SC_CLK_TCK"), 2)


def _default_device() -> str:
    from .devices.target import default_device

    return default_device()


@app.command()
def info(
    as_json: Annotated[bool, typer.Option("--json", help="Print the machine as the wire schema's JSON.")] = False,
    device: DeviceOpt = None,
) -> None:
    """Show this machine: software versions and, per GPU, memory, clocks, power limit and PCIe link."""
    from .run.describe import describe_machine

    machine = describe_machine(device or _default_device())
    if as_json:
        sys.stdout.write(machine.model_dump_json(indent=2) + "\n")
    else:
        out.print(render.machine_table(machine))


@app.command("list")
def list_benchmarks(
    suite: Annotated[str, typer.Option(help="quick, standard, full or health")] = "standard",
    device: DeviceOpt = None,
) -> None:
    """List every benchmark in a suite with its cases (the names --only and --skip take)."""
    from .harness.suites import suite as find_suite
    from .run.session import targets_for

    chosen = find_suite(suite)
    benchmarks = chosen.benchmarks()
    from .run.runner import cases_of, span_of

    targets = targets_for(RunConfig(suite=suite, device=device or _default_device(), gpus=None))
    cases = {b.NAME: [c.label for c in cases_of(b, targets[0], span_of(targets))] for b in benchmarks}
    out.print(render.benchmarks_table(chosen, benchmarks, cases))


@app.command()
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
    from .distributed.nodes import Nodes, from_launcher
    from .run.session import execute

    settings = _settings(config, token, suite=suite, device=device, gpus=gpus, collector=collector,
                         token_file=token_file, spool_dir=spool_dir,
                         time_budget=time_budget, attn=attn, parallel=parallel, isolation=isolation,
                         case_timeout=case_timeout, when_busy=when_busy, busy_wait=busy_wait,
                         priority=priority, jitter=jitter)  # fmt: skip
    run_config = RunConfig(
        suite=settings["suite"],
        device=settings["device"] or _default_device(),
        gpus=parse_gpus(settings["gpus"]),
        only=_names(only or []),
        skip=_names(skip or []),
        time_budget_s=settings["time_budget"],
        attn_implementation=settings["attn"],
        tags=_tags(settings, tag),
        output=output,
        upload=_upload_config(settings),
        nodes=from_launcher(os.environ)
        if nodes_from_env
        else Nodes(count=nnodes, rank=node_rank, master_addr=master_addr, master_port=master_port),
        parallel=settings["parallel"],
        isolation=settings["isolation"],
        case_timeout_s=settings["case_timeout"],
        when_busy=check_when_busy(settings["when_busy"]),
        busy_wait_s=settings["busy_wait"],
        priority=check_priority(settings["priority"]),
    )
    _first_contact(run_config.upload)
    _settle(run_config, settings["jitter"])
    with stopping_on_signals(Stop()) as stop:  # a signal stops the measuring; the run is still written and posted
        with _progress(disable=quiet) as on_event:
            submission = execute(run_config, on_event, stop)
        _keep(submission, run_config, stop)


def _keep(submission: RunSubmission, run_config: RunConfig, stop: Stop) -> None:
    """Show, write and post a run; the exit code says what became of it (and of a run told to stop)."""
    from .run.upload import deliver

    out.print(render.summary_table(submission))
    for line in render.problems(submission):
        err.print(Text.assemble(("note", "yellow"), ": ", line))
    if run_config.output is not None:
        run_config.output.parent.mkdir(parents=True, exist_ok=True)
        run_config.output.write_text(submission.model_dump_json(indent=1), encoding="utf-8")
        out.print(literal(f"run written to {run_config.output}"))
    if run_config.upload.collector_url:
        from .run.upload import new_client

        # Told to stop, the agent has moments before SIGKILL (Slurm's KillWait, Kubernetes' grace period: 30 s by
        # default): one attempt, then the spool.
        upload = replace(run_config.upload, retries=1) if stop.requested else run_config.upload
        with new_client() as client:
            delivery = deliver(submission, upload, client)
        delivered = delivery.status in ("sent", "duplicate")
        (out if delivered else err).print(render.delivery_line(delivery))
        if not delivered:
            raise typer.Exit(EXIT_KEPT if delivery.status == "spooled" else EXIT_FAILED)
    if stop.requested:
        raise typer.Exit(stop.exit_code)


class _CheckCommand(TyperCommand):
    """``check``'s bad options exit 3 (UNKNOWN), not click's 2, which is CRITICAL to a prolog, Slurm or NPD: a
    mistyped option must never read as a bad GPU."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except UsageError as exc:
            exc.exit_code = EXIT_CODES[Level.unknown]
            raise


@app.command(cls=_CheckCommand)
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

    from .run.check import CheckConfig, baselines_for
    from .run.check import check as run_check
    from .run.session import execute
    from .run.upload import new_client

    try:
        # The profile is check's own (--suite only): a configured suite is run's.
        settings = _settings(config, token, device=device, gpus=gpus, collector=collector,
                             token_file=token_file, spool_dir=spool_dir, case_timeout=case_timeout,
                             when_busy=when_busy, busy_wait=busy_wait, priority=priority,
                             jitter=jitter)  # fmt: skip
        check_config = CheckConfig(
            run=RunConfig(
                suite=suite,
                device=settings["device"] or _default_device(),
                gpus=parse_gpus(settings["gpus"]),
                tags={"check": "profile", **_tags(settings, tag)},
                upload=replace(_upload_config(settings), retries=1),
                case_timeout_s=settings["case_timeout"],
                when_busy=check_when_busy(settings["when_busy"]),
                busy_wait_s=settings["busy_wait"],
                priority=check_priority(settings["priority"]),
            ),
            from_collector=from_collector,
            remeasure=remeasure,
            measure_cpu=settings["device"] == "cpu",
            baselines=baselines_for(baseline),
        )
        if not from_collector:
            _first_contact(check_config.run.upload)
        _settle(check_config.run, settings["jitter"])

        def machine_gpus() -> tuple[Gpu, ...]:
            from .run.describe import describe_machine

            return describe_machine(check_config.run.device).gpus

        # Progress only where a person watches (a terminal): a prolog's or a timer's log gets the verdict lines alone.
        with new_client() as client, _progress(disable=not err.is_terminal) as on_event:
            outcome = run_check(check_config, client, lambda run: execute(run, on_event), machine_gpus)
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
            "seconds": {**outcome.seconds, "process": _process_age_s()},
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
def push(
    collector: CollectorOpt = None,
    token: TokenOpt = None,
    token_file: TokenFileOpt = None,
    config: ConfigOpt = None,
    spool_dir: SpoolOpt = None,
) -> None:
    """Send every spooled run to the collector; each file is removed only on the collector's receipt for it.

    Exits 75 when a run is still spooled, 1 when a spool entry is not a readable run (skipped or failed).
    """
    from .run.upload import new_client
    from .run.upload import push as push_spooled

    settings = _settings(config, token, collector=collector, token_file=token_file,
                         spool_dir=spool_dir)  # fmt: skip
    upload = _upload_config(settings)
    if not upload.collector_url:
        raise AgentError("push needs --collector URL (or FLOPFLEET_COLLECTOR, or collector in the config file)")
    with new_client() as client:
        deliveries = push_spooled(upload, client)
    if not deliveries:
        out.print(literal(f"nothing spooled in {upload.spool_dir}"))
    for delivery in deliveries:
        (out if delivery.status in ("sent", "duplicate") else err).print(render.delivery_line(delivery))
    statuses = {d.status for d in deliveries}
    if statuses & {"failed", "skipped"}:
        raise typer.Exit(EXIT_FAILED)  # a person has to look: sending again will not help
    if "spooled" in statuses:
        raise typer.Exit(EXIT_KEPT)


config_app = typer.Typer(help="The agent's settings: file, environment and flags.", no_args_is_help=True)
app.add_typer(config_app, name="config")


@config_app.command("show")
def config_show(
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print them as JSON, for programs.")] = False,
) -> None:
    """Print every setting in force and where it came from (flag, env, file or default); the token only as set."""
    import json

    settings = _settings(config, None)
    if as_json:
        body = {
            "file": str(settings.file) if settings.file else None,
            "settings": {k: {"value": settings[k], "source": settings.sources[k]} for k in KEYS},
            "token": {"set": settings.token is not None, "source": settings.token_source},
        }
        sys.stdout.write(json.dumps(body, indent=1) + "\n")
        return
    out.print(render.settings_table(settings))


@app.command()
def version() -> None:
    """Print the agent's version."""
    out.print(__version__)


def main() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if os.environ.get("FLOPFLEET_PLUGINS"):
            from .harness.plugins import load_plugins

            load_plugins(os.environ)
        plain_help(app)()
    except (CollectorRefused, HostBusy) as exc:  # 78: permanent; 75: try again later, nothing measured
        err.print(Text.assemble(("error", "red"), ": ", literal(exc)), soft_wrap=True)
        sys.exit(EXIT_REFUSED if isinstance(exc, CollectorRefused) else EXIT_KEPT)
    except AgentError as exc:
        err.print(Text.assemble(("error", "red"), ": ", literal(exc)), soft_wrap=True)  # one line, unwrapped
        sys.exit(EXIT_FAILED)

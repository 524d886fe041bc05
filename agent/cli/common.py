"""What the commands share: exit codes, the consoles, and the steps from options to a config and from a config to
the moment measuring may start."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TimeElapsedColumn
from rich.text import Text

from schemas.terminal import console, literal

from ..errors import ConfigError, HostBusy
from ..machine.occupancy import check_when_busy
from ..machine.priority import apply as lower_priority
from ..machine.priority import check_priority
from ..run.config import RunConfig, UploadConfig, default_spool_dir, parse_gpus, parse_tags
from ..timing.starvation import decide_host
from . import render
from .settings import Resolved

#: Bad options, no such device, a run that could not even be spooled, a spool entry that is not a readable run.
EXIT_FAILED = 1
#: EX_TEMPFAIL (sysexits.h): try again later. Measured fine but not delivered (the run is kept in the spool for
#: ``push`` to send), or, at ``--priority low``, the host was too busy to measure (nothing measured).
EXIT_KEPT = 75
#: EX_CONFIG (sysexits.h): the collector refused the token, or the URL is not a flopfleet collector (found before
#: anything was measured), or it is too old for the run (kept in the spool, held until it is upgraded:
#: docs/contract.md). Unlike 75, trying again will not help: a scheduler should not retry.
EXIT_REFUSED = 78

out = console()
err = console(stderr=True)


def names(values: list[str]) -> tuple[str, ...]:
    return tuple(n.strip() for v in values for n in v.split(",") if n.strip())


def resolved(config: Path | None, token: str | None, **flags: object) -> Resolved:
    """Flags (None: not given) over FLOPFLEET_<NAME> over the config file over the defaults; paths as text, as a
    file or the environment gives them."""
    from .settings import resolve

    given = {k: str(v) if isinstance(v, Path) else v for k, v in flags.items()}
    return resolve(given, os.environ, config, token)


def upload_config(settings: Resolved) -> UploadConfig:
    spool = settings["spool_dir"]
    return UploadConfig(
        collector_url=settings["collector"],
        token=settings.token,
        spool_dir=Path(spool) if spool else default_spool_dir(os.environ),
    )


def tags(settings: Resolved, flags: list[str] | None) -> dict[str, str]:
    """The configured tags, then the command's ``--tag`` over them; each checked as ``--tag`` is."""
    return parse_tags([*(f"{k}={v}" for k, v in settings["tags"].items()), *(flags or [])])


def default_device() -> str:
    from ..devices.target import default_device

    return default_device()


def run_config(
    settings: Resolved, *, suite: str, tags: dict[str, str], upload: UploadConfig | None = None, **own: Any
) -> RunConfig:
    """The one step from resolved options to a ``RunConfig`` that ``run`` and ``check`` share: the device, its GPUs,
    the tags, the upload (``upload_config`` unless given), the hang limit, busy GPUs and the priority; ``own`` holds
    the fields one command sets alone."""
    return RunConfig(
        suite=suite,
        device=settings["device"] or default_device(),
        gpus=parse_gpus(settings["gpus"]),
        tags=tags,
        upload=upload if upload is not None else upload_config(settings),
        case_timeout_s=settings["case_timeout"],
        when_busy=check_when_busy(settings["when_busy"]),
        busy_wait_s=settings["busy_wait"],
        priority=check_priority(settings["priority"]),
        **own,
    )


def first_contact(upload: UploadConfig) -> None:
    """One cheap authenticated request before measuring: a wrong token or URL ends here (``CollectorRefused``); a
    collector that cannot be reached now is said, and the run measured and spooled."""
    if not upload.collector_url:
        return
    from ..run.contact import first_contact
    from ..run.upload import new_client

    with new_client() as client:
        note = first_contact(client, upload)
    if note:
        err.print(Text.assemble(("note", "yellow"), ": ", literal(note)))


def settle(config: RunConfig, jitter: float) -> None:
    """Before measuring: the random start delay, then the host and the priority (``ready_host``)."""
    start_delay(jitter)
    ready_host(config)


def ready_host(config: RunConfig) -> None:
    """Whether the host lets the agent measure at its priority (``starvation.decide_host``), then that priority (its
    measuring processes inherit it); before anything heavy is imported or started: at nice 19 on a busy host torch's
    import alone would take minutes."""
    host_busy = decide_host(config.priority, config.when_busy, config.busy_wait_s)
    if host_busy:
        raise HostBusy(host_busy)
    lower_priority(config.priority)


def start_delay(jitter: float) -> None:
    """Wait a random time up to ``jitter`` seconds (systemd's RandomizedDelaySec for schedulers that have none)."""
    if jitter < 0 or jitter > 86_400:
        raise ConfigError(f"--jitter {jitter:g} must be a number of seconds in [0, 86400]")
    if jitter:
        import random
        import time

        time.sleep(random.uniform(0, jitter))


class _CaseColumn(ProgressColumn):
    """The benchmark and case being measured, as plain text (a TextColumn would read them as markup)."""

    def render(self, task: Task) -> Text:
        return Text.assemble(literal(task.fields.get("bench", ""), "bold"), " ", literal(task.description))


@contextmanager
def progress(*, disable: bool) -> Iterator[Callable[[object], None]]:
    """A progress bar on stderr while cases are measured, fed by the runner's events (gone once done)."""
    with Progress(_CaseColumn(), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=True,
                  disable=disable) as bar:  # fmt: skip
        task = bar.add_task("", total=None, bench="planning")
        said: set[str] = set()

        def on_event(event: object) -> None:
            from ..run.runner import CaseEvent

            assert isinstance(event, CaseEvent)
            bar.update(task, total=event.total, completed=event.done, bench=event.benchmark, description=event.label)
            if event.result is not None and "starved" in event.result.flags and "starved" not in said:
                said.add("starved")  # at once, not only in the summary: the run may take longer than it should
                err.print(Text.assemble(("note", "yellow"), ": ", literal(render.starved_note(event))))

        yield on_event

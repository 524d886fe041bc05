"""The options several commands share, each also read from FLOPFLEET_<NAME> and the config file (``settings``:
flags > env > file)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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

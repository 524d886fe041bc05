"""``push`` and ``config show``: the spool sent on, and the settings in force."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from schemas.terminal import literal

from ..errors import AgentError
from . import render
from .common import EXIT_FAILED, EXIT_KEPT, EXIT_REFUSED, err, out, resolved, upload_config
from .options import CollectorOpt, ConfigOpt, SpoolOpt, TokenFileOpt, TokenOpt
from .settings import KEYS


def push(
    collector: CollectorOpt = None,
    token: TokenOpt = None,
    token_file: TokenFileOpt = None,
    config: ConfigOpt = None,
    spool_dir: SpoolOpt = None,
) -> None:
    """Send every spooled run to the collector; each file is removed only on the collector's receipt for it.

    A run the collector is too old for (it says which contract it reads) is held: kept, and not sent until the
    collector reads it. Exits 75 when a run is still spooled, 78 when one is held, 1 when a spool entry is not a
    readable run (skipped or failed).
    """
    from ..run.upload import new_client
    from ..run.upload import push as push_spooled

    settings = resolved(config, token, collector=collector, token_file=token_file,
                        spool_dir=spool_dir)  # fmt: skip
    upload = upload_config(settings)
    if not upload.collector_url:
        raise AgentError("push needs --collector URL (or FLOPFLEET_COLLECTOR, or collector in the config file)")
    with new_client() as client:
        deliveries = push_spooled(upload, client)
    if not deliveries:
        out.print(literal(f"nothing spooled in {upload.spool_dir}"))
    said: set[str] = set()
    for delivery in deliveries:
        if delivery.status == "held":  # why, once for the runs it holds
            if delivery.detail not in said:
                said.add(delivery.detail)
                err.print(literal(f"held, not sent: {delivery.detail}; the runs stay in the spool", "bold"))
            err.print(literal(f"run {delivery.run_id}: held, kept at {delivery.path}"))
            continue
        (out if delivery.status in ("sent", "duplicate") else err).print(render.delivery_line(delivery))
    statuses = {d.status for d in deliveries}
    if statuses & {"failed", "skipped"}:
        raise typer.Exit(EXIT_FAILED)  # a person has to look: sending again will not help
    if "held" in statuses:
        raise typer.Exit(EXIT_REFUSED)  # the collector must be upgraded first
    if "spooled" in statuses:
        raise typer.Exit(EXIT_KEPT)


def config_show(
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print them as JSON, for programs.")] = False,
) -> None:
    """Print every setting in force and where it came from (flag, env, file or default); the token only as set."""
    import json

    settings = resolved(config, None)
    if as_json:
        body = {
            "file": str(settings.file) if settings.file else None,
            "settings": {k: {"value": settings[k], "source": settings.sources[k]} for k in KEYS},
            "token": {"set": settings.token is not None, "source": settings.token_source},
        }
        sys.stdout.write(json.dumps(body, indent=1) + "\n")
        return
    out.print(render.settings_table(settings))

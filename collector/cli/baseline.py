"""``flopfleet-collector baseline``: export this fleet's baselines, import others', list and remove them."""

from __future__ import annotations

import json
import socket
import sys
from datetime import date
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from schemas.baselines import BaselineError, dump_bundle, parse_bundle
from schemas.terminal import literal

from ..store.errors import CollectorError
from ..web.errors import InvalidBaseline
from .common import CreateOpt, DbOpt, TableOrJson, TableOrJsonOpt, err, open_store, out, settings_for

baseline_app = typer.Typer(
    help="Per-model baselines: export this fleet's, import others' (checked), list, show and remove them.",
    no_args_is_help=True,
)


class BaselineFormat(str, Enum):
    flopfleet = "flopfleet"
    superbench = "superbench"
    azure_nhc = "azure-nhc"


@baseline_app.command("export")
def export_cmd(
    db: DbOpt = Path("flopfleet.duckdb"),
    model: Annotated[str | None, typer.Option(help="Only cards matching this regex, e.g. 'H100.*HBM3'.")] = None,
    since: Annotated[str | None, typer.Option(help="Only runs started on or after this day (YYYY-MM-DD).")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Only runs carrying this key=value tag; repeatable.")] = None,
    suite: Annotated[str | None, typer.Option(help="Only runs of this suite (health, standard, ...).")] = None,
    name: Annotated[
        str | None, typer.Option(help="The bundle's name (default: the collector's host and date).")
    ] = None,
    source: Annotated[str | None, typer.Option(help="Who exports it (default: this host's name).")] = None,
    fmt: Annotated[
        BaselineFormat, typer.Option("--format", help="flopfleet (JSON bundle), superbench or azure-nhc.")
    ] = BaselineFormat.flopfleet,
    output: Annotated[
        Path | None, typer.Option(help="File to write (a folder for superbench); default: standard output.")
    ] = None,
) -> None:
    """This fleet's baselines from healthy runs only, each GPU weighted once; a card with too little data is left
    out, with the reason (and the export fails when nothing is left)."""
    from ..analysis import baseline_formats
    from ..analysis.baselines import parse_tags
    from ..read.export import export_baseline

    try:
        day = date.fromisoformat(since) if since else None
    except ValueError:
        raise CollectorError(f"--since wants a day as YYYY-MM-DD, got {since!r}") from None
    host = socket.gethostname()
    with settings_for(db).open_store(read_only=True) as store:
        exported = export_baseline(
            store.reads(), name=name or f"{host} {date.today():%Y-%m-%d}", collector=source or host, model=model,
            since=day, tags=parse_tags(tag or []), suite=suite,
        )  # fmt: skip
    for why in exported.left_out:
        err.print(literal(f"left out: {why}"), soft_wrap=True)  # a line each, for grep
    if fmt is BaselineFormat.flopfleet:
        files = {"": dump_bundle(exported.bundle)}
    elif fmt is BaselineFormat.superbench:
        files = baseline_formats.superbench(exported.bundle)
    else:
        files = baseline_formats.azure_nhc(exported.bundle)
    _write(files, output)
    b = exported.bundle
    err.print(literal(f"baseline {b.name!r} ({b.id}): {len(b.cards)} card baseline(s), "
                      f"{sum(len(c.figures) for c in b.cards)} figures"), soft_wrap=True)  # fmt: skip


def _write(files: dict[str, str], output: Path | None) -> None:
    """One text to a file or standard output (unless --output is a folder); several to a folder."""
    if len(files) == 1 and (output is None or not output.is_dir()):
        (text,) = files.values()
        if output is None:
            sys.stdout.write(text)
        else:
            output.write_text(text, encoding="utf-8")
        return
    if output is None:
        raise CollectorError(f"this export is {len(files)} files ({', '.join(files)}): give --output FOLDER")
    output.mkdir(parents=True, exist_ok=True)
    for filename, text in files.items():
        (output / filename).write_text(text, encoding="utf-8")
        err.print(literal(f"wrote {output / filename}"), soft_wrap=True)


@baseline_app.command("import")
def import_cmd(
    files: Annotated[list[Path], typer.Argument(help="Baseline bundles (JSON) exported by a flopfleet collector.")],
    db: DbOpt = Path("flopfleet.duckdb"),
    sha256: Annotated[
        str | None, typer.Option(help="Refuse the bundle unless its sha256 starts with this (from its publisher).")
    ] = None,
    create: CreateOpt = False,
) -> None:
    """Import baselines, each checked first (format, schema version, fields, content hash): a bundle that fails is
    refused whole and nothing of it is stored."""
    bundles = []
    for path in files:
        try:
            bundles.append(parse_bundle(path.read_bytes(), expect_sha256=sha256))
        except OSError as exc:
            raise CollectorError(f"cannot read {path}: {exc}") from exc
        except BaselineError as exc:
            raise InvalidBaseline(f"{path}: {exc}") from None
    with open_store(settings_for(db, create=create or None)) as store:
        for path, bundle in zip(files, bundles, strict=True):
            status = store.add_baseline(bundle)
            cards = ", ".join(sorted({c.card for c in bundle.cards}))
            out.print(literal(f"{path}: baseline {bundle.name!r} ({bundle.id}) {status}: {cards}"), soft_wrap=True)


@baseline_app.command("list")
def list_cmd(
    db: DbOpt = Path("flopfleet.duckdb"),
    fmt: TableOrJsonOpt = TableOrJson.table,
) -> None:
    """Every baseline this collector holds (bundled and imported): its cards, suites, GPUs and runs."""
    with settings_for(db).open_store(read_only=True) as store:
        rows = store.reads().baseline_list()
    if fmt is TableOrJson.json:
        sys.stdout.write(json.dumps(rows, default=str, indent=1) + "\n")
        return
    table = Table("id", "name", "origin", "kind", "cards", "suites", "GPUs", "runs", "measured", header_style="bold")
    for r in rows:
        period = f"{r['first_day']} to {r['last_day']}" if r["first_day"] else "published"
        table.add_row(literal(r["id"][:12]), literal(r["name"]), literal(r["origin"]), literal(r["kind"] or ""),
                      literal(", ".join(r["cards"])), literal(", ".join(s for s in r["suites"] if s)),
                      str(r["gpus"] or 0), str(r["runs"] or 0), literal(period))  # fmt: skip
    out.print(table)


@baseline_app.command("show")
def show_cmd(
    ident: Annotated[str, typer.Argument(help="The baseline's id (or its start) or name.")],
    db: DbOpt = Path("flopfleet.duckdb"),
) -> None:
    """A stored baseline as its bundle file, hash unchanged: what `import` on another collector takes."""
    with settings_for(db).open_store(read_only=True) as store:
        sys.stdout.write(store.baseline_bundle(ident))


@baseline_app.command("remove")
def remove_cmd(
    ident: Annotated[str, typer.Argument(help="The baseline's id (or its start) or name.")],
    db: DbOpt = Path("flopfleet.duckdb"),
) -> None:
    """Remove an imported baseline (bundled ones stay)."""
    with settings_for(db).open_store(new_ok=False) as store:
        found, name = store.remove_baseline(ident)
    out.print(literal(f"removed baseline {name!r} ({found[:12]})"), soft_wrap=True)

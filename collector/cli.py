"""``flopfleet-collector``: serve, ingest, report, sql, schema. Parses flags, calls plain functions, renders."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from . import __version__
from .errors import CollectorError

EXIT_FAILED = 1

app = typer.Typer(
    name="flopfleet-collector",
    help="Store flopfleet runs in DuckDB, compare cards, serve reports and SQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

DbOpt = Annotated[Path, typer.Option("--db", envvar="FLOPFLEET_DB", help="The DuckDB file.")]


@app.command()
def serve(
    db: DbOpt = Path("flopfleet.duckdb"),
    host: Annotated[str | None, typer.Option(help="Interface to listen on [default: 127.0.0.1].")] = None,
    port: Annotated[int | None, typer.Option(help="Port; 0 picks a free one [default: 8000].")] = None,
    port_file: Annotated[Path | None, typer.Option(help="Write the bound port here once listening.")] = None,
    log_level: Annotated[str | None, typer.Option(help="uvicorn log level [default: info].")] = None,
) -> None:
    """Run the collector's HTTP API and report pages (FastAPI on uvicorn)."""
    import uvicorn

    from .app import create_app
    from .settings import Settings

    settings = Settings.from_env(os.environ, db=db, host=host, port=port, log_level=log_level)
    sock = socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((settings.host, settings.port))
    bound = sock.getsockname()[1]
    config = uvicorn.Config(create_app(settings), log_level=settings.log_level, timeout_graceful_shutdown=30)
    server = uvicorn.Server(config)
    if port_file is not None:
        port_file.write_text(str(bound), encoding="utf-8")
    err.print(f"flopfleet collector {__version__} on http://{settings.host}:{bound} (db {settings.db})")
    server.run(sockets=[sock])


@app.command()
def ingest(
    files: Annotated[list[Path], typer.Argument(help="Run JSON files written by flopfleet-agent --output.")],
    db: DbOpt = Path("flopfleet.duckdb"),
) -> None:
    """Store run files without a server, with the same validation as the HTTP API."""
    from .store import Store
    from .validation import parse_run

    failed = 0
    with Store(db) as store:
        for path in files:
            try:
                stored = store.add_run(parse_run(path.read_bytes()))
            except (OSError, CollectorError) as exc:
                failed += 1
                err.print(f"[red]{path}[/]: {exc}")
                continue
            out.print(f"{path}: run {stored.run_id} {stored.status} ({stored.results} results)")
    if failed:
        raise typer.Exit(EXIT_FAILED)


@app.command()
def report(
    db: DbOpt = Path("flopfleet.duckdb"),
    fmt: Annotated[str, typer.Option("--format", help="md or html")] = "html",
    output: Annotated[Path | None, typer.Option(help="Write here instead of standard output.")] = None,
) -> None:
    """The cross-card comparison: a Markdown table, or one self-contained HTML page with charts."""
    from .report import build_report
    from .store import Store

    if fmt not in ("md", "html"):
        raise CollectorError(f"--format {fmt!r} is not one of: md, html")
    with Store(db, read_only=True) as store:
        text = build_report(store.cursor(), fmt)  # type: ignore[arg-type]
    if output is None:
        sys.stdout.write(text)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
        out.print(f"report written to {output}")


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help='One SELECT statement, e.g. "SELECT * FROM cards".')],
    db: DbOpt = Path("flopfleet.duckdb"),
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json")] = "table",
    max_rows: Annotated[int, typer.Option(help="Stop after this many rows.")] = 10_000,
) -> None:
    """Query the database read-only; views: cards, matmul, bandwidth, transfers, layers, training, mamf."""
    from .render.query import render_query
    from .sqlguard import run_query
    from .store import Store

    if fmt not in ("table", "csv", "json"):
        raise CollectorError(f"--format {fmt!r} is not one of: table, csv, json")
    with Store(db, read_only=True) as store:
        result = run_query(store.cursor(), query, max_rows=max_rows)
    render_query(result, fmt, out)  # type: ignore[arg-type]
    if result.truncated:
        err.print(f"[yellow]note[/]: stopped after {max_rows} rows (--max-rows)")


@app.command()
def schema(output: Annotated[Path | None, typer.Option(help="Write here instead of standard output.")] = None) -> None:
    """Print the JSON Schema of a run (the wire contract), generated from the models."""
    from schemas.jsonschema import render_json_schema

    text = render_json_schema()
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")


@app.command()
def version() -> None:
    """Print the collector's version."""
    out.print(__version__)


def main() -> None:
    try:
        app()
    except CollectorError as exc:
        err.print(f"[red]error[/]: {exc.message}")
        sys.exit(EXIT_FAILED)

"""``flopfleet-collector``: serve, ingest, report, sql, schema. Parses flags, calls plain functions, renders."""

from __future__ import annotations

import socket
import sys
from contextlib import closing
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from schemas.helpscreen import plain_help
from schemas.labels import HOSTNAME
from schemas.terminal import LEVEL_STYLE, literal

from .. import __version__
from ..store.errors import CollectorError, DatabaseBusy
from ..store.sqlviews import ABOUT, EVERY_RESULT, FIGURE_VIEWS, TRUSTED_WORDS, UNDER
from .baseline import baseline_app
from .common import CreateOpt, DbOpt, TableOrJson, TableOrJsonOpt, err, open_store, out, settings_for
from .prices import prices_app
from .remote import ask_sql, download_snapshot
from .token import token_app

if TYPE_CHECKING:
    from ..store import Store
    from ..store.commits import Stored
    from ..web.settings import Settings

EXIT_FAILED = 1

app = typer.Typer(
    name="flopfleet-collector",
    help="Store flopfleet runs in DuckDB, compare cards, serve reports and SQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class ReportFormat(str, Enum):
    md = "md"
    html = "html"


class QueryFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


class ExportFormat(str, Enum):
    parquet = "parquet"
    csv = "csv"


@app.command()
def serve(
    db: DbOpt = Path("flopfleet.duckdb"),
    host: Annotated[str | None, typer.Option(help="Interface to listen on (default: 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port; 0 picks a free one (default: 8000).")] = None,
    port_file: Annotated[Path | None, typer.Option(help="Write the bound port here once listening.")] = None,
    read_token_required: Annotated[
        bool, typer.Option("--read-token-required", help="Reads (reports, runs, SQL, metrics) need a token too.")
    ] = False,
    public_reads: Annotated[
        bool, typer.Option("--public-reads", help="Reads need no token even off loopback.")
    ] = False,
    log_level: Annotated[str | None, typer.Option(help="debug, info, warning (default: info).")] = None,
    log_format: Annotated[str | None, typer.Option(help="json or text (default: json).")] = None,
    create: CreateOpt = False,
) -> None:
    """Run the collector's HTTP API and report pages (FastAPI on uvicorn); SIGTERM finishes requests in flight."""
    import uvicorn

    from ..web.app import create_app
    from ..web.logs import configure
    from ..web.server import server_config
    from ..web.validation import Validator

    if read_token_required and public_reads:
        raise CollectorError("--read-token-required and --public-reads contradict each other")
    access = "token" if read_token_required else "open" if public_reads else None
    settings = settings_for(db, host=host, port=port, log_level=log_level, log_format=log_format, read_access=access,
                            create=create or None)  # fmt: skip
    configure(settings.log_level, settings.log_format)
    with closing(_bind(settings.host, settings.port)) as sock:  # bound first: a port in use leaves no new database
        # The validation workers import while the database opens; the app waits for them before it is ready.
        validator = Validator(settings.validate_workers)
        validator.launch()
        try:
            # Opened before anything listens: a file in use, damaged or newer, or a missing folder, is refused in
            # one line (exit codes in ``errors``), not as the last line of a traceback from the app's start-up.
            store = open_store(settings)
        except BaseException:
            validator.stop()
            raise
        try:
            store.harden(settings.duckdb_memory_limit())
            bound = sock.getsockname()[1]
            app = create_app(settings, store, close_store=True, validator=validator)
            server = uvicorn.Server(server_config(app, settings))
            ready = f"flopfleet collector {__version__} on http://{settings.host}:{bound} (db {settings.db})"
            err.print(literal(ready))
            if port_file is not None:  # last: whoever waits for the file finds the line above already written
                port_file.write_text(str(bound), encoding="utf-8")
            server.run(sockets=[sock])
        finally:  # if it never got to the app's shutdown (stopping and closing twice are harmless)
            validator.stop()
            store.close()


def _bind(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:  # a port in use, an address this machine does not have
        sock.close()
        raise CollectorError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


@app.command()
def ingest(
    files: Annotated[list[Path], typer.Argument(help="Run JSON files written by flopfleet-agent --output.")],
    db: DbOpt = Path("flopfleet.duckdb"),
    create: CreateOpt = False,
) -> None:
    """Store run files without a server, with the same validation as the HTTP API."""
    failed = 0
    with open_store(settings_for(db, create=create or None)) as store:
        for path in files:
            try:
                stored, notes = _ingest_one(store, path)
            except (OSError, CollectorError) as exc:
                failed += 1
                err.print(Text.assemble(literal(path, "red"), ": ", literal(exc)))
                continue
            out.print(literal(f"{path}: run {stored.run_id} {stored.status} ({stored.results} results)"))
            for note in notes:
                out.print(literal(f"{path}: not understood: {note}"))
    if failed:
        raise typer.Exit(EXIT_FAILED)


def _ingest_one(store: Store, path: Path, source: str = "agent") -> tuple[Stored, tuple[str, ...]]:
    """One run file stored as the HTTP API stores it, and what of a newer minor's run this collector did not know."""
    from ..analysis.parse import read_run
    from ..store.commits import compress, digest

    body = path.read_bytes()
    parsed = read_run(body)
    if parsed.document is None:
        return store.add_run(parsed.run, source=source), ()
    # A newer minor's run: kept as sent, its rows what this collector knows of it (docs/contract.md).
    run = parsed.run
    stored = store.submit(parsed.document, run_id=str(run.run_id), results=len(run.results), sha256=digest(body),
                          payload=compress(body), source=source,
                          not_understood=parsed.not_understood).result()  # fmt: skip
    store.settle()
    return stored, parsed.not_understood


PricesOpt = Annotated[
    Path | None, typer.Option("--prices", help="CSV of model,price_usd (model: a regex matched against card names).")
]


@app.command()
def report(
    db: DbOpt = Path("flopfleet.duckdb"),
    fmt: Annotated[ReportFormat, typer.Option("--format", help="Markdown or one HTML page.")] = ReportFormat.html,
    output: Annotated[Path | None, typer.Option(help="Write here instead of standard output.")] = None,
    prices: PricesOpt = None,
    baselines: Annotated[
        bool, typer.Option("--baselines", help="Each card's baseline as a column beside it (with its GPU count).")
    ] = False,
) -> None:
    """The cross-card comparison, fleet health and version changes: Markdown, or one self-contained HTML page."""
    from ..analysis.reference import parse_prices
    from ..read.report import build_report

    extra = parse_prices(prices) if prices else None
    with settings_for(db).open_store(read_only=True) as store:
        text = build_report(store.reads(), fmt.value, prices=extra, baselines=baselines)
    if output is None:
        sys.stdout.write(text)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
        out.print(literal(f"report written to {output}"))


SQL_HELP = (
    "Query the database read-only, with the limits of the HTTP API (FLOPFLEET_SQL_TIMEOUT_S, _MAX_ROWS, _MAX_BYTES, "
    "_MEMORY_LIMIT). While a collector serves the file, DuckDB lets no other process open it: ask that collector "
    "with --collector URL instead (the same query, answered by its SQL API)."
    f"\n\nViews: {', '.join(ABOUT)}; the tables under them: {', '.join(UNDER)}. Their columns: the /sql page, or "
    "\"SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'matmul'\"."
    f"\n\nThe views of results ({', '.join(FIGURE_VIEWS)}) hold trusted results only ({TRUSTED_WORDS}), as the "
    f"report counts them; {' and '.join(EVERY_RESULT)} hold every result, with trusted and flags."
)


@app.command(help=SQL_HELP)
def sql(
    query: Annotated[str, typer.Argument(help='One SELECT statement, e.g. "SELECT * FROM cards".')],
    db: DbOpt = Path("flopfleet.duckdb"),
    fmt: Annotated[QueryFormat, typer.Option("--format", help="How to print the answer.")] = QueryFormat.table,
    max_rows: Annotated[
        int | None, typer.Option(help="Stop after this many rows (default: the sql_max_rows setting, 10,000).")
    ] = None,
    collector: Annotated[
        str | None,
        typer.Option(metavar="URL", help="Ask the collector serving the database at this URL instead of opening --db."),
    ] = None,
    token: Annotated[
        str | None, typer.Option(envvar="FLOPFLEET_TOKEN", help="A token with the read scope, with --collector.")
    ] = None,
) -> None:
    from ..render.query import render_query

    settings = settings_for(db)
    cap = min(max_rows or settings.sql_max_rows, settings.sql_max_rows)
    if collector:
        result = ask_sql(collector, token, query, cap)
    else:
        with _open_for_sql(settings) as store:
            result = store.sql(query, max_rows=cap, timeout_s=settings.sql_timeout_s,
                               max_bytes=settings.sql_max_bytes, max_memory=settings.sql_memory_bytes())  # fmt: skip
    render_query(result, fmt.value, out)
    if result.truncated:
        why = f"{cap} rows (--max-rows)" if result.truncated_by == "max_rows" else "the sql_max_bytes setting"
        err.print(Text.assemble(("note", "yellow"), f": stopped after {why}"))


def _open_for_sql(settings: Settings) -> Store:
    """The database opened read-only (with the server's memory limit, as every command opens it); a file a running
    collector holds is refused with the way to ask that collector instead."""
    try:
        store = settings.open_store(read_only=True)
    except DatabaseBusy as exc:
        raise DatabaseBusy(f"{settings.db} is in use by another process (a running collector?): ask that collector "
                           "with --collector URL (e.g. http://127.0.0.1:8000), or stop it first") from exc  # fmt: skip
    return store


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
def health(
    db: DbOpt = Path("flopfleet.duckdb"),
    fmt: TableOrJsonOpt = TableOrJson.table,
) -> None:
    """Every GPU against its model's other GPUs, its own history, its card's baseline and its model's floor: ok,
    suspect, slow or faulty, and why."""
    from rich.table import Table

    from ..read.views import fleet_health

    with settings_for(db).open_store(read_only=True) as store:
        verdicts = fleet_health(store.reads())
    if fmt is TableOrJson.json:
        sys.stdout.write("[" + ",\n".join(v.wire("collector").model_dump_json() for v in verdicts) + "]\n")
        return
    table = Table("GPU", "card", HOSTNAME, "verdict", "why / likely cause", header_style="bold")
    for v in verdicts:
        why = "; ".join([*v.reasons, *v.causes])
        style = LEVEL_STYLE[v.level.value]
        table.add_row(literal(v.device), literal(v.card), literal(v.hostname), literal(v.text, style), literal(why))
    out.print(table)


@app.command("import-reference")
def import_reference(
    files: Annotated[
        list[Path] | None, typer.Argument(help="Reference tables (CSV) or run JSON files; none: the bundled table.")
    ] = None,
    db: DbOpt = Path("flopfleet.duckdb"),
    create: CreateOpt = False,
) -> None:
    """Import published figures (the transformers-benchmarks README's five cards, bundled) or others' run files,
    labelled as reference rather than measured here."""
    from ..analysis.reference import load

    with open_store(settings_for(db, create=create or None)) as store:
        sources: list[Path | None] = list(files) if files else [None]
        for path in sources:
            if path is not None and path.suffix == ".json":
                stored, _ = _ingest_one(store, path, source="reference")
                out.print(literal(f"{path}: run {stored.run_id} {stored.status} as reference"))
                continue
            values = load(path)
            store.add_reference(values)
            cards = sorted({v.card for v in values})
            source = path or "bundled transformers-benchmarks table"
            out.print(literal(f"{source}: {len(values)} figures for {', '.join(cards)}"))


app.add_typer(prices_app, name="prices")


@app.command("export")
def export_cmd(
    output: Annotated[Path, typer.Option(help="A new or empty folder.")],
    db: DbOpt = Path("flopfleet.duckdb"),
    fmt: Annotated[ExportFormat, typer.Option("--format", help="Parquet files or CSV.")] = ExportFormat.parquet,
) -> None:
    """Every table as Parquet (results partitioned by benchmark) or CSV, for DuckDB, pandas, Spark."""
    from ..render.csvsafe import neutralise_sql
    from ..store import export_tables

    counts = export_tables(settings_for(db).db, fmt.value, output, text_cell=neutralise_sql)
    for table, rows in counts.items():
        out.print(f"{table}: {rows} rows")
    out.print(literal(f"exported to {output}"))


@app.command()
def snapshot(
    output: Annotated[Path, typer.Option(help="The backup file to write (must not exist).")],
    db: DbOpt = Path("flopfleet.duckdb"),
    collector: Annotated[str | None, typer.Option(help="Ask a running collector instead of opening --db.")] = None,
    token: Annotated[
        str | None, typer.Option(envvar="FLOPFLEET_TOKEN", help="A token with the admin scope, with --collector.")
    ] = None,
) -> None:
    """A consistent copy of the database in a new DuckDB file, from the file or from a running collector."""
    if output.exists():
        raise CollectorError(f"{output} exists; a snapshot never overwrites a file")
    if collector:
        download_snapshot(collector, token, output)
    else:
        with settings_for(db).open_store(read_only=True) as store:
            store.snapshot(output)
    out.print(literal(f"snapshot written to {output}"))


@app.command()
def archive(db: DbOpt = Path("flopfleet.duckdb")) -> None:
    """Move raw rows of runs older than FLOPFLEET_RETENTION_DAYS to the Parquet archive now, without a server
    (a running collector does it by itself when idle)."""
    settings = settings_for(db)
    with settings.open_store(new_ok=False) as store:
        moved = store.archive()
    out.print(literal(f"{moved} runs archived to {settings.archive_folder()}"))


@app.command()
def compact(db: DbOpt = Path("flopfleet.duckdb")) -> None:
    """Give back the disk space of archived runs: rewrite the database into a new file and swap it in (DuckDB reuses
    freed space but never shrinks its file). Stop the collector first; the disk needs room for what is kept."""
    from ..store.compact import compact as rewrite

    settings = settings_for(db)
    done = rewrite(settings.db)
    mib = 2**20
    out.print(literal(f"{settings.db}: {done.before / mib:,.0f} MiB before ({done.free_before / mib:,.0f} MiB of it "
                      f"free), {done.after / mib:,.0f} MiB now"))  # fmt: skip


@app.command()
def version() -> None:
    """Print the collector's version."""
    out.print(__version__)


app.add_typer(baseline_app, name="baseline")
app.add_typer(token_app, name="token")


def main() -> None:
    try:
        plain_help(app)()
    except CollectorError as exc:
        # Unwrapped; a message of several lines (DuckDB's hints and the caret under the query) keeps them.
        shown = Text("\n").join(literal(line) for line in exc.message.split("\n"))
        err.print(Text.assemble(("error", "red"), ": ", shown), soft_wrap=True)
        sys.exit(exc.exit_code)

"""``flopfleet-collector prices``: the card prices behind price/performance rows and charts."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from schemas.terminal import literal

from .common import CreateOpt, DbOpt, open_store, out, settings_for

prices_app = typer.Typer(help="Card prices for price/performance rows and charts.", no_args_is_help=True)


@prices_app.command("set")
def prices_set(
    model: Annotated[str, typer.Argument(help="Regex matched against card names, e.g. 'H100.*HBM3'.")],
    price_usd: Annotated[float, typer.Argument(help="Price in US dollars.")],
    db: DbOpt = Path("flopfleet.duckdb"),
    create: CreateOpt = False,
) -> None:
    """Set (or replace) one price."""
    with open_store(settings_for(db, create=create or None)) as store:
        store.set_price(model, price_usd, "cli")
    out.print(literal(f"price of {model!r}: ${price_usd:,.0f}"))


@prices_app.command("import")
def prices_import(
    file: Annotated[Path, typer.Argument()], db: DbOpt = Path("flopfleet.duckdb"), create: CreateOpt = False
) -> None:
    """Set prices from a CSV with columns model,price_usd."""
    from ..analysis.reference import parse_prices

    prices = parse_prices(file)
    with open_store(settings_for(db, create=create or None)) as store:
        for model, usd in prices.items():
            store.set_price(model, usd, str(file))
    out.print(literal(f"{len(prices)} prices from {file}"))


@prices_app.command("list")
def prices_list(db: DbOpt = Path("flopfleet.duckdb")) -> None:
    """The stored prices."""
    from ..render.query import render_query

    settings = settings_for(db)
    with settings.open_store(read_only=True) as store:
        result = store.sql("SELECT model, price_usd, source, updated_at FROM prices ORDER BY 1",
                           max_rows=settings.sql_max_rows, timeout_s=settings.sql_timeout_s,
                           max_bytes=settings.sql_max_bytes)  # fmt: skip
    render_query(result, "table", out)

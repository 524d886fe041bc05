"""``flopfleet-collector token``: create, list and revoke the bearer tokens kept beside a database."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from schemas.terminal import literal

from ..store.dbfile import check_db
from ..store.errors import MissingDatabase
from ..web.tokens import DEFAULT_SCOPES, TokenStore, parse_scopes
from .common import CreateOpt, DbOpt, err, out, settings_for

token_app = typer.Typer(help="Bearer tokens for agents (writes) and readers.", no_args_is_help=True)


def _tokens(db: Path, *, create: bool | None = None, making: bool = False) -> TokenStore:
    """The tokens of ``--db``, kept beside it: its folder must exist (or be created, with ``create``, when
    ``making`` one); the database itself need not yet, as a token is often made before the collector's first start."""
    settings = settings_for(db, create=create)
    if not making and not settings.db.parent.is_dir():  # list, revoke: nothing to create
        raise MissingDatabase(f"folder {settings.db.parent} does not exist (from --db {settings.db}): no tokens there")
    if check_db(settings.db, create=settings.create):
        err.print(
            literal(f"no database at {settings.db} yet: its collector creates it at its first start"), soft_wrap=True
        )
    return TokenStore(settings.db)


@token_app.command("create")
def token_create(
    name: Annotated[str, typer.Option("--name", help="Who uses it, e.g. lab-a or node17.")],
    db: DbOpt = Path("flopfleet.duckdb"),
    scope: Annotated[
        list[str] | None,
        typer.Option(help="write (post runs), read (pages, SQL), admin (snapshots); repeatable (default: write)."),
    ] = None,
    create: CreateOpt = False,
) -> None:
    """Print a new token, once (only its hash is kept). Works while the collector runs."""
    scopes = parse_scopes(scope or list(DEFAULT_SCOPES))
    store = _tokens(db, create=create or None, making=True)
    token = store.create(name, scopes)
    sys.stdout.write(token + "\n")
    err.print(literal(f"token {name!r} ({', '.join(scopes)}) created; it is shown only now (kept hashed in "
                      f"{store.path})"))  # fmt: skip


@token_app.command("list")
def token_list(db: DbOpt = Path("flopfleet.duckdb")) -> None:
    """Names of tokens, their scopes, when they were created and revoked."""
    table = Table("name", "scopes", "created", "revoked", header_style="bold")
    for record in _tokens(db).list():
        table.add_row(literal(record.name), literal(", ".join(record.scopes)), literal(record.created_at),
                      literal(record.revoked_at or ""))  # fmt: skip
    out.print(table)


@token_app.command("revoke")
def token_revoke(name: Annotated[str, typer.Argument()], db: DbOpt = Path("flopfleet.duckdb")) -> None:
    """Refuse this token from now on (a running collector notices at its next request)."""
    record = _tokens(db).revoke(name)
    out.print(literal(f"token {record.name!r} revoked at {record.revoked_at}"))

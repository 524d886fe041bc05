"""What every ``flopfleet-collector`` command module shares: the consoles, the ``--db`` option, the settings."""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from schemas.terminal import console

if TYPE_CHECKING:
    from ..store import Store
    from ..web.settings import Settings


out = console()
err = console(stderr=True)

DbOpt = Annotated[Path, typer.Option("--db", envvar="FLOPFLEET_DB", help="The DuckDB file.")]
CreateOpt = Annotated[
    bool,
    typer.Option("--create", help="Create --db's folder if it is missing (FLOPFLEET_CREATE=1); without it a missing "
                                  "folder is refused, as a typo."),
]  # fmt: skip


class TableOrJson(str, Enum):
    """``--format`` of the commands that print a table for people or JSON for programs."""

    table = "table"
    json = "json"


TableOrJsonOpt = Annotated[TableOrJson, typer.Option("--format", help="A table or JSON.")]


def settings_for(db: Path, **flags: object) -> Settings:
    """Every command's settings: defaults, then FLOPFLEET_<NAME> variables, then its flags."""
    from ..web.settings import Settings

    return Settings.from_env(os.environ, db=db, **flags)


def open_store(settings: Settings, *, read_only: bool = False, new_ok: bool = True) -> Store:
    """``settings.open_store``, saying so on standard error when it created the database (an existing one is opened
    without a word)."""
    new = not read_only and not settings.db.exists()
    store = settings.open_store(read_only=read_only, new_ok=new_ok)
    if new:
        from schemas.terminal import literal

        err.print(literal(f"new database created at {settings.db}"), soft_wrap=True)
    return store

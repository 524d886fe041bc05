"""Exports for other engines: every table as Parquet (results partitioned by benchmark, hive-style) or CSV (text
cells through the caller's ``text_cell``: the CLI passes the spreadsheet rule every CSV of the collector follows)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Literal

import duckdb

from .aggregates import DDL as SUMMARIES
from .dbfile import check_db
from .errors import CollectorError
from .layout import DERIVED_TABLES, SIDE_TABLES, connect
from .tables import TABLES

Format = Literal["parquet", "csv"]
#: Parquet partitioning: results by benchmark, so an engine reads only the kind it asks for.
PARTITIONS = {"results": "benchmark"}


def export(db: Path, fmt: Format, out: Path, *, text_cell: Callable[[str], str]) -> dict[str, int]:
    """Rows written per table. Opens the database read-only; the server must not be holding it. ``text_cell``: a
    VARCHAR column's SQL expression in a CSV, given its name."""
    check_db(db, read_only=True)
    if out.exists() and any(out.iterdir()):
        raise CollectorError(f"{out} is not empty; export writes into a new or empty folder")
    out.mkdir(parents=True, exist_ok=True)
    con = connect(db, read_only=True)
    counts: dict[str, int] = {}
    try:
        # a file from an older collector may lack the newer tables
        present = {name for (name,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
        for table in (t for t in (*TABLES, *DERIVED_TABLES, *SIDE_TABLES, *SUMMARIES) if t in present):
            row = con.execute(f"SELECT count(*) FROM {table}").fetchone()
            counts[table] = int(row[0]) if row else 0
            target = out / table if fmt == "parquet" else out / f"{table}.csv"
            if fmt == "parquet" and table in PARTITIONS:
                options = f"FORMAT parquet, PARTITION_BY ({PARTITIONS[table]}), COMPRESSION zstd"
            elif fmt == "parquet":
                target.mkdir()
                target = target / "data.parquet"
                options = "FORMAT parquet, COMPRESSION zstd"
            else:
                options = "FORMAT csv, HEADER true"
            con.execute(f"COPY {_source(con, table, text_cell) if fmt == 'csv' else table} TO '{target}' ({options})")
    except duckdb.Error as exc:
        raise CollectorError(f"export failed: {exc}") from exc
    finally:
        con.close()
    return counts


def _source(con: duckdb.DuckDBPyConnection, table: str, text_cell: Callable[[str], str]) -> str:
    """The table for a CSV: its VARCHAR columns neutralised for spreadsheets, every other column as it is."""
    columns = con.execute(
        "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
        [table],
    ).fetchall()
    cells = [text_cell(name) if kind == "VARCHAR" else f'"{name}"' for name, kind in columns]  # our own names
    return f"(SELECT {', '.join(cells)} FROM {table})"

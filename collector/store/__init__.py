"""The DuckDB store: the only writer and owner of the tables (``core``: the store; ``commits``: group commit;
``refresher``: figures and summaries after commits; ``schedule``: the writer's other chores; ``layout``: the file,
its tables and migrations; ``failure``: storage failures; ``retention``: the archive, ``archive``: its folder),
the summaries kept at ingest (``aggregates``) and the named queries every page and report reads (``reads``)."""

from __future__ import annotations

from .aggregates import DDL as _SUMMARIES
from .commits import Stored
from .core import Store
from .export import export as export_tables
from .failure import STORAGE_ERRORS, StorageFailure
from .layout import DB_VERSION, DERIVED_TABLES, SIDE_TABLES
from .reads import Reads

#: The summaries kept at ingest, queryable like any table (``docs/architecture.md``).
SUMMARY_TABLES = tuple(_SUMMARIES)

__all__ = [
    "DB_VERSION",
    "DERIVED_TABLES",
    "SIDE_TABLES",
    "STORAGE_ERRORS",
    "SUMMARY_TABLES",
    "Reads",
    "StorageFailure",
    "Store",
    "Stored",
    "export_tables",
]

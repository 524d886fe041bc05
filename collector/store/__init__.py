"""The DuckDB store: the only writer and owner of the tables (``core``), the summaries kept at ingest
(``aggregates``) and the named queries every page and report reads (``reads``)."""

from __future__ import annotations

from .aggregates import DDL as _SUMMARIES
from .core import DB_VERSION, DERIVED_TABLES, SIDE_TABLES, STORAGE_ERRORS, StorageFailure, Store, Stored, connect
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
    "connect",
]

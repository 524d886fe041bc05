"""The DuckDB store: the only writer and owner of the schema. ``core.Store`` is the façade over its ``writer`` (the
thread that commits, ``commits``: group commit; ``schedule``: its other chores) and its ``recovery`` (storage
failures, ``failure``); ``refresher`` computes figures and summaries after commits (``aggregates``); ``layout`` opens
the file and owns the schema (``tables``, ``figures``, ``sqlviews``, side tables, migrations); ``retention`` and
``archive`` move old runs to Parquet; ``reads`` and ``fleet_reads`` are the named queries every page and report
reads; ``sqlguard`` runs a reader's own SQL, ``export`` copies the tables out. It imports nothing of the collector
outside ``store/``; nothing outside gets a connection."""

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

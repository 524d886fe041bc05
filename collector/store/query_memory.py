"""How much memory one reader's statement has taken while it runs, so that the SQL guard can stop it at its share.

DuckDB bounds memory only for the whole database (``memory_limit``, shared by every reader, the pages and ingest);
its per-connection ``operator_memory_limit`` guides how operators plan to spill but bounds nothing (measured:
docs/results/collector.md, "A reader's query memory"). So a statement's memory is read from outside while it
runs, twice over: DuckDB's own count of what queries build (``duckdb_memory()``, less the table blocks it caches
and evicts by itself) and the process's resident memory (less those cached blocks too), which also sees what DuckDB
does not count (the values of the vector being computed). Either one's growth since the statement began is what it
took. Several statements at
once share what they took: each sees the others' growth too, so together they stay under one statement's share.
"""

from __future__ import annotations

import os
import re
from contextlib import suppress

import duckdb

#: DuckDB's memory for what queries build (every tag of ``duckdb_memory()`` but the database's own blocks), and for
#: the table blocks it has read and keeps cached (evicted by itself when memory runs short).
_MEMORY = """SELECT coalesce(sum(memory_usage_bytes) FILTER (WHERE tag NOT IN ('BASE_TABLE', 'METADATA')), 0),
                    coalesce(sum(memory_usage_bytes) FILTER (WHERE tag IN ('BASE_TABLE', 'METADATA')), 0)
             FROM duckdb_memory()"""
#: Sizes as DuckDB writes them: KB, MB, GB, TB are powers of 1000, KiB … TiB of 1024.
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)B", re.IGNORECASE)
_POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}


def size_bytes(text: str) -> int:
    """``4GB``, ``512MiB``, ``1.5 GB`` in bytes, as DuckDB reads them; ValueError for anything else."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise ValueError(text)
    number, prefix, binary = match.groups()
    return int(float(number) * (1024 if binary else 1000) ** _POWERS[prefix.upper()])


def resident_bytes() -> int | None:
    """The process's resident memory now (Linux's /proc; None elsewhere, where DuckDB's count alone is read)."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            pages = int(statm.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


class QueryMemory:
    """What one statement has taken since it began, read on a cursor of its own (``taken``), against ``limit``: the
    growth of what DuckDB counts as built by queries, or of the process's resident memory less the table blocks
    DuckDB cached meanwhile (a scan of a large table caches its blocks: memory, but not the query's to keep),
    whichever is more."""

    def __init__(self, con: duckdb.DuckDBPyConnection, limit: int) -> None:
        self.limit = limit
        self.peak = 0  # the most it was seen to have taken
        self._con = con
        self._built_at_start, self._cached_at_start = self._duckdb()
        self._resident_at_start = resident_bytes()

    def _duckdb(self) -> tuple[int, int]:
        with suppress(duckdb.Error):  # a database failing under us: the process's memory is still read
            row = self._con.execute(_MEMORY).fetchone()
            if row:
                return int(row[0]), int(row[1])
        return 0, 0

    def taken(self) -> int:
        built, cached = self._duckdb()
        built -= self._built_at_start
        resident = resident_bytes()
        grown = 0
        if resident is not None and self._resident_at_start is not None:
            grown = resident - self._resident_at_start - max(0, cached - self._cached_at_start)
        self.peak = max(self.peak, built, grown)
        return max(built, grown)

    def exceeded(self) -> bool:
        return self.taken() > self.limit

    def close(self) -> None:
        with suppress(duckdb.Error):
            self._con.close()

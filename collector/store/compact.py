"""Giving back the space of what was archived or deleted. DuckDB reuses the blocks that deleted rows leave (after a
checkpoint) but never shrinks its file: a file that held a million runs keeps its size once seven in ten are
archived, and neither ``CHECKPOINT`` nor ``VACUUM`` returns it (docs/results/collector.md). ``compact`` writes
what is kept into a new file beside it (``COPY FROM DATABASE``: every table with its constraints, every view),
checks that each table came across whole, and swaps it in; the collector must be stopped meanwhile, and the disk
must hold a second copy of what is kept.
"""

from __future__ import annotations

import os
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

import duckdb

from .dbfile import check_db
from .errors import CollectorError
from .layout import check_version, connect

#: The new file while it is written, beside the database: a leftover from an interrupted compaction is removed.
SUFFIX = ".compacting"


@dataclass(frozen=True)
class Compacted:
    before: int  # bytes of the file (and its write-ahead log) before
    after: int
    free_before: int  # bytes DuckDB held free inside it before (reused by later writes, never returned)


def _size(path: Path) -> int:
    wal = path.with_name(path.name + ".wal")
    return sum(p.stat().st_size for p in (path, wal) if p.exists())


def free_bytes(cur: duckdb.DuckDBPyConnection) -> int:
    """The bytes of the file DuckDB holds free: what a compaction would give back."""
    row = cur.execute("SELECT free_blocks * block_size FROM pragma_database_size()").fetchone()
    return int(row[0]) if row else 0


def _tables(cur: duckdb.DuckDBPyConnection, catalog: str) -> dict[str, int]:
    names = [
        str(name)
        for (name,) in cur.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND NOT temporary ORDER BY 1", [catalog]
        ).fetchall()
    ]
    return {name: int(cur.execute(f'SELECT count(*) FROM "{catalog}".main."{name}"').fetchone()[0]) for name in names}  # type: ignore[index]


def compact(path: Path) -> Compacted:
    """Rewrite ``path`` without its free space, with no collector on it (``DatabaseBusy`` otherwise); a file of
    another layout is refused untouched (``check_version``), as is one that did not come across whole."""
    check_db(path, read_only=True)
    new = path.with_name(path.name + SUFFIX)
    new.unlink(missing_ok=True)
    con = connect(path)
    try:
        check_version(con, path)
        con.execute("CHECKPOINT")  # the write-ahead log folded in: the copy reads one file
        before, free = _size(path), free_bytes(con)
        catalog = str(con.execute("SELECT current_database()").fetchone()[0])  # type: ignore[index]
        con.execute("ATTACH ? AS compacted", [str(new)])
        con.execute(f'COPY FROM DATABASE "{catalog}" TO compacted')
        kept, copied = _tables(con, catalog), _tables(con, "compacted")
        if kept != copied:
            differ = sorted(t for t in kept.keys() | copied.keys() if kept.get(t) != copied.get(t))
            raise CollectorError(f"compacting {path}: {', '.join(differ)} did not come across whole; left as it was")
        con.execute("DETACH compacted")
    except BaseException:
        with suppress(duckdb.Error):
            con.close()
        new.unlink(missing_ok=True)
        raise
    con.close()
    if path.with_name(path.name + ".wal").exists():  # closed cleanly, DuckDB leaves none; one would be replayed
        new.unlink(missing_ok=True)
        raise CollectorError(f"{path}.wal remained after closing {path}: left as it was")
    with open(new, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(new, path)
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    return Compacted(before, _size(path), free)

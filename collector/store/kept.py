"""What ``/metrics`` said of each GPU as a collector stopped, kept in its file with what it was judged from: the next
collector on the file answers its first scrapes with it while it judges the fleet (``web.metrics.KeptLines``)."""

from __future__ import annotations

from contextlib import suppress
from datetime import datetime, timezone

import duckdb

#: One row: each GPU's series as written last, and what they were judged from (``read.views.judged_from``).
DDL = """CREATE TABLE IF NOT EXISTS kept_metrics (
    judged_from VARCHAR NOT NULL, body BLOB NOT NULL, written_at TIMESTAMPTZ NOT NULL)"""


def keep(cur: duckdb.DuckDBPyConnection, judged_from: str, body: bytes) -> None:
    """Replace what an earlier collector kept, in one transaction."""
    cur.begin()
    try:
        cur.execute("DELETE FROM kept_metrics")
        cur.execute("INSERT INTO kept_metrics VALUES (?, ?, ?)", [judged_from, body, datetime.now(timezone.utc)])
        cur.commit()
    except BaseException:
        with suppress(duckdb.Error):
            cur.rollback()
        raise

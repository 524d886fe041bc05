"""A storage failure as the store reports it, and the DuckDB errors that mean the disk, not the run, is at fault."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

#: What DuckDB raises when the file cannot be written (full disk, unwritable folder, invalidated database): the
#: store fails, rather than blaming the run.
STORAGE_ERRORS = (duckdb.IOException, duckdb.TransactionException, duckdb.OutOfMemoryException, duckdb.FatalException)


@dataclass(frozen=True)
class StorageFailure:
    """Why the store cannot write now; ``invalidated``: DuckDB must reopen the file before anything else."""

    reason: str
    since: datetime
    invalidated: bool

    def message(self) -> str:
        return (
            f"the collector cannot store runs now: {self.reason} (since {self.since:%Y-%m-%d %H:%M:%S} UTC); it "
            "retries by itself, and agents keep their runs and send them again"
        )


def first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:500] if lines else type(exc).__name__

"""The collector's errors; the CLI catches ``CollectorError`` once and exits with its ``exit_code`` (1 unless drawn
below: sysexits.h's, so that a supervisor can tell "try again later" from "a person must look"), the web app maps
each to an HTTP status. The base and what the store raises are here; what only requests raise is in
``collector/web/errors.py`` (marked web).

CollectorError
 ├── BadRequest          a request the collector cannot answer as asked: a missing or unknown parameter (400)
 ├── InvalidRun          a payload failed validation (422)
 │    └── UnsupportedVersion  a run of a contract major this collector does not read (422)          exit 78
 ├── InvalidBaseline     web: a baseline bundle that is unreadable, tampered with or newer than this collector (422)
 ├── PayloadTooLarge     web: a body over the size limit, before or after gunzip (413)
 ├── BadEncoding         web: a Content-Encoding other than gzip, or gzip that does not inflate (415/400)
 ├── RunConflict         a run_id already stored with a different payload (409)
 ├── BaselineBundled     a bundled baseline asked to be removed: it comes back at every start (409)
 ├── NotFound            no such run (404)
 ├── QueryRefused        SQL that is not one read-only statement (400)
 ├── QueryFailed         SQL that DuckDB could not run (400); QueryTimeout (sqlguard): stopped, with no rows (400);
 │                       QueryTooLarge (sqlguard): stopped past its memory share, sql_memory_limit (400)
 ├── MissingDatabase     no database at --db, or no folder for a new one (a typo?)                 exit 66
 ├── DatabaseBusy        the DuckDB file is held by another process (a running collector)          exit 75
 ├── CorruptDatabase     the file is not a (whole) DuckDB database: left untouched                 exit 65
 ├── NewerDatabase       a file a newer collector (or DuckDB) wrote: left untouched, never misread  exit 78
 ├── OlderDatabase       a file an older collector wrote, opened read-only: it must be opened for writing once
 ├── Busy                web: too many posts in flight: send the run again after Retry-After (429)
 └── StorageUnavailable  the database cannot take or answer requests now (a full disk, say): try again later (503)
"""

from __future__ import annotations

from typing import Any


class CollectorError(Exception):
    """Base of every error the collector reports to a user."""

    status_code = 500
    code = "collector_error"
    exit_code = 1

    def __init__(self, message: str, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []


class InvalidRun(CollectorError):
    status_code = 422
    code = "validation_error"


class UnsupportedVersion(InvalidRun):
    """Its own code, so that an agent tells "upgrade the collector" from a bad run (docs/contract.md)."""

    code = "unsupported_version"
    exit_code = 78  # EX_CONFIG: this collector's version is the wrong one for the run


class BadRequest(CollectorError):
    status_code = 400
    code = "bad_request"


class RunConflict(CollectorError):
    status_code = 409
    code = "run_conflict"


class BaselineBundled(CollectorError):
    status_code = 409
    code = "baseline_bundled"


class NotFound(CollectorError):
    status_code = 404
    code = "not_found"


class QueryRefused(CollectorError):
    status_code = 400
    code = "query_refused"


class QueryFailed(CollectorError):
    status_code = 400
    code = "query_failed"


class MissingDatabase(CollectorError):
    status_code = 503
    code = "missing_database"
    exit_code = 66  # EX_NOINPUT: the file (or its folder) named is not there


class DatabaseBusy(CollectorError):
    status_code = 503
    code = "database_busy"
    exit_code = 75  # EX_TEMPFAIL: it is the other process's for now


class CorruptDatabase(CollectorError):
    status_code = 503
    code = "corrupt_database"
    exit_code = 65  # EX_DATAERR


class NewerDatabase(CollectorError):
    status_code = 503
    code = "newer_database"
    exit_code = 78  # EX_CONFIG: this collector's version is the wrong one for the file


class OlderDatabase(CollectorError):
    status_code = 503
    code = "older_database"


class StorageUnavailable(CollectorError):
    status_code = 503
    code = "storage_unavailable"

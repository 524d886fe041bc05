"""Collector settings: one frozen object built from flags and the environment, passed to ``create_app``."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from ..store.errors import CollectorError
from ..store.query_memory import size_bytes

if TYPE_CHECKING:
    from ..store import Store

ENV_PREFIX = "FLOPFLEET_"


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the system has one (taskset, a Slurm or container
    cpuset), which ``os.cpu_count`` ignores; a collector given 2 of a host's 16 cores would start 15 workers."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Settings:
    """Every setting; each is also read from FLOPFLEET_<NAME>, and docs/collector.md lists them all (a test checks)."""

    db: Path = Path("flopfleet.duckdb")
    # Create the database's folder when it is missing; otherwise a missing folder is refused (``dbfile``): a typo in
    # --db must not start an empty fleet. A new file in an existing folder is created and announced either way.
    create: bool = False
    host: str = "127.0.0.1"
    port: int = 8000
    read_access: str = "auto"  # auto: open on loopback, token elsewhere | token | open
    max_body_bytes: int = 64 * 1024 * 1024  # on the wire and after gunzip
    # Processes that validate posted runs; -1: one per usable core (``usable_cores``) but one, 4 at most; 0: in-process.
    validate_workers: int = -1
    # DuckDB threads of the server. One: the writer's many small statements run slower across threads, on 2 cores
    # and on 16 (docs/results/collector.md); pages run their queries side by side instead. More speeds up single
    # large SQL queries.
    db_threads: int = 1
    sql_timeout_s: float = 10.0
    sql_max_rows: int = 10_000
    sql_max_bytes: int = 16 * 1024 * 1024  # of one SQL answer's values; past it the answer is cut, truncated
    # DuckDB's buffer-managed memory (joins, sorts, aggregates of SQL queries and pages), e.g. 4GB; auto: 40 % of
    # the machine's memory, leaving the rest to ingest, the validation workers and the answers being built.
    db_memory_limit: str = "auto"
    # One SQL query's share of that memory (the SQL API, the /sql page, the sql command): a query that takes more is
    # stopped and answered query_too_large, so a reader cannot take what ingest and the pages need. A percentage of
    # db_memory_limit, or a size such as 1GB. What a query took is read while it runs (collector/store/query_memory.py).
    sql_memory_limit: str = "10%"
    # Host names the collector answers to, comma-separated (*.example.org and * allowed). auto: the loopback
    # names and the listening address where reads need no token (DNS rebinding), any host where every read does.
    allowed_hosts: str = "auto"
    max_header_bytes: int = 16 * 1024  # request line and headers; more is answered 431
    header_timeout_s: float = 10.0  # from connecting (or the last answer) until the headers are in
    body_timeout_s: float = 60.0  # from the headers until the whole body is in
    idle_timeout_s: float = 5.0  # a kept-alive connection with no new request is closed after this
    max_connections: int = 1000  # open at once; also kept under the open-file limit. Past it, idle ones go first
    write_timeout_s: float = 120.0  # the longest a post waits for the database before it is answered 503
    # Posts being read, validated or stored at once; past it a post is answered 429 with Retry-After at once, before
    # its body is read, so an overloaded collector sheds load instead of timing out every agent.
    max_posts_in_flight: int = 256
    # Raw results, GPU samples and JSON of runs older than this many days move to Parquet under archive_dir (their
    # figures and summaries stay); 0 keeps everything in the database.
    retention_days: int = 0
    archive_dir: str = ""  # empty: <db>.archive beside the database
    log_level: str = "info"
    log_format: str = "json"  # json | text

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise CollectorError(f"port {self.port} is not in 0..65535")
        if self.read_access not in ("auto", "token", "open"):
            raise CollectorError(f"read_access {self.read_access!r} is not one of: auto, token, open")
        if self.max_body_bytes < 1024:
            raise CollectorError(f"max_body_bytes {self.max_body_bytes} is below 1024")
        if not 0 < self.sql_timeout_s <= 3600 or self.sql_max_rows < 1:
            raise CollectorError("sql_timeout_s must be in (0, 3600] and sql_max_rows at least 1")
        if self.validate_workers < -1:
            raise CollectorError("validate_workers must be -1 (automatic), 0 (in-process) or a count")
        if self.validate_workers == -1:
            object.__setattr__(self, "validate_workers", min(4, max(0, usable_cores() - 1)))
        if self.db_threads < 1 or self.max_posts_in_flight < 1:
            raise CollectorError("db_threads and max_posts_in_flight must be at least 1")
        if min(self.sql_max_bytes, self.max_header_bytes) < 1024 or self.max_connections < 1:
            raise CollectorError("sql_max_bytes and max_header_bytes must be at least 1024, max_connections 1")
        if min(self.header_timeout_s, self.body_timeout_s, self.idle_timeout_s, self.write_timeout_s) <= 0:
            raise CollectorError("header_timeout_s, body_timeout_s, idle_timeout_s and write_timeout_s must be > 0")
        if self.db_memory_limit != "auto" and not re.fullmatch(r"\d+(\.\d+)?\s*[KMGT]i?B", self.db_memory_limit):
            raise CollectorError(f"db_memory_limit {self.db_memory_limit!r} is not 'auto' or a size such as 4GB")
        try:
            share = self.sql_memory_bytes()
        except ValueError:
            raise CollectorError(
                f"sql_memory_limit {self.sql_memory_limit!r} is not a percentage of db_memory_limit (1-100%) or a size "
                "such as 1GB"
            ) from None
        if share > size_bytes(self.duckdb_memory_limit()):
            raise CollectorError(f"sql_memory_limit {self.sql_memory_limit} is more than db_memory_limit "
                                 f"({self.duckdb_memory_limit()}), which DuckDB as a whole may take")  # fmt: skip
        if self.retention_days < 0:
            raise CollectorError(f"retention_days {self.retention_days} must be 0 (keep everything) or more")
        if self.log_format not in ("json", "text"):
            raise CollectorError(f"log_format {self.log_format!r} is not one of: json, text")

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **overrides: object) -> Settings:
        """Defaults, then FLOPFLEET_<NAME> variables, then explicit overrides (flags) that are not None."""
        values: dict[str, object] = {}
        for f in fields(cls):
            raw = environ.get(ENV_PREFIX + f.name.upper())
            if raw is not None:
                try:
                    values[f.name] = Path(raw) if f.name == "db" else _parse(type(getattr(cls(), f.name)), raw)
                except ValueError:
                    raise CollectorError(f"{ENV_PREFIX}{f.name.upper()}={raw!r} is not a valid {f.name}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]

    def archive_folder(self) -> Path:
        return Path(self.archive_dir) if self.archive_dir else self.db.with_name(self.db.name + ".archive")

    def open_store(self, *, read_only: bool = False, new_ok: bool = True) -> Store:
        """The store these settings describe (every command opens it this way): a missing file or folder is refused
        as ``dbfile.check_db`` says (``new_ok``: whether a missing file may be created here)."""
        from ..store import Store
        from ..store.dbfile import check_db

        check_db(self.db, read_only=read_only, create=self.create, new_ok=new_ok)
        return Store(self.db, read_only=read_only, threads=self.db_threads if not read_only else None,
                     retention_days=self.retention_days, archive_dir=self.archive_folder(),
                     memory_limit=self.duckdb_memory_limit())  # fmt: skip

    def duckdb_memory_limit(self) -> str:
        """``db_memory_limit`` as DuckDB takes it."""
        if self.db_memory_limit != "auto":
            return self.db_memory_limit.replace(" ", "")
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return "4GB"
        return f"{max(256, int(total * 0.4) >> 20)}MB"

    def sql_memory_bytes(self) -> int:
        """``sql_memory_limit`` in bytes: its share of ``duckdb_memory_limit``, or its size (ValueError: neither)."""
        text = self.sql_memory_limit.strip()
        if text.endswith("%"):
            share = float(text[:-1])
            if not 0 < share <= 100:
                raise ValueError(text)
            return int(size_bytes(self.duckdb_memory_limit()) * share / 100)
        return size_bytes(text)


_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "0": False, "false": False, "no": False, "off": False}


def _parse(kind: type, raw: str) -> object:
    """A FLOPFLEET_* value as the setting's type (a flag's words for a bool: 1/0, true/false, yes/no, on/off)."""
    if kind is bool:
        if raw.strip().lower() not in _BOOLS:
            raise ValueError(raw)
        return _BOOLS[raw.strip().lower()]
    return kind(raw)

"""Collector settings: one frozen object built from flags and the environment, passed to ``create_app``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from .errors import CollectorError

ENV_PREFIX = "FLOPFLEET_"


@dataclass(frozen=True)
class Settings:
    """Every setting; each is also read from FLOPFLEET_<NAME>, and README's table lists them all (a test checks)."""

    db: Path = Path("flopfleet.duckdb")
    host: str = "127.0.0.1"
    port: int = 8000
    read_access: str = "auto"  # auto: open on loopback, token elsewhere | token | open
    max_body_bytes: int = 64 * 1024 * 1024  # on the wire and after gunzip
    validate_workers: int = -1  # processes that validate posted runs; -1: one per core but one, 0: in-process
    # DuckDB threads of the server. One: the writer's many small statements run slower across threads, on 2 cores
    # and on 16 (docs/results/collector.md); pages run their queries side by side instead. More speeds up single
    # large SQL queries.
    db_threads: int = 1
    sql_timeout_s: float = 10.0
    sql_max_rows: int = 10_000
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
            object.__setattr__(self, "validate_workers", min(4, max(0, (os.cpu_count() or 1) - 1)))
        if self.db_threads < 1:
            raise CollectorError("db_threads must be at least 1")
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
                    values[f.name] = Path(raw) if f.name == "db" else type(getattr(cls(), f.name))(raw)
                except ValueError:
                    raise CollectorError(f"{ENV_PREFIX}{f.name.upper()}={raw!r} is not a valid {f.name}") from None
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]

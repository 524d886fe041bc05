"""Collector settings: one frozen object built from flags and the environment, passed to ``create_app``."""

from __future__ import annotations

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
    max_body_bytes: int = 64 * 1024 * 1024
    log_level: str = "info"

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise CollectorError(f"port {self.port} is not in 0..65535")
        if self.max_body_bytes < 1024:
            raise CollectorError(f"max_body_bytes {self.max_body_bytes} is below 1024")

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

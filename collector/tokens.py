"""Bearer tokens for writes (and for reads where required), kept hashed in a small file beside the database.

The file, not the DuckDB database, holds them so that ``flopfleet-collector token create|revoke`` works while a
collector is running (DuckDB lets one process own the database); the server rereads the file when it changes.
A token is shown once, at creation; only its SHA-256 is stored.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from .errors import CollectorError

PREFIX = "ffk_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")


class TokenError(CollectorError):
    status_code = 400
    code = "token_error"


@dataclass(frozen=True)
class TokenRecord:
    name: str
    sha256: str
    created_at: str
    revoked_at: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def token_file(db: Path) -> Path:
    return db.with_name(db.name + ".tokens.json")


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    """Tokens for one database; safe against concurrent CLI writers (file lock) and cheap to check per request."""

    def __init__(self, db: Path) -> None:
        self.path = token_file(db)
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._by_digest: dict[str, TokenRecord] = {}

    def _read(self) -> list[TokenRecord]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise TokenError(f"token file {self.path} cannot be read: {exc}") from exc
        return [TokenRecord(**t) for t in data.get("tokens", [])]

    def _write(self, records: list[TokenRecord]) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": 1, "tokens": [asdict(r) for r in records]}, indent=1), encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def create(self, name: str) -> str:
        """A new token for ``name``, returned once; a name can hold one active token at a time."""
        if not _NAME.match(name):
            raise TokenError(
                f"token name {name!r} must be 1-64 letters, digits or _.@- (starting with one of the first)"
            )
        with self._exclusive():
            records = self._read()
            if any(r.name == name and r.active for r in records):
                raise TokenError(f"a token named {name!r} exists; revoke it first or choose another name")
            token = PREFIX + secrets.token_urlsafe(32)
            records.append(TokenRecord(name, _digest(token), datetime.now(timezone.utc).isoformat(timespec="seconds")))
            self._write(records)
        return token

    def revoke(self, name: str) -> TokenRecord:
        with self._exclusive():
            records = self._read()
            active = [r for r in records if r.name == name and r.active]
            if not active:
                raise TokenError(f"no active token named {name!r}")
            when = datetime.now(timezone.utc).isoformat(timespec="seconds")
            revoked = TokenRecord(name, active[0].sha256, active[0].created_at, when)
            self._write([revoked if r == active[0] else r for r in records])
        return revoked

    def list(self) -> list[TokenRecord]:
        return self._read()

    def check(self, token: str) -> str | None:
        """The name of the active token ``token``, or None; rereads the file only when it changed."""
        try:
            st = self.path.stat()
            seen: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            seen = None
        with self._lock:
            if seen != self._seen:
                self._by_digest = {r.sha256: r for r in self._read() if r.active}
                self._seen = seen
            record = self._by_digest.get(_digest(token))
        return record.name if record is not None else None

"""Bearer tokens for writes (and for reads where required), kept hashed in a small file beside the database.

The file, not the DuckDB database, holds them so that ``flopfleet-collector token create|revoke`` works while a
collector is running (DuckDB lets one process own the database); the server rereads the file when it changes.
A token is shown once, at creation; only its SHA-256 is stored. Each token has scopes: ``write`` (post runs: what
an agent needs), ``read`` (pages, reports, SQL, metrics, where reads need a token) and ``admin`` (snapshots of the
whole database), so a dashboard's token can read without posting or downloading the database.

A file that cannot be read or is not shaped as written here (a half-edited file, say) never takes the server down
or shows where it lives: the server keeps the tokens it last read and logs the problem; if it never read any, token
checks answer 503 until the file is fixed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..store.errors import CollectorError, MissingDatabase

log = logging.getLogger(__name__)
PREFIX = "ffk_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
SCOPES = ("write", "read", "admin")
DEFAULT_SCOPES = ("write",)
#: Tokens made before scopes existed could post, read and take snapshots: they keep all three.
LEGACY_SCOPES = SCOPES


class TokenError(CollectorError):
    status_code = 400
    code = "token_error"


class TokensUnavailable(CollectorError):
    """The server has no readable token file and never had one: nothing can be checked (503, no path named)."""

    status_code = 503
    code = "tokens_unavailable"


@dataclass(frozen=True)
class TokenRecord:
    name: str
    sha256: str
    created_at: str
    revoked_at: str | None = None
    scopes: tuple[str, ...] = LEGACY_SCOPES

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def parse_scopes(values: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Scopes in their canonical order; TokenError naming an unknown one."""
    chosen = {v.strip().lower() for value in values for v in value.split(",") if v.strip()}
    unknown = sorted(chosen - set(SCOPES))
    if unknown or not chosen:
        raise TokenError(f"scope {', '.join(unknown) or '(none)'} is not one of: {', '.join(SCOPES)}")
    return tuple(s for s in SCOPES if s in chosen)


def _record(raw: object) -> TokenRecord:
    """One entry of the file, checked field by field (ValueError when it is not what ``create`` writes)."""
    if not isinstance(raw, dict) or not {"name", "sha256", "created_at"} <= set(raw) <= {*TokenRecord.__annotations__}:
        raise ValueError("an entry is not a token record")
    texts = (raw["name"], raw["sha256"], raw["created_at"])
    revoked, scopes = raw.get("revoked_at"), raw.get("scopes", list(LEGACY_SCOPES))
    if not all(isinstance(t, str) for t in texts) or not _SHA256.match(raw["sha256"]):
        raise ValueError("a token record has a field of the wrong type")
    if revoked is not None and not isinstance(revoked, str):
        raise ValueError("a token record has a revoked_at that is not text")
    if not isinstance(scopes, list) or not scopes or not set(scopes) <= set(SCOPES):
        raise ValueError("a token record has scopes that are not among " + ", ".join(SCOPES))
    return TokenRecord(raw["name"], raw["sha256"], raw["created_at"], revoked, tuple(scopes))


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
        self._good = False  # whether the file was ever read whole

    def _read(self) -> list[TokenRecord]:
        """The records; TokenError (naming the file: this is for its operator) when it is unreadable or misshapen."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(data, dict) or not isinstance(data.get("tokens", []), list):
                raise ValueError("it is not an object with a list of tokens")
            return [_record(t) for t in data.get("tokens", [])]
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise TokenError(f"token file {self.path} cannot be read: {exc}") from exc

    def _write(self, records: list[TokenRecord]) -> None:
        tmp = self.path.with_suffix(".tmp")
        rows = [{**asdict(r), "scopes": list(r.scopes)} for r in records]
        tmp.write_text(json.dumps({"version": 1, "tokens": rows}, indent=1), encoding="utf-8")
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        if not self.path.parent.is_dir():  # never created here: a typo in --db must not start a new token file
            raise MissingDatabase(f"folder {self.path.parent} does not exist (for {self.path.name})")
        with open(self.path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def create(self, name: str, scopes: tuple[str, ...] = DEFAULT_SCOPES) -> str:
        """A new token for ``name`` with ``scopes``, returned once; a name can hold one active token at a time."""
        scopes = parse_scopes(scopes)
        if not _NAME.match(name):
            raise TokenError(
                f"token name {name!r} must be 1-64 letters, digits or _.@- (starting with one of the first)"
            )
        with self._exclusive():
            records = self._read()
            if any(r.name == name and r.active for r in records):
                raise TokenError(f"a token named {name!r} exists; revoke it first or choose another name")
            token = PREFIX + secrets.token_urlsafe(32)
            made = datetime.now(timezone.utc).isoformat(timespec="seconds")
            records.append(TokenRecord(name, _digest(token), made, scopes=scopes))
            self._write(records)
        return token

    def revoke(self, name: str) -> TokenRecord:
        with self._exclusive():
            records = self._read()
            active = [r for r in records if r.name == name and r.active]
            if not active:
                raise TokenError(f"no active token named {name!r}")
            when = datetime.now(timezone.utc).isoformat(timespec="seconds")
            revoked = TokenRecord(name, active[0].sha256, active[0].created_at, when, active[0].scopes)
            self._write([revoked if r == active[0] else r for r in records])
        return revoked

    def list(self) -> list[TokenRecord]:
        return self._read()

    def check(self, token: str) -> str | None:
        """The name of the active token ``token``, or None."""
        record = self.lookup(token)
        return record.name if record is not None else None

    def lookup(self, token: str) -> TokenRecord | None:
        """The active token ``token``, or None; rereads the file only when it changed, keeping the last good read
        when it cannot be read (TokensUnavailable if there never was one)."""
        try:
            st = self.path.stat()
            seen: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
        except OSError:
            seen = None
        with self._lock:
            if seen != self._seen:
                try:
                    self._by_digest = {r.sha256: r for r in self._read() if r.active}
                    self._good = True
                except TokenError as exc:
                    log.error("%s; %s", exc, "keeping the tokens read before" if self._good else "no token is valid")
                self._seen = seen
            if not self._good:
                raise TokensUnavailable("the collector cannot read its list of tokens; its operator must fix it")
            return self._by_digest.get(_digest(token))

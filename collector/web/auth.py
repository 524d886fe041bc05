"""Who may write and read: bearer tokens checked per request, with the same JSON error shape as every error."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from fastapi import Depends, Request

from schemas.api import TokenInfo

from ..store.errors import CollectorError
from .settings import Settings
from .tokens import TokenStore


class Unauthorized(CollectorError):
    status_code = 401
    code = "unauthorized"


class Forbidden(CollectorError):
    status_code = 403
    code = "forbidden"


def reads_need_token(settings: Settings) -> bool:
    """'auto' keeps reads open only on a loopback interface: a collector reachable from elsewhere asks for a token."""
    if settings.read_access != "auto":
        return settings.read_access == "token"
    try:
        return not ipaddress.ip_address(settings.host).is_loopback
    except ValueError:
        return settings.host != "localhost"


def _bearer(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def _token_name(request: Request, what: str, scope: str, *also: str) -> str:
    tokens: TokenStore = request.app.state.tokens
    token = _bearer(request)
    if token is None:
        raise Unauthorized(
            f"{what} need a token with scope {scope!r}: send 'Authorization: Bearer <token>' "
            f"(flopfleet-collector token create --scope {scope})"
        )
    record = tokens.lookup(token)
    if record is None:
        raise Unauthorized("the token is not valid: unknown or revoked")
    if scope not in record.scopes and not set(also) & set(record.scopes):
        wanted = " or ".join(map(repr, (scope, *also)))
        raise Forbidden(f"{what} need scope {wanted}; this token has {', '.join(record.scopes)}")
    return record.name


async def require_writer(request: Request) -> str:
    """The name of the token that sent this write."""
    return _token_name(request, "writes", "write")


async def require_reader(request: Request) -> str | None:
    settings: Settings = request.app.state.settings
    if not reads_need_token(settings):
        return None
    return _token_name(request, "reads on this collector", "read")


async def require_verdict_reader(request: Request) -> str | None:
    """Verdicts are read by agents (``check``), whose token writes: read or write scope will do."""
    settings: Settings = request.app.state.settings
    if not reads_need_token(settings):
        return None
    return _token_name(request, "verdicts on this collector", "read", "write")


async def require_admin(request: Request) -> str:
    """Snapshots hand out the whole database: a token with the admin scope, whatever the read access."""
    return _token_name(request, "snapshots", "admin")


async def require_token(request: Request) -> TokenInfo:
    """Any valid token, whatever its scopes: who it is (``GET /api/v1/token``, an agent's first contact)."""
    tokens: TokenStore = request.app.state.tokens
    token = _bearer(request)
    if token is None:
        raise Unauthorized("send 'Authorization: Bearer <token>' (flopfleet-collector token create)")
    record = tokens.lookup(token)
    if record is None:
        raise Unauthorized("the token is not valid: unknown or revoked")
    return TokenInfo(name=record.name, scopes=record.scopes)


Writer = Annotated[str, Depends(require_writer)]
Bearer = Annotated[TokenInfo, Depends(require_token)]
Reader = Annotated[str | None, Depends(require_reader)]
Admin = Annotated[str, Depends(require_admin)]
VerdictReader = Annotated[str | None, Depends(require_verdict_reader)]

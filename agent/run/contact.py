"""Asking the collector who the token is before anything is measured, so that a wrong token or URL costs one small
request instead of a run."""

from __future__ import annotations

import json

import httpx

from schemas.api import TOKEN_PATH, TokenInfo

from ..errors import CollectorRefused
from .config import UploadConfig

#: A receipt is about 100 bytes; an answer is read up to this many and no further.
MAX_ANSWER_BYTES = 64 * 1024
#: The first contact's one request: an answer, or the collector counts as unreachable for now (measure, spool).
FIRST_CONTACT_S = 10.0


def first_contact(client: httpx.Client, config: UploadConfig, *, scope: str = "write") -> str | None:
    """Before anything is measured: ask the collector who the token is (``GET /api/v1/token``). A refused token, a
    token without ``scope``, or an answer that is not a flopfleet collector's raise ``CollectorRefused`` (sending
    again will not help); a collector that cannot be reached now returns why (the run is measured and spooled)."""
    try:
        answer = _ask(client, config)
    except httpx.HTTPError as exc:
        return f"{config.collector_url} could not be reached now ({type(exc).__name__}): the run will wait in the spool"
    if answer.status_code in (429, 502, 503, 504) or answer.status_code >= 500:
        return f"{config.collector_url} answered HTTP {answer.status_code} now: the run will wait in the spool"
    if answer.status_code in (401, 403):
        given = "no token was given (--token-file, FLOPFLEET_TOKEN)" if not config.token else "the token was refused"
        raise CollectorRefused(f"{config.collector_url}: {given}: HTTP {answer.status_code}: "
                               f"{_message(answer.content)}")  # fmt: skip
    try:
        who = TokenInfo.model_validate_json(answer.content[:MAX_ANSWER_BYTES]) if answer.status_code == 200 else None
    except ValueError:
        who = None
    if who is None:
        kind = answer.headers.get("content-type") or "no content type"
        raise CollectorRefused(f"{config.collector_url} is not a flopfleet collector: GET {TOKEN_PATH} answered "
                               f"HTTP {answer.status_code} ({kind})")  # fmt: skip
    if scope not in who.scopes:
        raise CollectorRefused(f"{config.collector_url}: the token {who.name!r} has scopes {', '.join(who.scopes)}; "
                               f"this needs {scope!r} (flopfleet-collector token create --scope {scope})")  # fmt: skip
    return None


def _message(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"]["message"])[:300]
    except (ValueError, KeyError, TypeError):
        return body.decode("utf-8", "replace").strip()[:300] or "no message"


def _ask(client: httpx.Client, config: UploadConfig) -> httpx.Response:
    """``GET /api/v1/token`` with the configured token."""
    assert config.collector_url is not None
    return client.get(config.collector_url.rstrip("/") + TOKEN_PATH, headers=token_headers(config),
                      timeout=FIRST_CONTACT_S)  # fmt: skip


def token_headers(config: UploadConfig) -> dict[str, str]:
    """What asking ``GET /api/v1/token`` sends: the configured token, no keep-alive."""
    headers = {"Accept": "application/json", "Connection": "close"}
    if config.token:
        headers["Authorization"] = f"Bearer {config.token}"
    return headers

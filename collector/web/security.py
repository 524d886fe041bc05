"""What a browser must be told and refused: security headers on every answer, allowed hosts, cross-site requests.

- Headers: a Content-Security-Policy that lets a page use only its own inline styles and SVG (the pages load
  nothing else), ``nosniff``, no framing, no referrer.
- Hosts: a collector whose reads need no token (loopback, by default) answers only to the names it is known by.
  Otherwise a web page could rebind its own name to 127.0.0.1 and read the database through the browser (DNS
  rebinding). An IP literal is always fine: a rebinding page is served under a name. Where every read needs a
  token the page has none, so any host is answered.
- Cross-site: a request another site's page makes (``Sec-Fetch-Site: cross-site`` / ``same-site``) is refused,
  except a user's own top-level navigation to a link (GET, ``Sec-Fetch-Mode: navigate``, ``Dest: document``),
  so a page elsewhere cannot make a visitor's browser run SQL or post to the collector in the background.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import socket

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from schemas import ErrorBody, ErrorInfo
from schemas.contract import answer_headers

CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-resource-policy", b"same-origin"),
)
#: Not a browser's concern, but on every answer too: the contract's version, by which an agent knows a collector too
#: old for its run (schemas/contract.py).
ANSWER_HEADERS = SECURITY_HEADERS + tuple((k.lower().encode(), v.encode()) for k, v in answer_headers().items())
LOOPBACK_NAMES = ("localhost", "*.localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
_WILDCARD_ADDRESSES = ("0.0.0.0", "::", "")


def allowed_hosts(setting: str, listen_host: str, reads_need_token: bool) -> tuple[str, ...]:
    """The host patterns answered to: ``setting`` (comma-separated), or for ``auto`` what the module says."""
    if setting.strip() != "auto":
        return tuple(h.strip().lower() for h in setting.split(",") if h.strip())
    if reads_need_token:
        return ("*",)
    names = [*LOOPBACK_NAMES, listen_host.lower()]
    if listen_host in _WILDCARD_ADDRESSES:
        names += [socket.gethostname().lower(), socket.getfqdn().lower()]
    return tuple(dict.fromkeys(n for n in names if n))


def host_of(header: str) -> str:
    """The name in a Host header, without its port (``[::1]:8000`` -> ``::1``)."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def host_allowed(header: str | None, patterns: tuple[str, ...]) -> bool:
    if header is None or "*" in patterns:  # no Host: not a browser (browsers always send one)
        return True
    name = host_of(header)
    return _is_ip(name) or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def cross_site_refused(method: str, headers: dict[bytes, bytes]) -> bool:
    site = headers.get(b"sec-fetch-site", b"").lower()
    if site not in (b"cross-site", b"same-site"):
        return False
    navigation = headers.get(b"sec-fetch-mode") == b"navigate" and headers.get(b"sec-fetch-dest") == b"document"
    return not (navigation and method in ("GET", "HEAD"))


def error_json(code: str, message: str) -> bytes:
    """The common error shape (``schemas.ErrorBody``), for answers made below the app."""
    return ErrorBody(error=ErrorInfo(code=code, message=message)).model_dump_json().encode()


def _refusal(status: int, code: str, message: str) -> tuple[Message, Message]:
    body = error_json(code, message)
    start: Message = {
        "type": "http.response.start",
        "status": status,
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }
    return start, {"type": "http.response.body", "body": body}


class Guard:
    """ASGI middleware: refuses unknown hosts (421) and background cross-site requests (403), and adds the security
    headers (and the contract's) to every answer."""

    def __init__(self, app: ASGIApp, hosts: tuple[str, ...]) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *ANSWER_HEADERS]
            await send(message)

        headers = dict(scope["headers"])
        host = headers.get(b"host")
        refusal = None
        if not host_allowed(host.decode("latin-1") if host is not None else None, self.hosts):
            refusal = _refusal(
                421, "host_not_allowed",
                "this collector does not answer to that host name; its operator can add it to FLOPFLEET_ALLOWED_HOSTS",
            )  # fmt: skip
        elif cross_site_refused(scope["method"], headers):
            refusal = _refusal(403, "cross_site_refused", "requests from another site's page are refused")
        if refusal is None:
            await self.app(scope, receive, send_secured)
            return
        for message in refusal:
            await send_secured(message)

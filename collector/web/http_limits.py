"""HTTP limits that hold before a request reaches the app or its token check.

uvicorn's httptools protocol has no limit on header size (httptools buffers a header of any length), no deadline
for the headers or the body and no cap on open connections: one anonymous client could hold gigabytes or every
file descriptor. ``limited_protocol`` returns its subclass with those limits:

- request line and headers over ``max_header_bytes``: 431, connection closed (counted before the headers end, so a
  64 MiB header costs at most one read buffer more than the limit);
- headers not in ``header_timeout_s`` after connecting or after the last answer, or a body not in
  ``body_timeout_s`` after its headers: 408, closed; a kept-alive connection with no new request is closed after
  ``idle_timeout_s`` (uvicorn's keep-alive timeout);
- more than ``max_connections`` open: the one waiting longest for its headers (idle or stalled) is closed to make
  room, so ``/healthz`` and real requests still get in; only when every connection is busy with a request is the
  new one answered 503.
Every refusal is reported to ``on_refusal`` (the app's metrics count it as a 4xx or 503).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from .security import ANSWER_HEADERS, error_json

log = logging.getLogger(__name__)

#: File descriptors kept out of the connection cap: DuckDB's files, the validation workers' pipes, logs.
FD_RESERVE = 64
#: Bytes a header line costs beyond its name and value (": " and CRLF).
_HEADER_OVERHEAD = 4

RefusalHook = Callable[[str, int], None]


@dataclass(frozen=True)
class HttpLimits:
    max_header_bytes: int
    header_timeout_s: float
    body_timeout_s: float
    max_connections: int


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard one where allowed (many hosts start services at 1024); the soft
    limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            log.warning("could not raise the open-file limit from %d", soft)
    return soft


def connection_cap(requested: int, open_files: int) -> int:
    """At most ``requested`` connections, and never so many that the database could not open a file."""
    return max(1, min(requested, open_files - FD_RESERVE))


def _answer(status: int, code: str, message: str) -> bytes:
    body = error_json(code, message)
    head = [STATUS_LINE[status], b"content-type: application/json\r\n", b"connection: close\r\n"]
    head += [name + b": " + value + b"\r\n" for name, value in ANSWER_HEADERS]
    head += [b"content-length: " + str(len(body)).encode() + b"\r\n", b"\r\n"]
    return b"".join(head) + body


def limited_protocol(limits: HttpLimits, on_refusal: RefusalHook) -> type[HttpToolsProtocol]:
    """uvicorn's httptools protocol with ``limits``; ``on_refusal(reason, status)`` is told of each refusal."""

    class LimitedHttpToolsProtocol(HttpToolsProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._awaiting_headers = True  # what arrives next is a request line and headers
            self._header_bytes = 0
            self._idle_since = time.monotonic()
            self._deadline: asyncio.TimerHandle | None = None
            self._refused = False

        # -- connection -------------------------------------------------------------------------------------

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > limits.max_connections and not self._make_room():
                self._refuse(503, "too_many_connections", "the collector has too many open connections; try again")
                return
            self._arm(limits.header_timeout_s, self._headers_late)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _waiting(self) -> bool:
            """Idle or still sending its headers: no request of this connection is being answered."""
            return self._awaiting_headers and (self.cycle is None or self.cycle.response_complete)

        def _make_room(self) -> bool:
            """Close the connection that has waited longest for its headers; False when every one is busy."""
            waiting = [c for c in self.connections if c is not self and isinstance(c, LimitedHttpToolsProtocol)]
            waiting = [c for c in waiting if c._waiting() and not c._refused]
            if not waiting:
                return False
            victim = min(waiting, key=lambda c: c._idle_since)
            victim._refused = True
            victim._disarm()
            victim.transport.close()
            on_refusal("connection_shed", 0)
            return True

        # -- deadlines --------------------------------------------------------------------------------------

        def _arm(self, seconds: float, callback: Callable[[], None]) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, callback)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _headers_late(self) -> None:
            self._deadline = None
            if not self._waiting() or self.transport.is_closing():
                return
            if self._header_bytes:
                self._refuse(408, "header_timeout", f"the request headers took over {limits.header_timeout_s:g} s")
            else:  # a connection that never sent a request: nothing to answer
                self._refused = True
                self.transport.close()

        def _body_late(self) -> None:
            self._deadline = None
            cycle = self.cycle
            if cycle is None or not cycle.more_body or self.transport.is_closing():
                return
            if cycle.response_started:
                self._refused = True
                on_refusal("body_timeout", 408)
                self.transport.close()
            else:
                cycle.disconnected = True  # the app reads the end of the request, and its answer is not sent
                cycle.message_event.set()
                self._refuse(408, "body_timeout", f"the request body took over {limits.body_timeout_s:g} s")

        # -- refusing ---------------------------------------------------------------------------------------

        def _refuse(self, status: int, code: str, message: str) -> None:
            self._refused = True
            self._disarm()
            if not self.transport.is_closing():
                self.transport.write(_answer(status, code, message))
                self.transport.close()
            on_refusal(code, status)

        # -- parsing ----------------------------------------------------------------------------------------

        def data_received(self, data: bytes) -> None:
            if self._refused:
                return
            self._unset_keepalive_if_required()
            if self._awaiting_headers:
                self._header_bytes += len(data)
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                self._refuse(400, "upgrade_refused", "the collector speaks plain HTTP/1.1: no protocol upgrades")
                return
            except httptools.HttpParserError:
                if not self._refused:
                    self._refuse(400, "invalid_http", "invalid HTTP request")
                return
            if self._awaiting_headers and not self._refused and self._header_bytes > limits.max_header_bytes:
                self._refuse(431, "headers_too_large", f"the request headers are over {limits.max_header_bytes} bytes")

        def on_headers_complete(self) -> None:
            if self._refused:
                return
            size = len(self.url) + sum(len(n) + len(v) + _HEADER_OVERHEAD for n, v in self.headers)
            if size > limits.max_header_bytes:
                self._refuse(431, "headers_too_large", f"the request headers are over {limits.max_header_bytes} bytes")
                return
            self._awaiting_headers = False
            self._header_bytes = 0
            self._disarm()
            super().on_headers_complete()
            if self.cycle is not None and self.cycle.more_body and not self.cycle.response_complete:
                self._arm(limits.body_timeout_s, self._body_late)

        def on_body(self, body: bytes) -> None:
            if not self._refused:
                super().on_body(body)

        def on_message_complete(self) -> None:
            if self._refused:
                return
            self._disarm()
            self._awaiting_headers = True  # what follows on the wire is the next request's headers
            super().on_message_complete()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._refused or self.transport.is_closing() or self.pipeline:
                return
            if self.cycle is not None and self.cycle.more_body:  # answered before its body was in (a 401, say):
                return  # the body's deadline, still armed, holds for the rest
            self._idle_since = time.monotonic()
            self._arm(limits.header_timeout_s, self._headers_late)

    return LimitedHttpToolsProtocol

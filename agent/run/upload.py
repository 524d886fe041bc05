"""Sending runs to a collector: a deadline per attempt, retries with backoff and jitter, and a spool on disk.

A run leaves the agent only on a *receipt*: a 2xx whose body is the collector's ``RunAccepted`` for that very run.
Anything else (no answer, 5xx after retries, a refusal, a 2xx from a captive portal or the wrong server, any error
while sending) keeps the run in the spool with the reason; ``flopfleet-agent push`` sends spooled runs later. Each
attempt has one deadline for connect, send and receive, and reads at most ``MAX_ANSWER_BYTES`` of the answer,
never decompressed.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import random
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

import httpx

from schemas import RunAccepted, RunSubmission
from schemas.api import RUNS_PATH, TOKEN_PATH, TokenInfo

from ..errors import CollectorRefused, NoAnswer, NotARegularFile, SpoolError
from .config import UploadConfig
from .spool import entries, read_spooled, write_spool

log = logging.getLogger(__name__)
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
#: The most a collector's Retry-After makes an agent wait per attempt.
RETRY_AFTER_CAP_S = 120.0
#: A receipt is about 100 bytes; an answer is read up to this many and no further.
MAX_ANSWER_BYTES = 64 * 1024


@dataclass(frozen=True)
class Delivery:
    """What became of one run (or spool entry) and why, when it was not delivered.

    ``sent`` / ``duplicate``: the collector's receipt says created / already stored. ``spooled``: kept in the spool
    to send later. ``failed``: lost (the spool could not be written) or a spool file that is not a readable run.
    ``skipped``: a spool entry that is not a regular file, left alone. ``run_id`` is the file's name when the run
    could not be read.
    """

    run_id: str
    status: Literal["sent", "duplicate", "spooled", "failed", "skipped"]
    detail: str
    path: Path | None = None


#: The first contact's one request: an answer, or the collector counts as unreachable for now (measure, spool).
FIRST_CONTACT_S = 10.0


def first_contact(client: httpx.Client, config: UploadConfig, *, scope: str = "write") -> str | None:
    """Before anything is measured: ask the collector who the token is (``GET /api/v1/token``). A refused token, a
    token without ``scope``, or an answer that is not a flopfleet collector's raise ``CollectorRefused`` (sending
    again will not help); a collector that cannot be reached now returns why (the run is measured and spooled)."""
    assert config.collector_url is not None
    url = config.collector_url.rstrip("/") + TOKEN_PATH
    headers = {"Accept": "application/json", "Connection": "close"}
    if config.token:
        headers["Authorization"] = f"Bearer {config.token}"
    try:
        answer = client.get(url, headers=headers, timeout=FIRST_CONTACT_S)
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


def backoff(attempt: int, rng: random.Random) -> float:
    """Exponential backoff with full jitter, so many agents retrying do not arrive together."""
    return rng.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt))


def new_client() -> httpx.Client:
    """No keep-alive: every attempt opens its own connection, whose socket its deadline can shut."""
    return httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), follow_redirects=False)


class _Deadline:
    """Shuts the attempt's socket when its time is up, which wakes a blocked read or write at once.

    httpx's timeouts bound each socket operation, so a peer that sends a byte every few seconds never trips them.
    The socket comes from httpcore's documented ``trace`` request extension as soon as the TCP connection is made.
    """

    def __init__(self, seconds: float) -> None:
        self.passed = False
        self._lock = threading.Lock()
        self._socket: socket.socket | None = None
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def trace(self, event: str, info: dict[str, Any]) -> None:
        if event != "connection.connect_tcp.complete":
            return
        sock = info["return_value"].get_extra_info("socket")
        if not isinstance(sock, socket.socket):
            return
        with self._lock:
            self._close()
            # A duplicate descriptor of the same connection: TLS detaches the socket object httpcore gave us.
            self._socket = sock.dup()
            if self.passed:
                self._shut()

    def _expire(self) -> None:
        with self._lock:
            self.passed = True
            self._shut()

    def _shut(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)

    def _close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._timer.cancel()
        with self._lock:
            self._close()


@dataclass(frozen=True)
class _Answer:
    status: int
    reason: str
    content_type: str
    encoding: str
    body: bytes  # at most MAX_ANSWER_BYTES
    complete: bool  # False when the answer went on past MAX_ANSWER_BYTES
    retry_after_s: float | None = None  # what a 429 or 503 asked for (seconds; an HTTP date is not honoured)


def _exchange(client: httpx.Client, url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> _Answer:
    """One POST and at most ``MAX_ANSWER_BYTES`` of its answer, all within ``timeout_s``."""
    with _Deadline(timeout_s) as deadline:
        try:
            with client.stream(
                "POST", url, content=body, headers=headers, timeout=timeout_s, extensions={"trace": deadline.trace}
            ) as response:
                kept = bytearray()
                for chunk in response.iter_raw():
                    kept += chunk
                    if len(kept) > MAX_ANSWER_BYTES:
                        break  # leaving the block closes the connection: the rest is never read
        except httpx.TransportError as exc:
            if deadline.passed:
                raise NoAnswer(f"no complete answer within the {timeout_s:g} s deadline") from None
            verb = "could not be reached" if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout) else "failed"
            raise NoAnswer(f"{url} {verb} ({type(exc).__name__}: {exc})") from None
        if deadline.passed:  # a close-delimited answer cut short by the deadline looks complete
            raise NoAnswer(f"no complete answer within the {timeout_s:g} s deadline")
    return _Answer(
        status=response.status_code,
        reason=response.reason_phrase,
        content_type=response.headers.get("content-type", "")[:100],
        encoding=response.headers.get("content-encoding", "").strip().lower() or "identity",
        body=bytes(kept[:MAX_ANSWER_BYTES]),
        complete=len(kept) <= MAX_ANSWER_BYTES,
        retry_after_s=_retry_after(response.headers.get("retry-after")),
    )


def _retry_after(value: str | None) -> float | None:
    """``Retry-After: <seconds>``, capped at ``RETRY_AFTER_CAP_S``; None when absent or not a number."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    if seconds is None or seconds != seconds or seconds < 0:
        return None
    return min(seconds, RETRY_AFTER_CAP_S)


def _described(answer: _Answer) -> str:
    encoded = f"{answer.encoding}-encoded " if answer.encoding != "identity" else ""
    size = f"{len(answer.body):,} bytes" if answer.complete else f"over {MAX_ANSWER_BYTES:,} bytes"
    return f"{encoded}{answer.content_type or 'no content type'}, {size}"


def _error_text(answer: _Answer) -> str:
    if answer.encoding != "identity":
        return f"{answer.reason} ({_described(answer)})"
    try:
        return str(json.loads(answer.body)["error"]["message"])[:500]
    except (ValueError, KeyError, TypeError):
        return answer.body.decode("utf-8", "replace").strip()[:300] or answer.reason


def _receipt(answer: _Answer, run_id: UUID) -> tuple[RunAccepted | None, str]:
    """The collector's receipt for this run, or why the answer is not one."""
    code = answer.status
    if not 200 <= code < 300:
        return None, f"HTTP {code}: {_error_text(answer)}"
    receipt = None
    if answer.complete and answer.encoding == "identity":
        with contextlib.suppress(ValueError):
            receipt = RunAccepted.model_validate_json(answer.body)
    if receipt is None:
        return None, f"HTTP {code} but the answer is not a flopfleet receipt ({_described(answer)})"
    if receipt.run_id != run_id:
        return None, f"HTTP {code} but the answer names run {receipt.run_id}, not this run"
    return receipt, f"HTTP {code}"


def post(
    client: httpx.Client,
    config: UploadConfig,
    body: bytes,
    run_id: UUID,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> tuple[RunAccepted | None, str]:
    """POST a run, retrying no answer and 5xx; the receipt and 'HTTP nnn', or None and why there is none."""
    assert config.collector_url is not None
    url = config.collector_url.rstrip("/") + RUNS_PATH
    headers = {
        "Content-Type": "application/json",
        "Content-Encoding": "gzip",
        "Accept": "application/json",
        "Accept-Encoding": "identity",  # a receipt is tiny; an encoded answer is refused, so nothing inflates
        "Connection": "close",  # a fresh connection per attempt, even on a client that pools them
    }
    body = gzip.compress(body, compresslevel=6)  # run JSON shrinks about tenfold
    if config.token:
        headers["Authorization"] = f"Bearer {config.token}"
    rng = rng or random.Random()
    why = ""
    for attempt in range(config.retries + 1):
        if attempt:
            sleep(backoff(attempt - 1, rng))
        try:
            answer = _exchange(client, url, body, headers, config.timeout_s)
        except NoAnswer as exc:
            why = str(exc)
            continue
        if answer.status < 500 and answer.status != 429:
            return _receipt(answer, run_id)  # a 4xx or a 2xx that is no receipt will not get better
        why = f"HTTP {answer.status}: {_error_text(answer)}"
        # A collector that asks for time (429, or 503 with Retry-After) gets it, with jitter so that the agents it
        # turned away do not all come back in the same second.
        wait = answer.retry_after_s
        if wait is not None and attempt < config.retries:
            sleep(wait * rng.uniform(1.0, 1.5))
    return None, why


def _post_or_why(
    client: httpx.Client, config: UploadConfig, body: bytes, run_id: UUID, sleep: Callable[[float], None]
) -> tuple[RunAccepted | None, str]:
    """``post``, with any error on the way (not only a transport's) turned into the reason the run stays spooled:
    a run measured for minutes is never lost to an exception while it is sent."""
    try:
        return post(client, config, body, run_id, sleep=sleep)
    except Exception as exc:
        log.debug("sending run %s failed", run_id, exc_info=True)
        return None, f"sending failed ({type(exc).__name__}: {_first(exc)})"


def _received(receipt: RunAccepted, detail: str, path: Path | None = None) -> Delivery:
    status: Literal["sent", "duplicate"] = "sent" if receipt.status == "created" else "duplicate"
    return Delivery(str(receipt.run_id), status, detail, path)


def _first(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


def deliver(
    run: RunSubmission, config: UploadConfig, client: httpx.Client, *, sleep: Callable[[float], None] = time.sleep
) -> Delivery:
    """Send a run; without a receipt for it, it goes to the spool with the reason."""
    body = run.model_dump_json().encode()
    receipt, why = _post_or_why(client, config, body, run.run_id, sleep)
    if receipt is not None:
        return _received(receipt, why)
    try:
        path = write_spool(config.spool_dir, run, body)
    except SpoolError as exc:
        return Delivery(str(run.run_id), "failed", f"{why}; {exc}")
    return Delivery(str(run.run_id), "spooled", why, path)


def _push_one(
    path: Path, problem: str, config: UploadConfig, client: httpx.Client, sleep: Callable[[float], None]
) -> Delivery:
    if problem:
        return Delivery(path.name, "skipped", problem, path)
    try:
        body = read_spooled(path)
        run = RunSubmission.model_validate_json(body)
    except NotARegularFile as exc:  # swapped in since the folder was listed
        return Delivery(path.name, "skipped", str(exc), path)
    except (OSError, ValueError, SpoolError) as exc:
        return Delivery(path.stem, "failed", f"unreadable spool file: {_first(exc)}", path)
    receipt, why = _post_or_why(client, config, body, run.run_id, sleep)
    if receipt is None:
        return Delivery(str(run.run_id), "spooled", why, path)
    path.unlink(missing_ok=True)
    return _received(receipt, why, path)


def push(config: UploadConfig, client: httpx.Client, *, sleep: Callable[[float], None] = time.sleep) -> list[Delivery]:
    """Send every spooled run; a file is deleted only on the collector's receipt for it, one bad entry stops none."""
    return [_push_one(path, problem, config, client, sleep) for path, problem in entries(config.spool_dir)]

"""Sending runs to a collector: a deadline per attempt, retries with backoff and jitter, and a spool on disk.

A run leaves the agent only on a *receipt*: a 2xx whose body is the collector's ``RunAccepted`` for that very run.
Anything else (no answer, 5xx after retries, a refusal, a 2xx from a captive portal or the wrong server, any error
while sending) keeps the run in the spool with the reason; ``flopfleet-agent push`` sends spooled runs later. Each
attempt has one deadline for connect, send and receive, and reads at most ``MAX_ANSWER_BYTES`` of the answer,
never decompressed. A run the collector is too old for (``schemas.contract.Peer.refuses``: it said so on its
refusal, or on the answer ``push`` asks for first) is *held*: kept, and not sent again until the collector reads it.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

import httpx

from schemas import RunAccepted, RunSubmission
from schemas.api import RUNS_PATH, TOKEN_PATH, TokenInfo
from schemas.contract import Peer, Version

from ..errors import NoAnswer, NotARegularFile, SpoolError
from .config import UploadConfig
from .contact import FIRST_CONTACT_S, MAX_ANSWER_BYTES, token_headers
from .spool import entries, read_head, read_spooled, write_spool

log = logging.getLogger(__name__)
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0
#: The most a collector's Retry-After makes an agent wait per attempt.
RETRY_AFTER_CAP_S = 120.0


@dataclass(frozen=True)
class Delivery:
    """What became of one run (or spool entry) and why, when it was not delivered.

    ``sent`` / ``duplicate``: the collector's receipt says created / already stored. ``spooled``: kept in the spool
    to send later. ``held``: kept in the spool, the collector too old for it (sending it again will not help until
    the collector is upgraded). ``failed``: lost (the spool could not be written) or a spool file that is not a
    readable run. ``skipped``: a spool entry that is not a regular file, left alone. ``run_id`` is the file's name
    when the run could not be read.
    """

    run_id: str
    status: Literal["sent", "duplicate", "spooled", "held", "failed", "skipped"]
    detail: str
    path: Path | None = None


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
    peer: Peer = field(default_factory=lambda: Peer(None))  # what the collector said of its contract


def _exchange(client: httpx.Client, url: str, body: bytes | None, headers: dict[str, str], timeout_s: float) -> _Answer:
    """One POST (a GET without a ``body``) and at most ``MAX_ANSWER_BYTES`` of its answer, all within ``timeout_s``."""
    method = "GET" if body is None else "POST"
    with _Deadline(timeout_s) as deadline:
        try:
            with client.stream(
                method, url, content=body, headers=headers, timeout=timeout_s, extensions={"trace": deadline.trace}
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
        peer=Peer.from_headers(response.headers),
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


@dataclass(frozen=True)
class _Outcome:
    receipt: RunAccepted | None
    why: str  # 'HTTP nnn', or why there is no receipt
    held: bool = False  # the collector is too old for the run


def _receipt(answer: _Answer, run_id: UUID, version: Version) -> _Outcome:
    """The collector's receipt for this run, or why the answer is not one."""
    code = answer.status
    too_old = answer.peer.refuses(version) if code == 422 else None
    if too_old:
        return _Outcome(None, f"HTTP {code}: {too_old}", held=True)
    if not 200 <= code < 300:
        return _Outcome(None, f"HTTP {code}: {_error_text(answer)}")
    receipt = None
    if answer.complete and answer.encoding == "identity":
        with contextlib.suppress(ValueError):
            receipt = RunAccepted.model_validate_json(answer.body)
    if receipt is None:
        return _Outcome(None, f"HTTP {code} but the answer is not a flopfleet receipt ({_described(answer)})")
    if receipt.run_id != run_id:
        return _Outcome(None, f"HTTP {code} but the answer names run {receipt.run_id}, not this run")
    if receipt.not_understood:  # a collector of an older minor: it kept the run whole, and its tables what it knows
        left = "; ".join(receipt.not_understood)
        return _Outcome(receipt, f"HTTP {code}; the collector ({answer.peer.version}) did not understand: {left}")
    return _Outcome(receipt, f"HTTP {code}")


def post(
    client: httpx.Client,
    config: UploadConfig,
    body: bytes,
    run_id: UUID,
    version: Version,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> _Outcome:
    """POST a run of contract ``version``, retrying no answer and 5xx; the receipt and 'HTTP nnn', or why there is
    none."""
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
            return _receipt(answer, run_id, version)  # a 4xx or a 2xx that is no receipt will not get better
        why = f"HTTP {answer.status}: {_error_text(answer)}"
        # A collector that asks for time (429, or 503 with Retry-After) gets it, with jitter so that the agents it
        # turned away do not all come back in the same second.
        wait = answer.retry_after_s
        if wait is not None and attempt < config.retries:
            sleep(wait * rng.uniform(1.0, 1.5))
    return _Outcome(None, why)


def _post_or_why(
    client: httpx.Client,
    config: UploadConfig,
    body: bytes,
    run_id: UUID,
    version: Version,
    sleep: Callable[[float], None],
) -> _Outcome:
    """``post``, with any error on the way (not only a transport's) turned into the reason the run stays spooled:
    a run measured for minutes is never lost to an exception while it is sent."""
    try:
        return post(client, config, body, run_id, version, sleep=sleep)
    except Exception as exc:
        log.debug("sending run %s failed", run_id, exc_info=True)
        return _Outcome(None, f"sending failed ({type(exc).__name__}: {_first(exc)})")


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
    sent = _post_or_why(client, config, body, run.run_id, Version(run.schema_version, run.schema_minor), sleep)
    if sent.receipt is not None:
        return _received(sent.receipt, sent.why)
    try:
        path = write_spool(config.spool_dir, run, body)
    except SpoolError as exc:
        return Delivery(str(run.run_id), "failed", f"{sent.why}; {exc}")
    return Delivery(str(run.run_id), "held" if sent.held else "spooled", sent.why, path)


def _push_one(
    path: Path,
    problem: str,
    config: UploadConfig,
    client: httpx.Client,
    peer: Peer | None,
    sleep: Callable[[float], None],
) -> Delivery:
    if problem:
        return Delivery(path.name, "skipped", problem, path)
    try:
        body = read_spooled(path)
        head = read_head(body)
    except NotARegularFile as exc:  # swapped in since the folder was listed
        return Delivery(path.name, "skipped", str(exc), path)
    except (OSError, ValueError, SpoolError) as exc:
        return Delivery(path.stem, "failed", f"unreadable spool file: {_first(exc)}", path)
    too_old = peer.refuses(head.version) if peer is not None else None
    if too_old:  # not sent: the collector said, on the answer asked for first, that it cannot store it
        return Delivery(str(head.run_id), "held", too_old, path)
    sent = _post_or_why(client, config, body, head.run_id, head.version, sleep)
    if sent.receipt is None:
        return Delivery(str(head.run_id), "held" if sent.held else "spooled", sent.why, path)
    path.unlink(missing_ok=True)
    return _received(sent.receipt, sent.why, path)


def contract_of(client: httpx.Client, config: UploadConfig) -> Peer | None:
    """What the collector says of its contract, asked once before a push (``GET /api/v1/token``, under the same
    deadline and answer cap as a post): its header, or a collector from before the versioned contract (a token answer
    without one); None: no such answer now."""
    assert config.collector_url is not None
    url = config.collector_url.rstrip("/") + TOKEN_PATH
    try:
        answer = _exchange(client, url, None, token_headers(config), FIRST_CONTACT_S)
        if answer.peer.version is None and answer.status == 200 and answer.complete:
            TokenInfo.model_validate_json(answer.body)
        else:
            return answer.peer if answer.peer.version is not None else None
    except Exception:  # no answer, or not a collector's: the runs are sent, and their answers tell
        log.debug("asking %s for its contract failed", url, exc_info=True)
        return None
    return answer.peer


def push(config: UploadConfig, client: httpx.Client, *, sleep: Callable[[float], None] = time.sleep) -> list[Delivery]:
    """Send every spooled run; a file is deleted only on the collector's receipt for it, one bad entry stops none.
    A run the collector said it cannot store is held: kept, and not sent."""
    found = entries(config.spool_dir)
    peer = contract_of(client, config) if any(not problem for _, problem in found) else None
    return [_push_one(path, problem, config, client, peer, sleep) for path, problem in found]

"""Sending runs to a collector: retries with backoff and jitter, and a spool on disk so no run is lost.

A run that cannot be delivered (collector down, 5xx after retries, or refused) is written to the spool
directory; ``flopfleet-agent push`` sends spooled runs later and deletes each file only after a 2xx.
"""

from __future__ import annotations

import gzip
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx

from schemas import RunSubmission

from .config import UploadConfig

RUNS_PATH = "/api/v1/runs"
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 8.0


@dataclass(frozen=True)
class Delivery:
    """What happened to one run: sent (2xx), or spooled with the reason it was not sent."""

    run_id: str
    status: Literal["sent", "duplicate", "spooled", "failed"]
    detail: str
    path: Path | None = None


def backoff(attempt: int, rng: random.Random) -> float:
    """Exponential backoff with full jitter, so many agents retrying do not arrive together."""
    return rng.uniform(0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt))


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
        return str(body["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return response.text[:300] or response.reason_phrase


def post(
    client: httpx.Client,
    config: UploadConfig,
    body: bytes,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
) -> tuple[httpx.Response | None, str]:
    """POST a run body, retrying connection failures and 5xx; the last response (or None) and why it failed."""
    assert config.collector_url is not None
    url = config.collector_url.rstrip("/") + RUNS_PATH
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    body = gzip.compress(body, compresslevel=6)  # run JSON shrinks about tenfold
    if config.token:
        headers["Authorization"] = f"Bearer {config.token}"
    rng = rng or random.Random()
    why = ""
    for attempt in range(config.retries + 1):
        if attempt:
            sleep(backoff(attempt - 1, rng))
        try:
            response = client.post(url, content=body, headers=headers, timeout=config.timeout_s)
        except httpx.TransportError as exc:
            why = f"{config.collector_url} could not be reached ({type(exc).__name__}: {exc})"
            continue
        if response.status_code < 500:
            return response, "" if response.is_success else f"HTTP {response.status_code}: {_error_text(response)}"
        why = f"HTTP {response.status_code}: {_error_text(response)}"
    return None, why


def _first(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


def spool_path(spool_dir: Path, run: RunSubmission) -> Path:
    stamp = run.started_at.strftime("%Y%m%dT%H%M%SZ")
    return spool_dir / f"{stamp}-{run.run_id}.json"


def write_spool(spool_dir: Path, run: RunSubmission, body: bytes) -> Path:
    """Atomically: a half-written spool file must never be sent."""
    spool_dir.mkdir(parents=True, exist_ok=True)
    path = spool_path(spool_dir, run)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(body)
    os.replace(tmp, path)
    return path


def deliver(
    run: RunSubmission, config: UploadConfig, client: httpx.Client, *, sleep: Callable[[float], None] = time.sleep
) -> Delivery:
    """Send a run; anything short of a 2xx leaves it in the spool with the reason."""
    body = run.model_dump_json().encode()
    response, why = post(client, config, body, sleep=sleep)
    run_id = str(run.run_id)
    if response is not None and response.is_success:
        duplicate = response.status_code == 200
        return Delivery(run_id, "duplicate" if duplicate else "sent", f"HTTP {response.status_code}")
    path = write_spool(config.spool_dir, run, body)
    return Delivery(run_id, "spooled", why, path)


def spooled(spool_dir: Path) -> list[Path]:
    return sorted(spool_dir.glob("*.json")) if spool_dir.is_dir() else []


def push(config: UploadConfig, client: httpx.Client, *, sleep: Callable[[float], None] = time.sleep) -> list[Delivery]:
    """Send every spooled run; a file is deleted only after the collector answered 2xx for it."""
    deliveries = []
    for path in spooled(config.spool_dir):
        try:
            body = path.read_bytes()
            run = RunSubmission.model_validate_json(body)
        except (OSError, ValueError) as exc:
            # Kept for a person to look at; the other spooled runs still go.
            deliveries.append(Delivery(path.stem, "failed", f"unreadable spool file: {_first(exc)}", path))
            continue
        response, why = post(client, config, body, sleep=sleep)
        if response is not None and response.is_success:
            path.unlink()
            status: Literal["sent", "duplicate"] = "duplicate" if response.status_code == 200 else "sent"
            deliveries.append(Delivery(str(run.run_id), status, f"HTTP {response.status_code}", path))
        else:
            deliveries.append(Delivery(str(run.run_id), "failed", why, path))
    return deliveries

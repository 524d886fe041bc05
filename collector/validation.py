"""Turning bytes into a run, the same way for HTTP and for ``ingest``: strict, with field paths in errors.

Validating a run is the collector's largest piece of Python work and holds the GIL, so the server does it in
worker processes (``Validator``) while its own process serves requests and writes to DuckDB.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from schemas import RunSubmission

from .errors import InvalidRun

MAX_LISTED = 5


@dataclass(frozen=True)
class Checked:
    """What the store needs to know of a valid run."""

    run_id: str
    results: int


def _loc(parts: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in parts) or "(body)"


def _invalid(exc: ValidationError) -> InvalidRun:
    details = [{"loc": _loc(e["loc"]), "message": e["msg"], "type": e["type"]} for e in exc.errors()]
    listed = "; ".join(f"{d['loc']}: {d['message']}" for d in details[:MAX_LISTED])
    more = f" (and {len(details) - MAX_LISTED} more)" if len(details) > MAX_LISTED else ""
    return InvalidRun(f"invalid run: {listed}{more}", details)


def parse_run(body: bytes | str) -> RunSubmission:
    """A validated run, or InvalidRun whose message names each failing field's path (e.g. results.3.params.n)."""
    try:
        return RunSubmission.model_validate_json(body)
    except ValidationError as exc:
        raise _invalid(exc) from None


def _check_in_worker(body: bytes) -> tuple[str, Any, Any]:
    """Runs in a worker process: only plain values cross back."""
    try:
        run = RunSubmission.model_validate_json(body)
    except ValidationError as exc:
        invalid = _invalid(exc)
        return "invalid", invalid.message, invalid.details
    return "ok", str(run.run_id), len(run.results)


class Validator:
    """Validation in ``workers`` processes (0: in this process, as tests and small machines may prefer)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def start(self) -> None:
        if self.workers > 0:
            # spawn, not fork: the server process has threads (DuckDB's, uvicorn's) that fork would not carry over.
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=context)

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    async def check(self, body: bytes) -> Checked:
        loop = asyncio.get_running_loop()
        if self._pool is None:
            outcome = await loop.run_in_executor(None, _check_in_worker, body)
        else:
            outcome = await loop.run_in_executor(self._pool, _check_in_worker, body)
        kind, first, second = outcome
        if kind == "invalid":
            raise InvalidRun(first, second)
        return Checked(run_id=first, results=second)

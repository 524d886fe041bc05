"""Turning bytes into a run, the same way for HTTP and for ``ingest``: strict, with field paths in errors.

Validating a run is the collector's largest piece of Python work and holds the GIL, so the server does it in
worker processes (``Validator``) while its own process serves requests and writes to DuckDB.

The clock rule: a run that says it started or finished more than ``MAX_AHEAD`` after the collector's clock, or
started before ``EARLIEST`` (a machine whose clock was never set says 1970), is refused (422, naming the field and
the agent's clock as the cause): stored, it would be a GPU's "latest" run for years, hide it from the "no run for 6 h"
alert and push every real run off the home page. Its agent keeps it in the spool, and the reason with it.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from pydantic import ValidationError

from schemas import RunSubmission

from .errors import InvalidRun
from .store.commits import compress, digest
from .store.errors import CollectorError

log = logging.getLogger(__name__)
MAX_LISTED = 5
#: How much lower than the server's a validation worker's scheduling priority is (``nice``).
WORKER_NICENESS = 5
#: How often a worker checks that the server that started it is still its parent.
PARENT_CHECK_S = 0.25
#: The clock rule: how far a run's start or end may be ahead of the collector's clock (clocks a little apart)...
MAX_AHEAD = timedelta(hours=1)
#: ... and the earliest start taken (before flopfleet, and before the GPUs it knows).
EARLIEST = datetime(2020, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Checked:
    """What the store needs to know of a valid run, worked out beside the validation."""

    run_id: str
    results: int
    sha256: str  # of the JSON as received
    gzipped: bytes | None  # the JSON compressed, when it was not sent compressed


def _loc(parts: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in parts) or "(body)"


def _invalid(exc: ValidationError) -> InvalidRun:
    details = [{"loc": _loc(e["loc"]), "message": e["msg"], "type": e["type"]} for e in exc.errors()]
    listed = "; ".join(f"{d['loc']}: {d['message']}" for d in details[:MAX_LISTED])
    more = f" (and {len(details) - MAX_LISTED} more)" if len(details) > MAX_LISTED else ""
    return InvalidRun(f"invalid run: {listed}{more}", details)


def clock_problem(run: RunSubmission, now: datetime | None = None) -> InvalidRun | None:
    """The clock rule (see the module's docstring): why ``run``'s times cannot be taken, or None."""
    now = now or datetime.now(timezone.utc)
    for field, when in (("started_at", run.started_at), ("finished_at", run.finished_at)):
        if when > now + MAX_AHEAD:
            why = (f"{when:%Y-%m-%d %H:%M} UTC is {_ahead(when - now)} after the collector's clock: the agent's clock "
                   "is wrong (set it, e.g. with NTP); the run stays in its spool")  # fmt: skip
            return InvalidRun(f"invalid run: {field}: {why}", [{"loc": field, "message": why, "type": "clock_ahead"}])
    if run.started_at < EARLIEST:
        why = (f"{run.started_at:%Y-%m-%d %H:%M} UTC is before {EARLIEST:%Y-%m-%d}: the agent's clock was never set "
               "(set it, e.g. with NTP); the run stays in its spool")  # fmt: skip
        return InvalidRun(f"invalid run: started_at: {why}", [{"loc": "started_at", "message": why,
                                                              "type": "clock_unset"}])  # fmt: skip
    return None


def _ahead(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours:,.1f} hours" if hours < 48 else f"{hours / 24:,.0f} days"


def parse_run(body: bytes | str, *, now: datetime | None = None) -> RunSubmission:
    """A validated run, or InvalidRun whose message names each failing field's path (e.g. results.3.params.n);
    the clock rule applies at ``now``."""
    try:
        run = RunSubmission.model_validate_json(body)
    except ValidationError as exc:
        raise _invalid(exc) from None
    problem = clock_problem(run, now)
    if problem is not None:
        raise problem
    return run


def _check_in_worker(body: bytes, gzip_it: bool = False) -> tuple[Any, ...]:
    """Runs in a worker process, with the hashing and compressing the server would otherwise do on its event loop;
    only plain values cross back."""
    try:
        run = parse_run(body)
    except InvalidRun as invalid:
        return "invalid", invalid.message, invalid.details
    return "ok", str(run.run_id), len(run.results), digest(body), compress(body) if gzip_it else None


def _warm() -> None:
    """Build the run validator's first-use state (one failing document is enough)."""
    _check_in_worker(b"{}")


def _start_worker(server_pid: int) -> None:
    """A worker yields the CPU to the server's DuckDB writer when both want it: the writer is the one serial stage
    of ingest (on the 2-core machine, seven alternating pairs of rounds all went 3-6 % faster this way); and it
    ends itself once the server is gone (``_orphaned``)."""
    threading.Thread(target=_orphaned, args=(server_pid,), name="flopfleet-parent-watch", daemon=True).start()
    if hasattr(os, "nice"):
        os.nice(WORKER_NICENESS)
    _warm()


def _orphaned(server_pid: int) -> None:
    """Exit as soon as the server is no longer this process's parent (killed, say, by SIGKILL or the OOM killer,
    which leave no chance to stop the pool): a worker waits on a queue whose other end it holds itself, so it would
    wait forever. With the workers gone, multiprocessing's resource tracker, whose pipe they held open, ends too."""
    while os.getppid() == server_pid:
        time.sleep(PARENT_CHECK_S)
    os._exit(0)


class ValidatorGone(CollectorError):
    status_code = 503
    code = "validator_unavailable"


class Validator:
    """Validation in ``workers`` processes (0: in this process, as tests and small machines may prefer).

    A worker that dies (killed for memory, say) breaks its process pool for every run after it: the runs it held
    are answered 503, which agents send again, and the first to see the broken pool starts a new one.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def start(self) -> None:
        """Start the workers and wait until each has imported and built the validator, so the first runs posted
        do not wait for a process to start."""
        if self.workers > 0:
            self._pool = self._new_pool()
            for future in [self._pool.submit(_warm) for _ in range(self.workers)]:
                future.result()
        else:
            _warm()

    def _new_pool(self) -> ProcessPoolExecutor:
        # spawn, not fork: the server process has threads (DuckDB's, uvicorn's) that fork would not carry over.
        context = multiprocessing.get_context("spawn")
        return ProcessPoolExecutor(max_workers=self.workers, mp_context=context, initializer=_start_worker,
                                   initargs=(os.getpid(),))  # fmt: skip

    def stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    async def check(self, body: bytes, *, gzip_it: bool) -> Checked:
        """The valid run's facts (``gzip_it``: also compress it for storage), or InvalidRun."""
        loop = asyncio.get_running_loop()
        pool = self._pool
        try:
            outcome = await loop.run_in_executor(pool, _check_in_worker, body, gzip_it)
        except BrokenProcessPool:
            if pool is not None and pool is self._pool:  # the first to notice replaces it
                log.warning("a validation worker stopped; starting new workers")
                pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()
            raise ValidatorGone("a validation worker stopped while checking this run; send it again") from None
        if outcome[0] == "invalid":
            raise InvalidRun(outcome[1], outcome[2])
        _, run_id, results, sha256, gzipped = outcome
        return Checked(run_id=run_id, results=results, sha256=sha256, gzipped=gzipped)

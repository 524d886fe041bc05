"""Validating runs for the server: the same rule as ``ingest`` (``analysis.parse.read_run``), in worker processes.

Validating a run is the collector's largest piece of Python work and holds the GIL, so the server does it in
worker processes (``Validator``) while its own process serves requests and writes to DuckDB.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from ..analysis.parse import read_run
from ..store.commits import compress, digest
from ..store.errors import CollectorError, InvalidRun, UnsupportedVersion

log = logging.getLogger(__name__)
#: How much lower than the server's a validation worker's scheduling priority is (``nice``).
WORKER_NICENESS = 5
#: How often a worker checks that the server that started it is still its parent.
PARENT_CHECK_S = 0.25


@dataclass(frozen=True)
class Checked:
    """What the store needs to know of a valid run, worked out beside the validation."""

    run_id: str
    results: int
    sha256: str  # of the JSON as received
    gzipped: bytes | None  # the JSON compressed, when it was not sent compressed
    document: bytes | None = None  # a newer minor's run: the JSON the store reads rows from (``analysis/newer``)
    not_understood: tuple[str, ...] = ()


def check(body: bytes, gzip_it: bool = False) -> Checked:
    """A run's facts for the store (``gzip_it``: also compressed for storage), or InvalidRun."""
    parsed = read_run(body)
    return Checked(run_id=str(parsed.run.run_id), results=len(parsed.run.results), sha256=digest(body),
                   gzipped=compress(body) if gzip_it else None, document=parsed.document,
                   not_understood=parsed.not_understood)  # fmt: skip


def _check_in_worker(body: bytes, gzip_it: bool = False) -> tuple[Any, ...]:
    """Runs in a worker process, with the hashing and compressing the server would otherwise do on its event loop;
    only the run's facts cross back, never the model."""
    try:
        return "ok", check(body, gzip_it)
    except InvalidRun as invalid:
        return "invalid", invalid.message, invalid.details, invalid.code


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
        self._warming: list[Future[None]] = []

    def start(self) -> None:
        """Start the workers and wait until each has imported and built the validator, so the first runs posted
        do not wait for a process to start."""
        self.launch()
        self.wait()

    def launch(self) -> None:
        """Start the workers without waiting for them (``wait`` does): ``serve`` starts them first, so that they
        import while the database opens (a start's two longest steps, one beside the other); a second call does
        nothing."""
        if self.workers > 0 and self._pool is None:
            self._pool = self._new_pool()
            self._warming = [self._pool.submit(_warm) for _ in range(self.workers)]

    def wait(self) -> None:
        """Until every worker launched has built the validator (in this process, with no workers)."""
        if self.workers == 0:
            _warm()
        for future in self._warming:
            future.result()
        self._warming = []

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
            _, message, details, code = outcome
            raise (UnsupportedVersion if code == UnsupportedVersion.code else InvalidRun)(message, details)
        checked: Checked = outcome[1]
        return checked

"""What every launcher is given and gives back: the planned cases, how to finish each result, progress."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from schemas import Gpu, Result
from schemas.timeline import ProcessTimes

from ..benchmarks import AnyBenchmark, Benchmark, Case
from ..devices.target import Target
from ..harness.cases import Measured, failed_result, finish_case
from ..machine.monitor import Monitor
from ..stop import Stop

SPENT = "the run's time budget was spent before this case"


@dataclass(frozen=True)
class Job:
    """One planned device case on its target."""

    target: Target
    bench: Benchmark[Any]
    case: Case


@dataclass
class Finisher:
    """Turns what was measured into a result in the agent's process, which holds the monitor and the GPU records;
    with ``origin`` (the agent's start, on time.monotonic) each result says when it was handed over and came back."""

    monitor: Monitor
    gpus: dict[int, Gpu]
    deadline: float | None = None
    origin: float | None = None
    stop: Stop = field(default_factory=Stop)  # the run told to stop (``agent.stop``): the rest is skipped

    def now(self) -> float:
        return self.monitor.now()

    def __call__(self, job: Job, measured: Measured, started: float) -> Result:
        gpu = self.gpus.get(job.target.index) if job.target.index is not None else None
        result = finish_case(job.bench, job.case, job.target, measured, self.monitor, gpu, started)
        if self.origin is None:
            return result
        finished = time.monotonic() - self.origin
        # Converted, not measured back from ``finished``: a second clock read taken later (a loaded host, another
        # thread holding the GIL) dated a case's start before the previous case's end.
        handed = max(self.monitor.monotonic(started) - self.origin, 0.0)
        return result.model_copy(update={"started_s": handed, "finished_s": finished})

    def spent(self) -> bool:
        """Whether no more cases are measured: the time budget is spent, or the run was told to stop."""
        return self.stop.requested or (self.deadline is not None and time.monotonic() > self.deadline)

    @property
    def spent_reason(self) -> str:
        return self.stop.reason if self.stop.requested else SPENT

    def skipped(self, job: Job) -> Result:
        return failed_result(job.bench, job.case, job.target, "skipped", self.spent_reason)

    def failed(self, job: Job, reason: str, started: float) -> Result:
        """An ``error`` for a case whose measuring process died or hung, with the GPU's state meanwhile."""
        return self(job, Measured(None, "error", reason, self.now() - started), started)


class Progress(Protocol):
    """Where each case stands; ``where`` is the device or group it runs on."""

    def start(self, bench: AnyBenchmark, case: Case, where: str) -> None: ...

    def end(self, bench: AnyBenchmark, case: Case, where: str, result: Result | None = None) -> None:
        """The case ended (counted); ``result`` None when it comes later, with ``settled``."""

    def settled(self, bench: AnyBenchmark, case: Case, where: str, result: Result) -> None:
        """The result of a case already counted (a group benchmark's, once all its cases are refined)."""


#: (cases done, benchmark, case, where, its result or None when it starts)
Report = Callable[[int, AnyBenchmark, Case, str, Result | None], None]


@dataclass
class Counted:
    """Progress over a known number of cases, safe to report from several threads (``--parallel``)."""

    report: Report
    done: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, bench: AnyBenchmark, case: Case, where: str) -> None:
        with self._lock:
            self.report(self.done, bench, case, where, None)

    def end(self, bench: AnyBenchmark, case: Case, where: str, result: Result | None = None) -> None:
        with self._lock:
            self.done += 1
            if result is not None:
                self.report(self.done, bench, case, where, result)

    def settled(self, bench: AnyBenchmark, case: Case, where: str, result: Result) -> None:
        with self._lock:
            self.report(self.done, bench, case, where, result)


class DeviceLauncher(Protocol):
    """Runs device cases somewhere and returns their results in plan order."""

    def prepare(self, warm: tuple[str, ...], count: int = 1, overlap: bool = True) -> None:
        """Get ready early (start measuring processes importing ``warm``), before the agent imports torch;
        ``overlap``: model code may be imported while other cases are measured (not on a CPU, which both share)."""

    def run(self, jobs: list[Job], finish: Finisher, progress: Progress) -> list[Result]: ...

    def processes(self, origin: float) -> list[ProcessTimes]:
        """The measuring processes it started, their moments in seconds from ``origin`` (none for the agent's own)."""
        ...


def process_times(name: str, times: dict[str, float | None], origin: float, modules: tuple[str, ...]) -> ProcessTimes:
    """A process's moments (time.monotonic) as seconds from ``origin``; one before it (never, but clocks) is 0."""

    def since(key: str) -> float | None:
        at = times.get(key)
        return None if at is None else max(at - origin, 0.0)

    return ProcessTimes(name=name, started_s=since("started") or 0.0, imported_s=since("imported"),
                        ready_s=since("ready"), stopped_s=since("stopped"), modules=modules[:32])  # fmt: skip

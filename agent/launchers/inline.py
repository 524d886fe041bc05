"""Device cases in the agent's own process: for debugging, and where processes cannot be started.

A case that crashes the process or never returns takes the agent with it; ``process`` is the default for that.
"""

from __future__ import annotations

from typing import Any

from schemas import Result
from schemas.timeline import ProcessTimes

from ..benchmarks import Benchmark
from ..harness.cases import CaseContext, measure_case, select
from ..timing import TimingPolicy
from .base import Finisher, Job, Progress


class InlineLauncher:
    def __init__(self, policy: TimingPolicy) -> None:
        self.policy = policy

    def prepare(self, warm: tuple[str, ...], count: int = 1, overlap: bool = True) -> None:
        """Nothing to start: the cases run here."""

    def processes(self, origin: float) -> list[ProcessTimes]:
        """None: the cases run in the agent's own process."""
        return []

    def run(self, jobs: list[Job], finish: Finisher, progress: Progress) -> list[Result]:
        results: list[Result] = []
        contexts: dict[str, CaseContext] = {}
        previous: Benchmark[Any] | None = None
        for job in jobs:
            if previous is not None and previous is not job.bench:
                previous.close()
            previous = job.bench
            progress.start(job.bench, job.case, job.target.label)
            if finish.spent():
                result = finish.skipped(job)
            else:
                if job.target.label not in contexts:
                    select(job.target)
                    contexts[job.target.label] = CaseContext(job.target, self.policy)
                started = finish.now()
                result = finish(job, measure_case(job.bench, job.case, contexts[job.target.label]), started)
            progress.end(job.bench, job.case, job.target.label, result)
            results.append(result)
        if previous is not None:
            previous.close()
        for ctx in contexts.values():
            ctx.free_memory()
        return results

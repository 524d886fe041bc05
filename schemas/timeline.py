"""Where a run's wall time went: the agent's and its measuring processes' moments, in seconds from the agent's start.

Each result carries ``started_s`` and ``finished_s`` on the same clock (when the agent handed the case over and
when its result came back), so a run says by itself how long its start-up, each measuring process's start, each
case and each hand-off between cases took (``benchmarks/suite_breakdown.py`` reads it).
"""

from __future__ import annotations

from pydantic import Field

from .base import Seconds, Slug, WireModel

MAX_PROCESSES = 256


class ProcessTimes(WireModel):
    """One measuring process: started by the agent, done importing (torch and the modules its cases need), set up
    on its device (ready for a first case), stopped; None where it never got there."""

    name: Slug
    started_s: Seconds
    imported_s: Seconds | None = None
    ready_s: Seconds | None = None
    stopped_s: Seconds | None = None
    modules: tuple[Slug, ...] = Field(default=(), max_length=32)


class Timeline(WireModel):
    """Seconds from the agent process's start (as the operating system dates it): the run's clock started
    (``started_at``, once torch was imported and the devices found) and stopped (``finished_at``)."""

    run_started_s: Seconds
    run_finished_s: Seconds
    processes: tuple[ProcessTimes, ...] = Field(default=(), max_length=MAX_PROCESSES)

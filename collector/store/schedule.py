"""What the writer does besides committing runs, and when: ask for a refresh, checkpoint, archive a batch.

Commits come first; the other chores are fitted around them. A refresh is asked for after ``FIGURES_IDLE_S``
without runs (the refresher also starts by itself every few commits), and a checkpoint once the figures are in
and the writer has been idle ``IDLE_CHECKPOINT_S``. Archiving (with retention) does not wait for a pause, which a steady
load never leaves: one small batch at a time between commits, each followed, while runs keep arriving, by a
rest long enough that archiving takes at most ``ARCHIVE_SHARE`` of the writer's time; with no runs for a moment
the batches follow one another. When a pass finds nothing due, the next is ``ARCHIVE_EVERY_S`` later (sooner
while runs await their figures: a run is archived only once it has them).

The schedule only decides; the clock is given (``time.monotonic`` in the store, a plain function in tests).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Literal

#: How long the writer waits without runs before it asks for the figures of what it committed...
FIGURES_IDLE_S = 0.25
#: ... and, once they are in, before it folds its log into the file (``CHECKPOINT``): not inside a commit, where
#: DuckDB would pause every run of that commit for 100-200 ms.
IDLE_CHECKPOINT_S = 0.5
#: The first archiving pass (with retention) waits this long after the writer starts, the next ones this long apart.
ARCHIVE_FIRST_S = 5.0
ARCHIVE_EVERY_S = 600.0
#: After a batch that failed (an unwritable archive folder, say), the next try.
ARCHIVE_RETRY_S = 60.0
#: The most of the writer's time archiving takes while runs arrive (``benchmarks/collector_retention.py``).
ARCHIVE_SHARE = 0.25
#: Runs committed within this long count as "runs arriving" for the share.
BUSY_S = 1.0

Chore = Literal["refresh", "checkpoint"]
#: A wait may end a hair before its deadline.
_EARLY_S = 1e-3


class WriterSchedule:
    def __init__(self, *, retention: bool, share: float = ARCHIVE_SHARE,
                 clock: Callable[[], float] = time.monotonic) -> None:  # fmt: skip
        if not 0 < share <= 1:
            raise ValueError(f"archive share {share} is not in (0, 1]")
        self._clock = clock
        self.share = share
        self.unflushed = False  # committed since the last checkpoint
        self._retention = retention
        self._archive_at = math.inf  # until the writer starts
        self._last_commit = -math.inf
        self._active_at = clock()  # the end of the last commit or batch: idle since then
        #: Seconds spent archiving, and batches, since the store opened (what ``archive_share`` reports).
        self.archive_s = 0.0
        self.batches = 0

    def start(self) -> None:
        """The writer started: the first archiving pass (with retention) is ``ARCHIVE_FIRST_S`` away."""
        if self._retention:
            self._archive_at = self._clock() + ARCHIVE_FIRST_S

    def archive_now(self) -> bool:
        """Whether a batch is due and within its share of the writer's time (checked between commits)."""
        return self._clock() >= self._archive_at

    def wait_s(self, settled: bool) -> float | None:
        """How long to wait for a run before the next chore may be due (None: until a run comes)."""
        now = self._clock()
        waits = [self._archive_at - now] if self._archive_at < math.inf else []
        if not settled:
            waits.append(FIGURES_IDLE_S)  # asked again each time, until the figures are in
        elif self.unflushed:
            waits.append(IDLE_CHECKPOINT_S - (now - self._active_at))
        return max(0.0, min(waits)) if waits else None

    def chore(self, settled: bool) -> Chore | None:
        """After a wait without runs: the chore due now, if any (an archive batch is checked by ``archive_now``)."""
        idle = self._clock() - self._active_at + _EARLY_S
        if not settled:
            return "refresh" if idle >= FIGURES_IDLE_S else None
        if self.unflushed and idle >= IDLE_CHECKPOINT_S:
            return "checkpoint"
        return None

    def committed(self) -> None:
        self._last_commit = self._active_at = self._clock()
        self.unflushed = True

    def wrote(self) -> None:
        """The store wrote outside a commit (a probe, recovering): the log is folded in at the next pause after it."""
        self._active_at = self._clock()
        self.unflushed = True

    def checkpointed(self, done: bool) -> None:
        """``done``: the log is folded in; otherwise DuckDB refused (a long query ran) and the next pause tries."""
        self.unflushed = not done

    def archived(self, moved: int | None, took_s: float, *, waiting: bool, settled: bool = True) -> None:
        """A batch ended: ``moved`` runs (0: none due; None: it failed) in ``took_s``; ``waiting``: a run queued
        meanwhile; ``settled``: every run had its figures (an unsummarised run is never archived, so a pass that
        found none while runs were waiting or unsummarised is tried again soon)."""
        now = self._active_at = self._clock()
        self.archive_s += took_s
        self.batches += 1
        if moved is None:
            self._archive_at = now + ARCHIVE_RETRY_S
        elif moved == 0:
            self._archive_at = now + (ARCHIVE_EVERY_S if settled and not waiting else ARCHIVE_FIRST_S)
        else:
            self.unflushed = True
            busy = waiting or now - self._last_commit < BUSY_S
            self._archive_at = now + (took_s * (1 - self.share) / self.share if busy else 0.0)

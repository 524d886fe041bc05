"""The writer's schedule on its own, with a clock the test moves: chores wait for pauses, archiving does not and keeps
to its share of the writer's time."""

from __future__ import annotations

import pytest

from collector.store import schedule
from collector.store.schedule import WriterSchedule


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_refresh_then_checkpoint_wait_for_pauses() -> None:
    clock = Clock()
    writer = WriterSchedule(retention=False, clock=clock)
    assert writer.wait_s(settled=True) is None  # nothing to do: wait for a run as long as it takes
    writer.committed()
    assert writer.wait_s(settled=False) == schedule.FIGURES_IDLE_S
    clock.now += schedule.FIGURES_IDLE_S / 2
    assert writer.chore(settled=False) is None  # not idle long enough
    clock.now += schedule.FIGURES_IDLE_S / 2
    assert writer.chore(settled=False) == "refresh"
    assert writer.wait_s(settled=True) == pytest.approx(schedule.IDLE_CHECKPOINT_S - schedule.FIGURES_IDLE_S)
    clock.now += schedule.IDLE_CHECKPOINT_S
    assert writer.chore(settled=True) == "checkpoint"
    writer.checkpointed(False)  # DuckDB refused (a long query): tried again at the next pause
    assert writer.chore(settled=True) == "checkpoint"
    writer.checkpointed(True)
    assert writer.chore(settled=True) is None and writer.wait_s(settled=True) is None


def test_archiving_starts_after_the_writer_and_follows_what_each_pass_found() -> None:
    clock = Clock()
    writer = WriterSchedule(retention=True, clock=clock)
    clock.now += 3600
    assert not writer.archive_now()  # no writer yet
    writer.start()
    assert writer.wait_s(settled=True) == schedule.ARCHIVE_FIRST_S
    clock.now += schedule.ARCHIVE_FIRST_S
    assert writer.archive_now()
    writer.archived(100, 0.3, waiting=False)
    assert writer.archive_now()  # idle: the next batch at once
    assert writer.chore(settled=True) is None  # a batch is work too: the checkpoint waits for a pause after it
    writer.checkpointed(True)
    for moved, waiting, settled, wait in [(0, False, True, schedule.ARCHIVE_EVERY_S),
                                          (0, True, True, schedule.ARCHIVE_FIRST_S),  # runs queued: maybe due ones
                                          (0, False, False, schedule.ARCHIVE_FIRST_S),  # due, but without figures
                                          (None, False, True, schedule.ARCHIVE_RETRY_S)]:  # fmt: skip
        writer.archived(moved, 0.3, waiting=waiting, settled=settled)
        assert not writer.archive_now() and writer.wait_s(settled=True) == pytest.approx(wait)
        clock.now += wait


def test_under_a_steady_load_archiving_keeps_to_its_share_and_gets_on() -> None:
    """Ten runs a second, each commit 20 ms, each batch 300 ms: the writer is never idle for a chore's pause, and
    the old rule (archive only after 0.75 s idle) archived nothing; this one archives at its share."""
    clock, share = Clock(), 0.25
    writer = WriterSchedule(retention=True, share=share, clock=clock)
    writer.start()
    began, archiving, batches, next_run = clock.now, 0.0, 0, clock.now
    while clock.now - began < 60:
        if writer.archive_now():
            clock.now += 0.3
            writer.archived(100, 0.3, waiting=clock.now >= next_run)
            archiving += 0.3
            batches += 1
            continue
        wait = writer.wait_s(settled=True)
        if wait is None or clock.now + wait >= next_run:  # a run arrives first: commit it
            clock.now = max(clock.now, next_run) + 0.02
            writer.committed()
            next_run += 0.1
        else:
            clock.now += wait
            assert writer.chore(settled=True) is None  # never idle for a checkpoint under this load
    assert archiving / (clock.now - began) <= share + 0.01
    assert batches >= 0.9 * share * (60 - schedule.ARCHIVE_FIRST_S) / 0.3  # and close to it: it is not starved


def test_a_probe_that_wrote_waits_a_pause_before_its_checkpoint() -> None:
    """After recovering (a probe wrote, long after the last commit), the checkpoint that may fail on a disk just
    freed waits for a pause, as after a commit, and does not come at once."""
    clock = Clock()
    writer = WriterSchedule(retention=False, clock=clock)
    clock.now += 60
    writer.wrote()
    assert writer.chore(settled=True) is None and writer.wait_s(settled=True) == schedule.IDLE_CHECKPOINT_S
    clock.now += schedule.IDLE_CHECKPOINT_S
    assert writer.chore(settled=True) == "checkpoint"

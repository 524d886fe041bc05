"""Whether a measurement got the host it needed: what the measuring process's threads waited for a CPU, and on a
GPU how long the device idled between the cell's repeats, over the window that made the figure.

A busy host shows up in a benchmark as a confident wrong number: a 2-core machine with other work on it stored a
memory-scale figure of 1 GB/s beside 163 GB/s for copy, with a CV of 0.8 % (issue 29). Nothing in the timings
says so; the scheduler does. Linux counts, per thread, the time it ran and the time it was ready to run but
waited in a run queue (``/proc/<pid>/task/<tid>/schedstat``; `Documentation/scheduler/sched-stats`): their
ratio over the measuring window is what the measurement was denied. On a GPU the host only needs to keep the
device fed, so a figure there is starved only where both say so: the host waited, and the device, inside the repeats
its events time, followed a launching thread that was off its CPU (which it does not while the host keeps ahead).
The rules live here, once; ``timing`` reads the counters and ``cases`` flags the result.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from schemas import TimingStats

from ..machine.priority import LOWEST_NICE

#: A measurement whose threads waited this share of the time they were ready to run is starved: single-threaded
#: CPU-bound work is then 1 / (1 - share) times slower than with a CPU to itself (1.67x at 0.4), and work split over
#: threads that wait for each other far more (a 2-thread memory copy beside five busy processes on 2 cores: 0.84
#: waited, 335x slower, 2026-12-03). Lower flags a quiet machine's short cells: while a second measuring process
#: imported transformers beside them, the quick suite's cells on 2 cores waited up to 0.30 and read within their
#: usual spread (on a CPU the agent no longer imports beside a measurement: ``ProcessLauncher.prepare``).
HOST_WAIT_STARVED = 0.4
#: Less run and wait than this in a window says nothing: the kernel adds a running thread's time at its clock tick
#: (1-4 ms), so a window of a few milliseconds can read no time at all, or one tick of waiting as a large share.
LEAST_OBSERVED_S = 0.01
#: On a GPU: the host waited at least ``GPU_HOST_WAIT_STARVED`` of its time, and the median repeat, which the figure
#: is, may be ``LAUNCH_SHARE_STARVED`` longer for the time the device followed a launching thread off its CPU
#: (``launch_share``). The device idle between repeats is not timed by a repeat's events; it is kept (``device_idle``)
#: but flags nothing.
GPU_HOST_WAIT_STARVED = 0.10
LAUNCH_SHARE_STARVED = 0.05
#: The device followed its host to a repeat's end where the end event completes within this long of the repeat's
#: last launch; a repeat still running later had work queued when the launch ended (``loop.Idle`` counts the
#: launching thread's time off a CPU in full only where it followed: docs/methodology.md, "A busy host").
FOLLOWED_WITHIN_S = 0.001
#: Windows re-measured after a starved one, at most; after ``GIVE_UP_AFTER`` starved cases in a row a process stops
#: re-measuring (the host is busy for good: measuring again would make the run take many times its usual time).
REMEASURES = 2
GIVE_UP_AFTER = 3
#: The busy loop that tells, before measuring, whether the host is busy (``check_host``), and how often a run told
#: to wait for a busy host looks again.
HOST_CHECK_S = 0.1
HOST_POLL_S = 10.0
#: A loop run at a lower priority than the agent's (``check_host(nice=...)``) that has not reported in this long
#: waited nearly all of it: the host is busy.
HOST_CHECK_GIVE_UP_S = 2.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HostTimes:
    """A process's threads' time on a CPU and waiting for one, in seconds, summed over the threads at one moment."""

    ran_s: float
    waited_s: float


def host_times(pid: int | str = "self") -> HostTimes | None:
    """What the threads of ``pid`` have run and waited so far; None where the kernel does not say (no schedstat)."""
    ran = waited = 0
    folder = f"/proc/{pid}/task"
    try:
        tasks = os.listdir(folder)
    except OSError:
        return None
    seen = False
    for task in tasks:
        try:
            with open(f"{folder}/{task}/schedstat", encoding="ascii") as stat:
                fields = stat.read().split()
            ran, waited, seen = ran + int(fields[0]), waited + int(fields[1]), True
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
            continue
    return HostTimes(ran / 1e9, waited / 1e9) if seen else None


def wait_share(before: HostTimes | None, after: HostTimes | None) -> float | None:
    """Of the time the threads were ready to run between two readings, the share they waited for a CPU."""
    if before is None or after is None:
        return None
    ran, waited = max(after.ran_s - before.ran_s, 0.0), max(after.waited_s - before.waited_s, 0.0)
    return waited / (ran + waited) if ran + waited >= LEAST_OBSERVED_S else None


class HostWindow:
    """What one measuring window got of the host: made as the window starts, ``share()`` once it ended."""

    def __init__(self) -> None:
        self._before = host_times()

    def share(self) -> float | None:
        return wait_share(self._before, host_times())


def starved(stats: TimingStats) -> bool:
    """Whether a window did not get the host it needed (the flag ``starved``). On a CPU: its threads waited
    ``HOST_WAIT_STARVED`` of their time. On a GPU the host only has to stay ahead of the device: starved where it
    waited (``GPU_HOST_WAIT_STARVED``) and the device, timed, waited on it (``LAUNCH_SHARE_STARVED``), whatever the
    call (a kernel, a graph replay, a training step launched kernel by kernel). A host that waited while the device
    had work queued costs the figure nothing: beside as many busy processes as cores, a call of 200 kernels read the
    same time with the host waiting 0.99 of its time (docs/methodology.md, "A busy host")."""
    if stats.host_wait is None:
        return False
    if stats.method == "perf_counter":
        return stats.host_wait >= HOST_WAIT_STARVED
    waited_on = stats.launch_share is not None and stats.launch_share >= LAUNCH_SHARE_STARVED
    return stats.host_wait >= GPU_HOST_WAIT_STARVED and waited_on


@dataclass
class Remeasure:
    """When a starved window is measured again: up to ``REMEASURES`` times a case, until ``GIVE_UP_AFTER`` cases in a
    row stayed starved (then a busy host costs the run no more than its usual time, and the flags say why)."""

    starved_in_a_row: int = 0

    def tries(self) -> int:
        return 0 if self.starved_in_a_row >= GIVE_UP_AFTER else REMEASURES

    def record(self, still_starved: bool) -> None:
        self.starved_in_a_row = self.starved_in_a_row + 1 if still_starved else 0


@dataclass(frozen=True)
class HostCheck:
    """What a short busy loop got of the CPU at a priority (``nice``): said before measuring, so that a run on a busy
    host says so at once instead of only in its flags."""

    seconds: float
    waited: float | None  # share of the loop's time it waited for a CPU; None where the kernel does not say
    nice: int = 0

    @property
    def busy(self) -> bool:
        return self.waited is not None and self.waited >= HOST_WAIT_STARVED

    def reason(self) -> str:
        return (
            f"the host is busy: the agent waited for a CPU {self.waited or 0.0:.0%} of a {self.seconds:g} s "
            f"busy loop at nice {self.nice}"
        )


def check_host(
    seconds: float = HOST_CHECK_S, *, nice: int | None = None, give_up_s: float = HOST_CHECK_GIVE_UP_S
) -> HostCheck:
    """Spin ``seconds`` of wall time on one thread and see what share of it was spent waiting for a CPU.

    ``nice`` (lower than this process's priority): the loop runs in a forked child at that priority, and this
    process keeps its own until it has decided, since at nice 19 on a busy host even saying why and exiting took
    25 s (a 2-core machine, five busy processes). A child that has not reported within ``give_up_s`` is killed:
    it waited nearly all of that time."""
    current = os.getpriority(os.PRIO_PROCESS, 0)
    if nice is None or nice <= current:
        return HostCheck(seconds, _spin(seconds), current)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child does as little as it can and leaves without Python's clean-up
        try:
            os.close(read)
            os.setpriority(os.PRIO_PROCESS, 0, nice)
            waited = _spin(seconds)
            os.write(write, b"" if waited is None else repr(waited).encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        if select.select([read], [], [], give_up_s)[0]:
            said = os.read(read, 64)
            return HostCheck(seconds, float(said) if said else None, nice)
        return HostCheck(give_up_s, (give_up_s - seconds) / give_up_s, nice)  # its loop ended; it was not let run
    finally:
        os.close(read)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _spin(seconds: float) -> float | None:
    window = HostWindow()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return window.share()


def yielding(priority: str) -> bool:
    """Whether the agent yields to the host's other work: ``--priority low``, or started at a positive nice value
    (``nice -n 19``, systemd's ``Nice=``), which ``normal`` leaves as it is."""
    return priority == "low" or os.getpriority(os.PRIO_PROCESS, 0) > 0


def decide_host(
    priority: str,
    when_busy: str,
    wait_s: float,
    *,
    check: Callable[[], HostCheck] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Why the run measures nothing (the host is busy and the agent yields to it), or None: measure.

    A busy host is said at once (a warning), whatever the priority. At normal priority the run goes on: it gets
    its fair share, and the windows that did not are flagged. Yielding (``yields``) it would get almost nothing (a
    quick run that takes 26 s had not ended after 900 s), so ``when_busy`` decides as it does for a busy GPU:
    ``skip`` (nothing is measured: the run ends at once, ``errors.HostBusy``), ``wait`` (look again every
    ``HOST_POLL_S`` for up to ``wait_s``), ``measure``. The host is looked at the priority the run will measure at
    (``check_host``: ``low`` in a child at nice 19, before this process lowers itself)."""
    yields = yielding(priority)
    if check is None:
        check = functools.partial(check_host, nice=LOWEST_NICE if priority == "low" else None)
    seen = check()
    if not seen.busy:
        return None
    if not yields or when_busy == "measure":
        log.warning("%s: figures it starves are flagged 'starved' and kept out of verdicts", seen.reason())
        return None
    if when_busy == "wait":
        until = clock() + wait_s
        while seen.busy and clock() < until:
            sleep(min(HOST_POLL_S, max(0.0, until - clock())))
            seen = check()
        if not seen.busy:
            return None
        return f"{seen.reason()} (still, after waiting {wait_s:g} s; --priority normal measures beside the load)"
    return f"{seen.reason()}; --priority normal measures beside the load, --when-busy wait waits for it"

"""When this process started, and the clock a rank of a worker group times its calls with on the CPU."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Protocol

from .stats import Method

_IMPORTED = time.monotonic()


def process_started() -> float:
    """When this process started, on ``time.monotonic``'s clock: dated by the kernel where it says (Linux's
    /proc, to its clock tick), else when this module was imported."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED
    return min(time.monotonic() - max(age, 0.0), _IMPORTED)


class Clock(Protocol):
    """Times ``calls`` back-to-back calls once, on one rank's device."""

    @property
    def method(self) -> Method: ...

    def time(self, fn: Callable[[], object], calls: int) -> float: ...


class PerfClock:
    """``perf_counter`` around the calls: the CPU runs them synchronously."""

    method: Method = "perf_counter"

    def time(self, fn: Callable[[], object], calls: int) -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return time.perf_counter() - t0

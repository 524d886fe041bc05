"""A GPU's energy over one timed window, from NVML's total-energy counter: what every per-watt figure stands on.

The counter (millijoules since the driver loaded) does not move continuously. On the H200 it moves every 100 ms,
each step the energy of the 100 ms before it, and one read costs about 4 ms (a call into the driver);
``benchmarks/energy_counter.py`` measured both (docs/results/h200.md, "Energy per figure"). A window's energy is
therefore a whole number of updates: divided by the window's length it is off by up to one update (a 150 ms window
holds one or two: up to a third off). Divided by the time those updates cover instead, it is the board's mean power
over them: the count is the whole number nearest what the board's own power reading says, among the two the window's
length allows. A window no update fell in says nothing (None), never a guess.

The updates a window holds cover up to one period before it (the first one's), where the same case was warming up.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from .nvml import normalize_uuid

#: How often the counter moves: every 100 ms on the H200 (docs/results/h200/energy/counter.json, idle and loaded).
UPDATE_S = 0.1


@dataclass(frozen=True)
class WindowEnergy:
    """The counter's move over a window: ``joules`` over ``span_s`` (whole updates), so ``power_w`` on average."""

    joules: float
    span_s: float
    window_s: float

    @property
    def power_w(self) -> float:
        return self.joules / self.span_s


def window_energy(
    joules: float, window_s: float, power_read_w: float | None, update_s: float = UPDATE_S
) -> WindowEnergy | None:
    """What a window's counter move says: the whole number of updates it holds is the one, of the two its length
    allows, whose mean power is nearest the board's reading (its 1 s average); None where no update fell in it."""
    if joules <= 0 or window_s <= 0:
        return None
    low = max(1, math.floor(window_s / update_s))
    high = max(low, math.ceil(window_s / update_s))
    if power_read_w is None or power_read_w <= 0:
        count = max(1, round(window_s / update_s))
    else:
        count = min(range(low, high + 1), key=lambda k: abs(joules / (k * update_s) - power_read_w))
    return WindowEnergy(joules=joules, span_s=count * update_s, window_s=window_s)


@dataclass(frozen=True)
class Mark:
    """The counter as read at a window's start: when (the read's midpoint, ``time.perf_counter``) and its value."""

    t: float
    millijoules: int


class EnergyMeter:
    """The counter of one GPU, for the process that measures on it. NVML opens in a background thread (it takes the
    driver's time while torch starts), and every read that fails is None: a missing counter never stops a case."""

    def __init__(self, uuid: str) -> None:
        self._nvml: Any = None
        self._handle: Any = None
        self._opening = threading.Thread(target=self._open, args=(uuid,), name="flopfleet-energy", daemon=True)
        self._opening.start()

    def _open(self, uuid: str) -> None:
        try:
            import pynvml

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByUUID("GPU-" + normalize_uuid(uuid))
            self._nvml = pynvml
        except Exception:  # no NVML, no such GPU, a virtual GPU without the call: no energy figures
            self._handle = None

    @property
    def available(self) -> bool:
        self._opening.join()
        return self._handle is not None

    def _read(self) -> int | None:
        try:
            return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except Exception:  # see the class
            return None

    def start(self) -> Mark | None:
        if not self.available:
            return None
        before = time.perf_counter()
        value = self._read()
        return Mark(t=(before + time.perf_counter()) / 2, millijoules=value) if value is not None else None

    def stop(self, mark: Mark | None) -> WindowEnergy | None:
        """The window from ``mark`` to now (call it once the window's work is done)."""
        if mark is None:
            return None
        before = time.perf_counter()
        value = self._read()
        now = (before + time.perf_counter()) / 2
        if value is None:
            return None
        try:
            power = self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000.0
        except Exception:  # see the class
            power = None
        return window_energy((value - mark.millijoules) / 1000.0, now - mark.t, power)

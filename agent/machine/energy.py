"""A GPU's energy over one timed window, from NVML's total-energy counter: what every per-watt figure stands on.

The counter (millijoules since the driver loaded) does not move continuously. On the H200 it moves every 100 ms,
each step the energy of the 100 ms before it, and one read costs about 4 ms (a call into the driver);
``benchmarks/energy_counter.py`` measured both (docs/methodology.md, "Energy and figures per watt"). So:

- A window's energy counts from the first update inside it: the counter is read at the window's start and then
  between its batches (the next batch already queued) until it moves. The update the start read saw last covers up
  to 100 ms before the window (a rest, a graph capture, the previous case), which read a power-capped product 30 %
  low on the H200 before this rule.
- It is whole updates: divided by the time since that first update it would be off by up to one update (a 150 ms
  span holds one or two). Divided by the time the updates cover instead, it is the board's mean power over them: the
  count is the whole number, of those the span's length allows, whose mean power is nearest the board's own 1 s
  reading. A window with no update after its first says nothing (None), never a guess.
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
#: The least time between two reads while a window waits for the counter's first move (each read costs ~4 ms).
OBSERVE_EVERY_S = 0.01


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
    """What the counter's move over ``window_s`` since an update says: the whole number of updates it holds is the
    one, of those the span allows (more than one period less, up to one more: the first update was seen up to a read
    late), whose mean power is nearest the board's reading (its 1 s average); None where it did not move."""
    if joules <= 0 or window_s <= 0:
        return None
    periods = window_s / update_s
    low = max(1, math.floor(periods - 1) + 1)
    high = max(low, math.floor(periods + 1))
    if power_read_w is None or power_read_w <= 0:
        count = max(1, round(window_s / update_s))
    else:
        count = min(range(low, high + 1), key=lambda k: abs(joules / (k * update_s) - power_read_w))
    return WindowEnergy(joules=joules, span_s=count * update_s, window_s=window_s)


class Window:
    """One window's reads of the counter: its value at the start, then the first read that saw it move (``first``):
    the energy counted runs from that update, inside the window, never from one that covers time before it."""

    def __init__(self, millijoules: int) -> None:
        self.start_mj = millijoules
        self.first: tuple[float, int] | None = None  # (read's midpoint, perf_counter; value) once it moved
        self.last_read = time.perf_counter()


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

    def start(self) -> Window | None:
        if not self.available:
            return None
        value = self._read()
        return Window(value) if value is not None else None

    def observe(self, window: Window | None) -> None:
        """Between a window's batches (the next one already queued, so the GPU never waits on the read): read the
        counter until it first moves, at most every ``OBSERVE_EVERY_S``; nothing once it has."""
        if window is None or window.first is not None:
            return
        before = time.perf_counter()
        if before - window.last_read < OBSERVE_EVERY_S:
            return
        value = self._read()
        window.last_read = time.perf_counter()
        if value is not None and value != window.start_mj:
            window.first = ((before + window.last_read) / 2, value)

    def stop(self, window: Window | None) -> WindowEnergy | None:
        """The window from its first update to now (call it once the window's work is done)."""
        if window is None or window.first is None:
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
        t, first = window.first
        return window_energy((value - first) / 1000.0, now - t, power)

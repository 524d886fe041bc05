"""A GPU's energy over one timed window, from NVML's total-energy counter: what every per-watt figure stands on.

The counter (millijoules since the driver loaded) does not move continuously. On the H200 it moves every 100 ms,
each step the energy of the 100 ms before it, and one read costs about 4 ms (a call into the driver);
``benchmarks/energy_counter.py`` measured both (docs/methodology.md, "Energy and figures per watt"). So:

- A window's energy runs from the counter's first move inside it to its last: the counter is read at the window's
  start, then every 10 ms by a thread of its own (the call into the driver releases the interpreter, so the timing
  loop goes on meanwhile), and at its end. Counting from the update the start read saw last would take in up to
  100 ms before the window (a rest, a graph capture, the previous case): that read a power-capped product 30 % low on
  the H200.
- Those moves are whole updates apart, and the reads around each move bound when it happened, so they bound how
  many updates lie between the two: with reads 10 ms apart, one count. The energy is divided by that many 100 ms
  periods, never by the window's length (a 150 ms window holds one or two updates: a third off either way). Where
  the bounds allow several counts (a read held up), the board's own power reading picks among them when it averages
  over the window itself (its 1 s, on the H200), else the moves' midpoints do. A window with fewer than two moves
  says nothing (None), never a guess.

Two earlier versions, measured on the H200 (docs/results/h200.md, "Cold starts, every figure per watt"): one chose
the count among those the window's length allowed by the board's 1 s reading alone, which after a rest is low:
power-capped products read 370-390 W instead of about 700. The next read between the timing loop's batches: a long
call (an fp32 product of 16384, 166 ms, one a batch) left 166 ms between reads, and one such window read 942 W.
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
#: How far one update may fall from its period's schedule: the driver's own timestamps put the p10-p90 of the time
#: between updates at 97.0-102.4 ms (docs/results/h200/energy/counter-2.json, "fields").
JITTER_S = 0.005
#: The pause between two reads while a window is open (each read holds a core for ~4 ms, the device not at all: a
#: read every ~14 ms on the H200).
OBSERVE_EVERY_S = 0.01
#: The time the board's own power reading averages over (``nvmlDeviceGetPowerUsage`` on Ampere and later: 1 s).
BOARD_AVERAGE_S = 1.0


@dataclass(frozen=True)
class Move:
    """One move of the counter as the reads saw it: after the read at ``after`` and by the read at ``by``
    (perf_counter, each read's midpoint), after which the counter read ``millijoules``."""

    after: float
    by: float
    millijoules: int


@dataclass(frozen=True)
class WindowEnergy:
    """The counter's move over a window: ``joules`` over ``span_s`` (whole updates), so ``power_w`` on average."""

    joules: float
    span_s: float
    window_s: float

    @property
    def power_w(self) -> float:
        return self.joules / self.span_s


def whole_updates(first: Move, last: Move, update_s: float = UPDATE_S, jitter_s: float = JITTER_S) -> range:
    """The counts of whole updates from ``first`` to ``last`` that the reads around them allow."""
    low = math.ceil((last.after - first.by - jitter_s) / update_s)
    high = math.floor((last.by - first.after + jitter_s) / update_s)
    return range(max(1, low), max(1, high) + 1)


def window_energy(
    first: Move, last: Move, window_s: float, power_read_w: float | None, update_s: float = UPDATE_S
) -> WindowEnergy | None:
    """The board's energy from ``first`` to ``last`` (module docstring); None where the counter did not move."""
    joules = (last.millijoules - first.millijoules) / 1000.0
    if joules <= 0:
        return None
    counts = whole_updates(first, last, update_s)
    midpoints = ((last.after + last.by) - (first.after + first.by)) / 2 / update_s
    if len(counts) <= 1:  # none: reads that contradict the schedule; the midpoints then say
        count = counts[0] if counts else max(1, round(midpoints))
    elif power_read_w and window_s >= BOARD_AVERAGE_S:
        count = min(counts, key=lambda k: abs(joules / (k * update_s) - power_read_w))
    else:
        count = min(counts, key=lambda k: abs(k - midpoints))
    return WindowEnergy(joules=joules, span_s=count * update_s, window_s=window_s)


class Window:
    """One window's reads of the counter: the last value read and when, and the first and last moves seen."""

    def __init__(self, millijoules: int, read_at: float) -> None:
        self.opened = read_at
        self.value = millijoules
        self.read_at = read_at  # the last read's midpoint
        self.first: Move | None = None
        self.last: Move | None = None
        self.closing = threading.Event()  # set by the meter's stop: the reading thread ends
        self.poller: threading.Thread | None = None

    def saw(self, millijoules: int, read_at: float) -> None:
        """One more read: a move if the value changed since the last."""
        if millijoules != self.value:
            move = Move(after=self.read_at, by=read_at, millijoules=millijoules)
            if self.first is None:
                self.first = move
            else:
                self.last = move
            self.value = millijoules
        self.read_at = read_at


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

    def _read(self) -> tuple[int, float] | None:
        """The counter and the read's midpoint (perf_counter)."""
        before = time.perf_counter()
        try:
            value = int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except Exception:  # see the class
            return None
        return value, (before + time.perf_counter()) / 2

    def start(self) -> Window | None:
        """Open a window: one read now, then one every ``OBSERVE_EVERY_S`` until ``stop``."""
        if not self.available:
            return None
        read = self._read()
        if read is None:
            return None
        window = Window(*read)
        window.poller = threading.Thread(target=self._poll, args=(window,), name="flopfleet-energy-window",
                                         daemon=True)  # fmt: skip
        window.poller.start()
        return window

    def _poll(self, window: Window) -> None:
        while not window.closing.wait(OBSERVE_EVERY_S):
            read = self._read()
            if read is not None and not window.closing.is_set():
                window.saw(*read)

    def stop(self, window: Window | None) -> WindowEnergy | None:
        """The window from its first move to its last (call it once the window's work is done)."""
        if window is None:
            return None
        window.closing.set()
        if window.poller is not None:
            window.poller.join()
        read = self._read()
        if read is not None:
            window.saw(*read)
        if window.first is None or window.last is None:
            return None
        try:
            power = self._nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000.0
        except Exception:  # see the class
            power = None
        return window_energy(window.first, window.last, window.read_at - window.opened, power)

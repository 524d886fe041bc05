"""Samples GPU clocks, power, temperature and throttle reasons in a background thread while a suite runs."""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any

from schemas import GpuSamples, StateSummary
from schemas.environment import SLOWDOWN_REASONS

from .nvml import Nvml, Reading


@dataclass(frozen=True)
class _Sample:
    t: float
    gpu_index: int
    reading: Reading


@dataclass(frozen=True)
class RunState:
    """What the samples say about one GPU over the whole run."""

    temperature_end_c: int | None
    throttle_reasons_seen: tuple[str, ...]
    pcie_gen: int | None
    pcie_width: int | None


class Monitor:
    """A sampler over some GPUs; ``window`` summarises the samples between two ``now()`` marks."""

    def __init__(self, nvml: Nvml | None, handles: dict[int, Any], interval_s: float = 0.1) -> None:
        self._nvml = nvml
        self._handles = handles if nvml is not None else {}
        self._interval = interval_s
        self._samples: list[_Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()

    @property
    def active(self) -> bool:
        return bool(self._handles)

    def now(self) -> float:
        return time.monotonic() - self._t0

    def monotonic(self, t: float) -> float:
        """``t`` of this monitor's clock (``now``) on ``time.monotonic``'s."""
        return t + self._t0

    def __enter__(self) -> Monitor:
        if self.active:
            self._sample_once()
            self._thread = threading.Thread(target=self._loop, name="flopfleet-monitor", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._sample_once()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self._sample_once()

    def _sample_once(self) -> None:
        assert self._nvml is not None
        t = self.now()
        readings = [(index, self._nvml.read(handle)) for index, handle in self._handles.items()]
        with self._lock:
            self._samples.extend(_Sample(t, index, reading) for index, reading in readings)

    def _between(self, gpu_index: int, start: float, end: float) -> list[Reading]:
        with self._lock:
            return [s.reading for s in self._samples if s.gpu_index == gpu_index and start <= s.t <= end]

    def window(self, gpu_index: int, start: float, end: float) -> StateSummary | None:
        readings = self._between(gpu_index, start, end)
        if not readings:
            return None
        clocks = [r.sm_clock_mhz for r in readings if r.sm_clock_mhz is not None]
        powers = [r.power_w for r in readings if r.power_w is not None]
        temps = [r.temperature_c for r in readings if r.temperature_c is not None]
        reasons = sorted({reason for r in readings for reason in r.throttle_reasons if reason != "gpu_idle"})
        return StateSummary(
            samples=len(readings),
            sm_clock_mhz_min=min(clocks) if clocks else None,
            sm_clock_mhz_median=int(statistics.median(clocks)) if clocks else None,
            power_w_max=max(powers) if powers else None,
            temperature_c_max=max(temps) if temps else None,
            throttle_reasons=tuple(reasons),  # type: ignore[arg-type]
        )

    def run_state(self, gpu_index: int) -> RunState:
        readings = self._between(gpu_index, 0.0, float("inf"))
        gens = [r.pcie_gen for r in readings if r.pcie_gen is not None]
        widths = [r.pcie_width for r in readings if r.pcie_width is not None]
        temps = [r.temperature_c for r in readings if r.temperature_c is not None]
        seen = sorted({reason for r in readings for reason in r.throttle_reasons if reason in SLOWDOWN_REASONS})
        return RunState(
            temperature_end_c=temps[-1] if temps else None,
            throttle_reasons_seen=tuple(seen),
            pcie_gen=max(gens) if gens else None,
            pcie_width=max(widths) if widths else None,
        )

    def samples(self, limit: int) -> GpuSamples:
        """Every sample as the wire's columns, thinned evenly to at most ``limit``."""
        with self._lock:
            chosen = list(self._samples)
        if len(chosen) > limit:
            step = len(chosen) / limit
            chosen = [chosen[int(i * step)] for i in range(limit)]
        readings = [s.reading for s in chosen]
        return GpuSamples(
            t_s=tuple(round(s.t, 4) for s in chosen),
            gpu_index=tuple(s.gpu_index for s in chosen),
            sm_clock_mhz=tuple(r.sm_clock_mhz for r in readings),
            mem_clock_mhz=tuple(r.mem_clock_mhz for r in readings),
            power_w=tuple(r.power_w for r in readings),
            temperature_c=tuple(r.temperature_c for r in readings),
            utilization_pct=tuple(r.utilization_pct for r in readings),
            throttle_reasons=tuple(r.throttle_reasons for r in readings),  # type: ignore[misc]
        )

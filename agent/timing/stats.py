"""What one measurement found: per-call statistics, the phases its time went to, percentiles over its repeats."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Literal

from schemas import TimingStats

from ..machine.energy import WindowEnergy
from .repeats import relative_halfwidth

Method = Literal["cuda_event", "cuda_graph", "perf_counter"]


@dataclass(frozen=True)
class Timed:
    """What one measurement found: per-call statistics, whether host launches were the bottleneck, and the per-call
    time of each repeat (for percentiles the statistics do not keep)."""

    stats: TimingStats
    launch_bound: bool
    samples_s: tuple[float, ...] = ()

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0-100) of the repeats' per-call times, linearly interpolated; the median if none."""
        if not self.samples_s:
            return self.stats.median_s
        ordered = sorted(self.samples_s)
        rank = (len(ordered) - 1) * min(max(q, 0.0), 100.0) / 100.0
        low = math.floor(rank)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(
    per_call_s: list[float],
    *,
    method: Method,
    warmup: int,
    calls_per_repeat: int,
    total_s: float,
    phases: Phases | None = None,
) -> TimingStats:
    """Statistics over per-call times; the median is the figure reports use. ``phases`` adds where the time went
    and how well the median is known."""
    samples = [max(s, 1e-12) for s in per_call_s]
    median = statistics.median(samples)
    mean = statistics.fmean(samples)
    cv = statistics.pstdev(samples) / mean if len(samples) > 1 else 0.0
    width = relative_halfwidth(samples) if phases is not None else None
    return TimingStats(
        method=method,
        median_s=median,
        mean_s=min(max(mean, min(samples)), max(samples)),
        min_s=min(samples),
        max_s=max(samples),
        iqr_s=iqr(samples),
        cv=cv,
        repeats=len(samples),
        warmup=warmup,
        calls_per_repeat=calls_per_repeat,
        total_s=total_s,
        warmup_s=max(phases.warmup_s, 0.0) if phases is not None else None,
        capture_s=max(phases.capture_s, 0.0) if phases is not None else None,
        ci_rel=min(width, 1e3) if width is not None else None,
        settled=phases.settled if phases is not None else None,
        host_wait=_share(phases.host_wait) if phases is not None else None,
        device_idle=_share(phases.device_idle) if phases is not None else None,
        launch_share=_share(phases.launch_share) if phases is not None else None,
        **_energy(phases.energy if phases is not None else None),
    )


def _energy(energy: WindowEnergy | None) -> dict[str, float]:
    if energy is None:
        return {}
    return {"power_w": energy.power_w, "energy_j": energy.joules, "energy_span_s": energy.span_s}


def _share(value: float | None) -> float | None:
    return None if value is None else min(max(value, 0.0), 1.0)


def iqr(samples: list[float]) -> float:
    if len(samples) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return max(q3 - q1, 0.0)


@dataclass(frozen=True)
class Phases:
    """Where one measurement's time went besides its timed repeats, and whether its warm-up settled (None: it
    was not asked to)."""

    warmup_s: float
    capture_s: float = 0.0
    settled: bool | None = None
    host_wait: float | None = None  # agent/timing/starvation.py: what the window got of the host
    device_idle: float | None = None
    launch_share: float | None = None
    energy: WindowEnergy | None = None  # agent/machine/energy.py: the board's energy over the repeats

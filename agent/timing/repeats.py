"""When warm-up ends and repetition stops: pure rules over per-call times, so tests can drive them with any series.

Warm-up ends when timings settle: consecutive windows of repeats whose medians agree. A GPU reaching its power
limit lowers its clocks over tenths of a second, and a warm-up that ends while the timings still move measures a
regime the next run may not see. Repetition stops when the median is known well enough: the distribution-free
confidence interval of the median (from order statistics: the ranks of a binomial(n, 1/2)) is narrow enough, so
repeats are spent only where the timings are noisy. Neither rule measures time: ``timing`` feeds them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

CONFIDENCE = 0.95
_EXACT_UP_TO = 1000  # exact binomial ranks up to this many samples, the normal approximation beyond


@lru_cache(maxsize=2048)
def median_rank(n: int, confidence: float = CONFIDENCE) -> int | None:
    """The largest k >= 1 with P(Binomial(n, 1/2) <= k - 1) <= (1 - confidence) / 2, or None where no k is.

    [x_(k), x_(n+1-k)] of n sorted samples then covers the median with at least ``confidence``, whatever the
    distribution (95 %: n >= 6 gives k = 1, n >= 9 gives k = 2)."""
    if n < 1 or not 0.0 < confidence < 1.0:
        return None
    tail = (1.0 - confidence) / 2.0
    if n > _EXACT_UP_TO:
        z = statistics.NormalDist().inv_cdf(1.0 - tail)
        k = math.floor(n / 2.0 - z * math.sqrt(n) / 2.0)
        return k if k >= 1 else None
    total, cumulative, k = 2**n, 0, 0
    for j in range(n):
        cumulative += math.comb(n, j)
        if cumulative > tail * total:
            break
        k = j + 1
    return k if k >= 1 else None


def median_interval(samples: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """The distribution-free ``confidence`` interval of the samples' median; None for too few samples."""
    k = median_rank(len(samples), confidence)
    if k is None:
        return None
    ordered = sorted(samples)
    return ordered[k - 1], ordered[len(ordered) - k]


def relative_halfwidth(samples: Sequence[float], confidence: float = CONFIDENCE) -> float | None:
    """Half the width of the median's confidence interval over the median: how well the median is known."""
    interval = median_interval(samples, confidence)
    if interval is None:
        return None
    median = statistics.median(samples)
    return (interval[1] - interval[0]) / 2.0 / median if median > 0 else math.inf


def median_known(samples: Sequence[float], rel: float, confidence: float = CONFIDENCE) -> bool:
    """Whether the median is known to ``rel`` (relative half-width of its confidence interval)."""
    width = relative_halfwidth(samples, confidence)
    return width is not None and width <= rel


@dataclass
class Settling:
    """Repeats fed in order; settled once the medians of the last ``agree`` windows lie within ``rel`` (relative).

    A window closes when it holds ``min_samples`` repeats (one, for repeats that each last a window) and at least
    ``window_s`` of their time. Comparing windows' medians, not single repeats, lets noise pass; asking several
    consecutive windows to agree catches a slow trend (clocks recovering after a heavier case, or falling as the
    power limit bites) that two neighbours would miss. ``steady`` holds the repeats of the agreeing windows: the
    steady state, kept as the first measured repeats.
    """

    window_s: float
    rel: float
    agree: int = 2
    min_samples: int = 3
    settled: bool = False
    steady: list[float] = field(default_factory=list)
    _windows: list[list[float]] = field(default_factory=list)
    _current: list[float] = field(default_factory=list)

    @property
    def windows(self) -> int:
        return len(self._windows)

    def add(self, samples: Sequence[float]) -> bool:
        """Feed repeats; True once settled (repeats fed after that are kept in ``steady``)."""
        for i, sample in enumerate(samples):
            if self.settled:
                self.steady.extend(samples[i:])
                return True
            self._current.append(sample)
            enough = len(self._current) >= self.min_samples or self._current[0] >= self.window_s
            if enough and sum(self._current) >= self.window_s:
                self._windows.append(self._current)
                self._current = []
                last = self._windows[-self.agree :]
                medians = [statistics.median(w) for w in last]
                if len(last) == self.agree and max(medians) - min(medians) <= self._tolerance(last, medians[-1]):
                    self.settled = True
                    self.steady = [x for w in last for x in w]
        return self.settled

    def _tolerance(self, windows: list[list[float]], median: float) -> float:
        """How far windows' medians may differ and still agree: ``rel``, or, where the repeats themselves are
        noisier (a GPU at its power limit dithers its clock), twice the standard error of a window's median, so
        noise does not keep a warm-up going that no trend does."""
        # Each repeat's distance from its own window's median: the noise, without the trend between windows
        # (which must not widen its own tolerance); the median of them (MAD) so that outliers do not either.
        deviations = [abs(x - statistics.median(w)) for w in windows for x in w]
        sigma = 1.4826 * statistics.median(deviations)
        standard_error = 1.2533 * sigma / math.sqrt(min(len(w) for w in windows))
        return max(self.rel * median, 2.0 * standard_error)

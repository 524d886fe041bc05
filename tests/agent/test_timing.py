"""Timing on the CPU: statistics, adaptive stopping, bursts. (The CUDA paths are in tests/gpu.)"""

from __future__ import annotations

import time

import pytest

from agent.timing import BurstPolicy, TimingPolicy, bursts_cpu, measure_cpu, summarize

FAST = TimingPolicy(warmup_s=0.0, min_warmup=1, min_repeats=5, max_repeats=50, min_time_s=0.01, max_time_s=0.2)


def test_summary_statistics() -> None:
    stats = summarize([1.0, 2.0, 3.0, 4.0, 5.0], method="perf_counter", warmup=2, calls_per_repeat=1, total_s=15.0)
    assert (stats.median_s, stats.mean_s, stats.min_s, stats.max_s) == (3.0, 3.0, 1.0, 5.0)
    assert stats.iqr_s == pytest.approx(2.0)
    assert stats.cv == pytest.approx(2**0.5 / 3)
    assert stats.repeats == 5


def test_a_sleep_is_timed_as_long_as_it_sleeps() -> None:
    timed = measure_cpu(lambda: time.sleep(0.002), FAST)
    assert 0.0019 <= timed.stats.median_s < 0.01
    assert timed.stats.method == "perf_counter"
    assert timed.stats.repeats >= FAST.min_repeats
    assert timed.stats.min_s <= timed.stats.median_s <= timed.stats.max_s


def test_very_short_calls_are_batched_per_repeat() -> None:
    timed = measure_cpu(lambda: None, FAST)
    assert timed.stats.calls_per_repeat > 1
    assert timed.stats.median_s < 50e-6


def test_repetition_stops_at_the_time_budget() -> None:
    policy = TimingPolicy(warmup_s=0.0, min_warmup=1, min_repeats=3, max_repeats=10_000, min_time_s=0.0,
                          max_time_s=0.05, target_rel_iqr=0.0)  # fmt: skip
    timed = measure_cpu(lambda: time.sleep(0.005), policy)
    assert 3 <= timed.stats.repeats <= 15


def test_bursts_keep_the_fastest_calls() -> None:
    durations = iter([0.004] * 3 + [0.001, 0.002, 0.003] * 20)
    timed = bursts_cpu(lambda: time.sleep(next(durations)), BurstPolicy(bursts=2, calls=10, idle_s=0.0, keep=5))
    assert timed.stats.repeats == 5
    assert timed.stats.max_s < 0.004


def test_policies_are_validated() -> None:
    with pytest.raises(ValueError, match="min_repeats"):
        TimingPolicy(min_repeats=1)
    with pytest.raises(ValueError, match="min_time_s"):
        TimingPolicy(min_time_s=1.0, max_time_s=0.5)

"""The warm-up and stopping rules (agent/timing/repeats.py) on series with known answers, and the timer driving them on
the CPU: a drifting call keeps warming up, a steady one stops once its median is known."""

from __future__ import annotations

import itertools
import math
import random
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from agent.timing import Batch, TimingPolicy, measure_cpu, process_started, repeat
from agent.timing.repeats import Settling, median_interval, median_known, median_rank, relative_halfwidth


def _binomial_cdf(n: int, k: int) -> float:
    return sum(math.comb(n, j) for j in range(k + 1)) / 2**n


@pytest.mark.parametrize("n", [1, 5, 6, 8, 9, 20, 100, 999])
def test_the_median_rank_is_the_largest_whose_interval_covers_95_percent(n: int) -> None:
    k = median_rank(n)
    if n < 6:  # [min, max] of 5 covers the median with 93.75 % only
        assert k is None
        return
    assert k is not None
    assert _binomial_cdf(n, k - 1) <= 0.025 < _binomial_cdf(n, k)


def test_the_normal_approximation_takes_over_for_many_samples_without_a_jump() -> None:
    exact, approximate = median_rank(1000), median_rank(1001)
    assert exact is not None and approximate is not None and abs(exact - approximate) <= 2


def test_the_interval_of_the_median_is_made_of_order_statistics() -> None:
    samples = [float(x) for x in (9, 1, 8, 2, 7, 3, 6, 4, 5)]  # n = 9: k = 2
    assert median_interval(samples) == (2.0, 8.0)
    assert relative_halfwidth(samples) == pytest.approx(3.0 / 5.0)
    assert median_interval(samples[:5]) is None and relative_halfwidth(samples[:5]) is None


def test_the_median_is_known_when_the_repeats_agree_and_not_when_they_scatter() -> None:
    rng = random.Random(7)
    tight = [1.0 + rng.gauss(0, 0.001) for _ in range(12)]
    loose = [1.0 + rng.gauss(0, 0.05) for _ in range(12)]
    assert median_known(tight, 0.01) and not median_known(loose, 0.01)
    assert not median_known(tight[:5], 0.01)  # too few for a 95 % interval, however tight


def _settle(series: list[float], **kwargs: float) -> tuple[int | None, Settling]:
    settling = Settling(window_s=kwargs.pop("window_s", 2.5), rel=kwargs.pop("rel", 0.01), agree=3)
    for i, x in enumerate(series):
        if settling.add([x]):
            return i, settling
    return None, settling


def test_a_steady_series_settles_after_three_windows_and_keeps_them() -> None:
    at, settling = _settle([1.0] * 30)
    assert at == 8 and settling.steady == [1.0] * 9  # three windows of three repeats


def test_a_decaying_series_settles_only_on_its_plateau() -> None:
    # Clocks falling as a power limit bites: 10 % slower over the first 30 repeats, then flat.
    series = [1.0 + 0.1 * min(i, 30) / 30 for i in range(60)]
    at, settling = _settle(series)
    assert at is not None and at >= 30
    assert min(settling.steady) >= 1.09


def test_a_slow_trend_that_neighbouring_windows_would_pass_keeps_the_warm_up_going() -> None:
    # 0.6 % per window: two neighbours agree within 1 %, three windows span 1.2 % and do not.
    series = [1.0 + 0.002 * i for i in range(45)] + [1.09] * 12
    at, _ = _settle(series)
    assert at is not None and at >= 45


def test_noise_alone_does_not_keep_a_noisy_series_warming_up() -> None:
    # A GPU at its power limit dithers: 3 % noise, no trend. The tolerance follows the windows' own noise.
    rng = random.Random(3)
    at, _ = _settle([1.0 + rng.gauss(0, 0.03) for _ in range(60)])
    assert at is not None and at < 30


def test_windows_hold_at_least_their_time() -> None:
    settling = Settling(window_s=0.01, rel=0.01, agree=2)
    settling.add([0.001] * 15)  # 1 ms repeats: a window needs ten of them
    assert settling.windows == 1
    long = Settling(window_s=0.01, rel=0.01, agree=2)
    long.add([0.02, 0.02])  # each repeat is a window by itself
    assert long.settled and long.windows == 2


def _series(values: Iterator[float]) -> Batch:
    """A batch of repeats whose per-call times are the next values of a series: the timer's rules driven with a
    known answer (the CPU's own timings on a shared machine are too noisy to hold a drift test to)."""

    def batch(count: int) -> Callable[[], list[float]]:
        times = [next(values) for _ in range(count)]
        time.sleep(sum(times))  # as long as the repeats would take: the time limits see the series' time
        return lambda: times

    return batch


SETTLING = TimingPolicy(warmup_s=0.0, min_warmup=1, min_repeats=5, max_repeats=400, min_time_s=0.0, max_time_s=0.2,
                        target_rel_ci=0.01, settle_rel=0.01, settle_window_s=0.004, settle_windows=3,
                        max_warmup_s=0.3, batch=4, sync_s=0.004)  # fmt: skip


def test_the_warm_up_lasts_until_a_drift_is_over_and_the_plateau_is_measured() -> None:
    # A call slowing from 0.5 to 1 ms over 100 repeats (clocks falling), then steady at 1 ms.
    drift = (0.0005 + 0.0005 * min(i, 100) / 100 for i in itertools.count())
    done = repeat(_series(drift), SETTLING, time.perf_counter(), per_repeat_s=0.001)
    assert done.settled is True and done.discarded >= 95
    assert statistics.median(done.samples) == pytest.approx(0.001, rel=0.005)


def test_a_drift_that_never_ends_is_unsettled_at_the_limit_and_still_measured() -> None:
    drift = (0.0005 * 1.004**i for i in itertools.count())  # 0.4 % slower every repeat, 1.6 % a window
    began = time.perf_counter()
    done = repeat(_series(drift), SETTLING, began, per_repeat_s=0.001)
    assert done.settled is False and len(done.samples) >= SETTLING.min_repeats
    assert done.warmup_end - began >= SETTLING.max_warmup_s


def test_a_brief_call_that_never_settles_stops_warming_up_at_its_own_limit() -> None:
    """A call shorter than ``brief_call_s`` dithers with the launch and the clock: its warm-up ends at
    ``brief_max_warmup_s``, settled or not; a longer one keeps the full limit."""
    policy = replace(SETTLING, brief_call_s=1.6e-5, brief_max_warmup_s=0.1)
    assert (policy.warmup_limit(8e-6), policy.warmup_limit(2e-5)) == (0.1, SETTLING.max_warmup_s)
    assert TimingPolicy().warmup_limit(1e-7) == TimingPolicy().max_warmup_s  # no such rule unless a suite asks

    def warm_up(call_s: float) -> tuple[bool | None, float]:
        per_window = round(SETTLING.settle_window_s / call_s)  # windows 12 % apart, for ever
        dither = (call_s * (1 + 0.12 * ((i // per_window) % 2)) for i in itertools.count())
        began = time.perf_counter()
        done = repeat(_series(dither), replace(policy, batch=400), began, per_repeat_s=call_s)
        return done.settled, done.warmup_end - began

    brief, longer = warm_up(8e-6), warm_up(2e-5)
    assert brief[0] is False and 0.1 <= brief[1] < SETTLING.max_warmup_s, brief
    assert longer[0] is False and longer[1] >= SETTLING.max_warmup_s, longer


def test_a_heavy_settling_call_rests_the_device_first_and_a_sustained_or_long_one_does_not() -> None:
    policy = replace(SETTLING, rest_s=0.04, rest_from_call_s=2e-3, sustain_s=0.15, long_call_s=0.05)
    assert (policy.rest_before(4e-3), policy.rest_before(1e-3)) == (0.04, 0.0)  # a 4 ms block rests, a 1 ms one not
    assert policy.rest_before(0.2) == 0.0  # a window of its own: its warm-up call is the state it is timed in
    assert policy.for_sustained().for_call(4e-3).rest_before(4e-3) == 0.0  # timed under load on purpose
    assert TimingPolicy().rest_before(1.0) == 0.0  # no rest unless a suite asks for one
    with pytest.raises(ValueError, match="rest_s"):
        TimingPolicy(rest_s=-1.0)


def test_a_sustained_rate_warms_up_for_at_least_sustain_s() -> None:
    policy = replace(SETTLING, sustain_s=0.1).for_sustained()
    began = time.perf_counter()
    done = repeat(_series(itertools.repeat(0.001)), policy, began, per_repeat_s=0.001)
    kept_s = 3 * 4 * 0.001  # the three agreeing windows of four repeats count as measured, not as warm-up
    assert done.settled is True and done.discarded > 0 and done.warmup_end - began + kept_s >= 0.1


def test_without_settling_the_repeats_are_measured_from_the_start() -> None:
    policy = replace(SETTLING, settle_rel=0.0)
    done = repeat(_series(itertools.repeat(0.001)), policy, time.perf_counter(), per_repeat_s=0.001)
    assert done.settled is None and done.discarded == 0 and len(done.samples) >= 6


def test_the_cpu_timer_reports_its_phases_and_whether_it_settled() -> None:
    stats = measure_cpu(lambda: time.sleep(0.001), replace(SETTLING, max_warmup_s=0.5)).stats
    assert stats.settled is not None and stats.warmup_s is not None and stats.capture_s == 0.0
    assert stats.warmup_s + 0.001 * stats.repeats <= stats.total_s + 1e-3


def test_repetition_stops_once_the_median_is_known() -> None:
    """A series whose median is known to 5 % after a handful of repeats stops there, long before the 2 s limit's
    1,000 repeats (a series, not real sleeps: on a loaded machine a sleep's overshoot is the host's noise)."""
    steady = TimingPolicy(warmup_s=0.0, min_warmup=1, min_repeats=5, max_repeats=10_000, min_time_s=0.0,
                          max_time_s=2.0, target_rel_ci=0.05, batch=1, sync_s=0.0)  # fmt: skip
    noisy = (0.002 * (1.0 + 0.01 * (i % 5)) for i in itertools.count())  # within 4 %: the interval closes at once
    done = repeat(_series(noisy), steady, time.perf_counter(), per_repeat_s=0.002)
    assert 6 <= len(done.samples) < 50 and median_known(done.samples, 0.05)


def test_policies_with_the_new_rules_are_validated() -> None:
    with pytest.raises(ValueError, match="settle_windows"):
        TimingPolicy(settle_rel=0.01, settle_windows=1)
    with pytest.raises(ValueError, match="sustain_s"):
        TimingPolicy(sustain_s=2.0, max_warmup_s=1.0)
    policy = TimingPolicy(sustain_s=0.3, warmup_s=0.02)
    assert policy.for_sustained().warmup_s == 0.3 and TimingPolicy().for_sustained() == TimingPolicy()


def test_a_sustained_warm_up_is_for_heavy_calls_and_a_long_call_is_a_window_of_its_own() -> None:
    policy = replace(SETTLING, sustain_s=0.15, sustain_from_call_s=1e-4, long_call_s=0.05).for_sustained()
    assert policy.for_call(2e-4).warmup_s == 0.15  # heavy enough to bring the power limit in
    assert policy.for_call(3e-5).warmup_s == SETTLING.warmup_s  # a light load: settling alone
    long = policy.for_call(0.4)
    assert (long.settles, long.min_repeats, long.warmup_s, long.min_warmup) == (False, 3, 0.15, 1)
    assert TimingPolicy().for_call(10.0) == TimingPolicy()  # no long-call rule unless a suite asks for one


def test_long_calls_are_timed_three_times_after_their_warm_up_without_settling_windows() -> None:
    policy = replace(SETTLING, sustain_s=0.15, max_warmup_s=0.3, long_call_s=0.05, min_warmup=2).for_sustained()
    stats = measure_cpu(lambda: time.sleep(0.06), policy).stats
    # Warm-up calls until the 0.15 s are covered (three), one more that tells the call's length, then three timed,
    # where settling call by call (each call a window) would have needed at least three more.
    assert stats.repeats == 3 and stats.settled is None and stats.warmup <= 5, stats


def test_the_process_start_is_dated_by_the_kernel_on_the_shared_monotonic_clock() -> None:
    """A child sleeps before importing the timer: its start is when it was launched, not when it asked."""
    import subprocess
    import sys

    code = "import time; time.sleep(0.3); from agent.timing import process_started; print(process_started())"
    launched = time.monotonic()
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    started = float(printed)
    assert launched - 0.05 <= started <= launched + 0.25  # the kernel's clock tick is 10 ms; the sleep is after
    assert process_started() <= time.monotonic()


def test_a_window_whose_median_is_unknown_at_its_limit_goes_on_until_it_is_known() -> None:
    """A 25 ms call gets five repeats in 0.12 s: too few to know the median. With ``unknown_max_time_s`` the window
    goes on until the median is known (a steady call: at six, the fewest with a 95 % interval), and past it,
    unknown still, it is unsettled."""
    policy = replace(SETTLING, settle_rel=0.0, max_time_s=0.12, unknown_max_time_s=0.3, batch=1, sync_s=0.0)
    steady = repeat(_series(itertools.repeat(0.025)), policy, time.perf_counter(), per_repeat_s=0.025)
    assert len(steady.samples) == 6 and steady.settled is None
    unextended = replace(policy, unknown_max_time_s=0.0)
    assert len(repeat(_series(itertools.repeat(0.025)), unextended, time.perf_counter(), 0.025).samples) == 5
    # A dip: every third repeat 8 % slow, for ever; the median's interval never narrows to 1 %.
    dipping = (0.025 * (1.08 if i % 3 == 0 else 1.0) for i in itertools.count())
    began = time.perf_counter()
    done = repeat(_series(dipping), policy, began, per_repeat_s=0.025)
    # Past 0.12 s and five repeats (a loaded host's sleeps overshoot: fewer repeats fit, none is skipped), to 0.3 s.
    assert done.settled is False and time.perf_counter() - began >= 0.3 and len(done.samples) >= 6
    with pytest.raises(ValueError, match="unknown_max_time_s"):
        TimingPolicy(target_rel_ci=0.01, max_time_s=0.12, unknown_max_time_s=0.1)
    with pytest.raises(ValueError, match="unknown_max_time_s"):
        TimingPolicy(unknown_max_time_s=0.3)

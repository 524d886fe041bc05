"""One rank's timing of a case that spans several processes: fixed counts, the slowest rank's times."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from schemas import TimingStats

from .clocks import Clock
from .policy import GroupPolicy
from .stats import summarize


def measure_group(
    fn: Callable[[], object],
    policy: GroupPolicy,
    *,
    clock: Clock,
    align: Callable[[], object],
    slowest: Callable[[list[float]], list[float]],
) -> TimingStats:
    """Time ``fn`` on one rank of a process group, the same way on every rank.

    ``clock`` is the rank's device's (``Target.clock``); ``align`` (a tiny collective) is enqueued before each
    repeat so the ranks start together; ``slowest`` returns, element-wise, the largest value over the ranks: the
    pilot that sets the call count is the slowest rank's, and each repeat's time is the slowest rank's, since a
    collective is done only when every rank is.
    """
    begin = time.perf_counter()
    for _ in range(policy.warmup):
        fn()
    align()
    pilot = slowest([clock.time(fn, 1)])[0]
    calls = max(1, min(policy.max_calls, math.ceil(policy.repeat_s / max(pilot, 1e-9))))
    samples = []
    for _ in range(policy.repeats):
        align()
        samples.append(clock.time(fn, calls) / calls)
    samples = slowest(samples)
    return summarize(
        samples,
        method=clock.method,
        warmup=policy.warmup + 1,
        calls_per_repeat=calls,
        total_s=time.perf_counter() - begin,
    )

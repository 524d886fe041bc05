"""The repeat loop every timer shares (warm-up, settling, the stop), and its CPU timer (``perf_counter``)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from .policy import BurstPolicy, TimingPolicy
from .repeats import Settling, median_known
from .starvation import HostWindow
from .stats import Phases, Timed, iqr, summarize


def _done(samples: list[float], elapsed: float, policy: TimingPolicy) -> bool:
    """Whether the timed repeats may stop: at ``max_repeats``; at ``max_time_s`` (with ``min_repeats``), unless
    the median is not yet known to ``target_rel_ci``, which goes on to ``unknown_max_time_s``; before that, once the
    median is known (or the interquartile range is small)."""
    n = len(samples)
    if n >= policy.max_repeats:
        return True
    if n < policy.min_repeats:
        return False
    if elapsed >= policy.max_time_s:
        return elapsed >= policy.unknown_max_time_s or median_known(samples, policy.target_rel_ci)
    if elapsed < policy.min_time_s:
        return False
    if policy.target_rel_ci > 0:
        return median_known(samples, policy.target_rel_ci)
    return iqr(samples) <= policy.target_rel_iqr * statistics.median(samples)


def _unknown_at_limit(samples: list[float], elapsed: float, policy: TimingPolicy) -> bool:
    """Whether repetition stopped at ``unknown_max_time_s`` with the median still not known to ``target_rel_ci``."""
    return (bool(policy.unknown_max_time_s) and elapsed >= policy.unknown_max_time_s
            and len(samples) < policy.max_repeats and not median_known(samples, policy.target_rel_ci))  # fmt: skip


@dataclass
class Idle:
    """What the device saw of the host over a window's batches. Between repeats: each batch of several repeats' span
    from its first start event to its last end event, less its repeats and the flushes between them (``flush_s``
    each, the fastest seen); enqueued back to back, a batch leaves the device idle there only where the host fell
    behind, which an event pair around each repeat does not time. Within them (``waited``): of each repeat the device
    reached before the host had launched all of its work, the time the launching thread spent off a CPU meanwhile,
    which the device may have waited and its events timed. All of it where the device followed the host to the
    repeat's end (``followed``: the end came right after the last launch); elsewhere the device had work queued when
    the launch ended, and it waited at most what the repeat took beyond the window's fastest repeat: a launch blocked
    on a full queue is preempted like any thread while the device keeps busy (training steps beside busy processes,
    no slower, read the whole repeat as waited), and a host away long enough for the queue to drain slows the repeat.
    A quiet host that only launches slowly is on its CPU (``launch_bound``, not starved). A busy host holds up some
    repeats, not all: what matters is whether the median repeat, which the figure is, was held up
    (``launch_share``). agent/timing/starvation.py reads both."""

    flush_s: float
    span_s: float = 0.0  # batches of several repeats
    busy_s: float = 0.0
    repeats_s: list[float] = field(default_factory=list)
    waited_s: list[float] = field(default_factory=list)
    followed: list[bool] = field(default_factory=list)

    def add(
        self, span_s: float, repeats_s: list[float], flushes: int, waited_s: list[float], followed: list[bool]
    ) -> None:
        self.repeats_s += repeats_s
        self.waited_s += [min(w, t) for w, t in zip(waited_s, repeats_s, strict=True)]
        self.followed += followed
        if len(repeats_s) > 1:
            self.span_s += span_s
            self.busy_s += min(sum(repeats_s) + flushes * self.flush_s, span_s)

    def share(self) -> float | None:
        return (self.span_s - self.busy_s) / self.span_s if self.span_s > 0 else None

    def launch_share(self) -> float | None:
        """How much shorter the median repeat would be without the time the device may have waited on the host:
        1 - median(repeat - waited) / median(repeat), an upper bound (0: no repeat's median was held up)."""
        if not self.repeats_s:
            return None
        fastest = min(self.repeats_s)
        waited = [w if f else min(w, t - fastest)
                  for t, w, f in zip(self.repeats_s, self.waited_s, self.followed, strict=True)]  # fmt: skip
        timed = statistics.median(self.repeats_s)
        unheld = statistics.median(t - w for t, w in zip(self.repeats_s, waited, strict=True))
        return min(max(1 - unheld / timed, 0.0), 1.0) if timed > 0 else None


@dataclass(frozen=True)
class Repeated:
    """The timed repeats of one measurement (per-call seconds), after the repeats its warm-up discarded."""

    samples: list[float]
    discarded: int
    warmup_end: float  # perf_counter when the warm-up ended (the kept windows' time taken off)
    settled: bool | None


#: Enqueues ``count`` repeats and returns what reads their per-call times once they ran (waiting for them).
Batch = Callable[[int], Callable[[], list[float]]]


def repeat(
    batch: Batch,
    policy: TimingPolicy,
    began: float,
    per_repeat_s: float,
    calls: int = 1,
    *,
    asynchronous: bool = False,
) -> Repeated:
    """Repeats until ``policy`` says stop: while warming up (``settle_rel``: at least ``warmup_s`` since ``began``,
    then until ``settle_windows`` windows agree, at most about ``max_warmup_s``), then measured.

    ``batch(count)`` enqueues ``count`` repeats of ``calls`` calls; ``per_repeat_s`` (an estimate) sets how many go
    between synchronisations (about ``sync_s`` of work, so a long call is not repeated past the stop). On an
    ``asynchronous`` device short repeats are enqueued a batch ahead, so the device works while the host reads the
    last batch's times: continuous load, as under do_bench, which enqueues every repeat before it synchronises."""
    count = max(1, min(policy.batch, math.ceil(policy.sync_s / max(per_repeat_s, 1e-9))))
    ahead = asynchronous and count > 1
    pending: Callable[[], list[float]] | None = None

    def take() -> list[float]:
        nonlocal pending
        current = pending or batch(count)
        pending = batch(count) if ahead else None
        return current()

    fed, settled, samples = 0, None, []
    if policy.settles:
        settling = Settling(window_s=policy.settle_window_s / calls, rel=policy.settle_rel, agree=policy.settle_windows)
        while time.perf_counter() - began < policy.warmup_s:
            fed += len(take())
        settled = False
        # Long repeats get the windows they need (each one a window) even past max_warmup_s.
        limit = max(policy.max_warmup_s, policy.warmup_s + 2 * policy.settle_windows * count * per_repeat_s)
        while not settled and time.perf_counter() - began < limit:
            times = take()
            fed += len(times)
            settled = settling.add(times)
            if times and policy.brief_call_s:
                limit = min(limit, policy.warmup_limit(statistics.median(times)))
        samples = list(settling.steady)
    warmup_end = time.perf_counter()
    steady_s = sum(samples) * calls  # the kept windows' time counts towards the measuring window
    while not _done(samples, time.perf_counter() - warmup_end + steady_s, policy):
        samples.extend(take())
    if pending is not None:  # the batch enqueued ahead ran after the stop, in the same steady state
        samples.extend(pending())
    if _unknown_at_limit(samples, time.perf_counter() - warmup_end + steady_s, policy):
        settled = False  # the timings moved within the window itself: the figure says so (flag 'unsettled')
    # The kept windows are measured repeats: their time counts as repeating, not warming up.
    return Repeated(samples, fed - min(fed, len(samples)), warmup_end - steady_s, settled)


def measure_cpu(fn: Callable[[], object], policy: TimingPolicy) -> Timed:
    """perf_counter around each repeat; very short calls are batched so the timer's cost stays out."""
    begin = time.perf_counter()
    warmup, fastest = 0, math.inf
    while not policy.warmed_up(warmup, time.perf_counter() - begin, fastest):
        t0 = time.perf_counter()
        fn()
        fastest = min(fastest, time.perf_counter() - t0) if warmup or policy.min_warmup == 1 else fastest
        warmup += 1
    t0 = time.perf_counter()
    fn()
    one = time.perf_counter() - t0
    policy = policy.for_call(min(one, fastest))
    calls = max(1, min(1000, math.ceil(50e-6 / max(one, 1e-9)))) if one < 50e-6 else 1

    def batch(count: int) -> Callable[[], list[float]]:
        times = []
        for _ in range(count):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times.append((time.perf_counter() - t0) / calls)
        return lambda: times

    host = HostWindow()
    done = repeat(batch, policy, begin, one * calls, calls)
    stats = summarize(
        done.samples,
        method="perf_counter",
        warmup=warmup + 1 + done.discarded * calls,
        calls_per_repeat=calls,
        total_s=time.perf_counter() - begin,
        phases=Phases(warmup_s=done.warmup_end - begin, settled=done.settled, host_wait=host.share()),
    )
    return Timed(stats=stats, launch_bound=False, samples_s=tuple(done.samples))


def bursts_cpu(fn: Callable[[], object], bursts: BurstPolicy) -> Timed:
    """The CPU twin of ``CudaTimer.bursts`` (without the idle gaps, which only matter to a power-capped GPU)."""
    begin = time.perf_counter()
    fn()
    samples = []
    for _ in range(bursts.bursts * bursts.calls):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    fastest = sorted(samples)[: bursts.keep]
    stats = summarize(fastest, method="perf_counter", warmup=1, calls_per_repeat=1, total_s=time.perf_counter() - begin)
    return Timed(stats=stats, launch_bound=False)


class Timer(Protocol):
    """Times the cases of one device: continuous repeats (``measure``) and bursts after idle gaps (``bursts``)."""

    def measure(
        self, fn: Callable[[], object], policy: TimingPolicy, *, flush: bool = True, graphable: bool = True
    ) -> Timed: ...

    def bursts(self, fn: Callable[[], object], bursts: BurstPolicy) -> Timed: ...

    def rehearse(self, fn: Callable[[], object]) -> bool: ...


class CpuTimer:
    """``measure_cpu`` and ``bursts_cpu``: there is no cache to flush between repeats and no graph to replay."""

    def measure(
        self, fn: Callable[[], object], policy: TimingPolicy, *, flush: bool = True, graphable: bool = True
    ) -> Timed:
        return measure_cpu(fn, policy)

    def bursts(self, fn: Callable[[], object], bursts: BurstPolicy) -> Timed:
        return bursts_cpu(fn, bursts)

    def rehearse(self, fn: Callable[[], object]) -> bool:
        """Nothing to prepare ahead on a CPU: a call there is the work itself."""
        return False

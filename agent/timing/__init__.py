"""The only place that measures time.

GPU work is timed with CUDA events per repeat, after warm-up, with the L2 cache flushed before each repeat.
Calls the host cannot launch fast enough to keep the GPU busy are captured in a CUDA graph and replayed, so
host jitter is never reported as GPU speed. The CPU path uses ``time.perf_counter``. Warm-up can last until the
timings settle, and repetition stops once the median is known well enough, or the interquartile range is small,
or when the case's time budget is spent (the rules are in ``repeats``).

Each device kind picks its implementations (``Device.timer``, ``Device.clock``): a ``Timer`` for the cases of one
device, a ``Clock`` for one rank of a worker group; the harness never asks which kind it has.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal, Protocol

from schemas import TimingStats

from .repeats import Settling, median_known, relative_halfwidth
from .starvation import HostWindow

if TYPE_CHECKING:
    import torch

Method = Literal["cuda_event", "cuda_graph", "perf_counter"]
#: The least a CUDA timer zeroes between repeats: triton.testing.do_bench's L2-clearing buffer.
FLUSH_BYTES = 256 << 20


@dataclass(frozen=True)
class TimingPolicy:
    """How long and how often to measure one case; suites choose one, tests shrink it.

    By default the measuring window is short and nearly fixed (``min_time_s`` to ``max_time_s``): a GPU at its
    power cap moves its clocks within tenths of a second, so windows of similar length in two runs see the same
    regime. With ``settle_rel`` the warm-up instead lasts until the timings stop moving (at least ``warmup_s``, at
    most ``max_warmup_s``), and with ``target_rel_ci`` repetition stops once the median is known to that fraction
    (the half-width of its 95 % confidence interval), not at a window's length: the regime is then the steady
    state, whatever the window. With ``unknown_max_time_s`` a window whose median is not known by ``max_time_s``
    goes on until it is, at most that long, and is reported unsettled if it never is: a 25 ms product gets five
    repeats in 0.12 s, and where the power limiter's quarter-second dip fell among them its median moved by 5 %.
    """

    warmup_s: float = 0.02
    min_warmup: int = 2
    min_repeats: int = 5
    max_repeats: int = 500
    min_time_s: float = 0.06
    max_time_s: float = 0.12
    target_rel_iqr: float = 0.03
    graph_below_s: float = 2e-3  # replay calls shorter than this as a CUDA graph
    graph_target_s: float = 4e-3  # one graph replay should last about this long
    graph_max_calls: int = 256
    graph_host_share: float = 0.25  # ... or whose launch takes the host more than this share of the GPU's time
    batch: int = 5  # at most this many repeats enqueued between host synchronisations
    sync_s: float = 0.01  # with the repeats' time known, enough of them between synchronisations to last this long
    settle_rel: float = 0.0  # > 0: warm up until consecutive windows of repeats have medians this close (relative)
    settle_window_s: float = 0.02  # a settling window holds at least this much time of repeats
    settle_windows: int = 2  # how many consecutive windows must agree
    max_warmup_s: float = 1.0  # with settle_rel: the warm-up ends about here, settled or not (flagged 'unsettled')
    target_rel_ci: float = 0.0  # > 0: stop once the median's 95 % confidence interval is this narrow (relative)
    unknown_max_time_s: float = 0.0  # > max_time_s: with target_rel_ci, a median not yet known goes on to here
    sustain_s: float = 0.0  # the least warm-up of a case that measures a rate under continuous load (for_sustained)
    sustain_from_call_s: float = 0.0  # the sustained warm-up is for calls this long or longer (shorter: light loads)
    unsustained_warmup_s: float | None = None  # the warm-up for_sustained raised (None: it did not)
    long_call_s: float = 0.0  # > 0: a call this long is a window of its own (for_long_calls)
    long_repeats: int = 3  # ... and this many of them are enough
    brief_call_s: float = 0.0  # > 0: a call shorter than this warms up for brief_max_warmup_s at most (warmup_limit)
    brief_max_warmup_s: float = 0.1
    rest_s: float = 0.0  # the device idles this long before the timed windows of a call of rest_from_call_s or more
    rest_from_call_s: float = 0.0

    def __post_init__(self) -> None:
        if self.min_warmup < 1 or self.min_repeats < 2 or self.max_repeats < self.min_repeats:
            raise ValueError("timing needs min_warmup >= 1 and 2 <= min_repeats <= max_repeats")
        if self.max_time_s < self.min_time_s:
            raise ValueError("timing needs min_time_s <= max_time_s")
        if self.settle_rel < 0 or self.target_rel_ci < 0 or self.batch < 1 or self.settle_windows < 2:
            raise ValueError("timing needs settle_rel, target_rel_ci >= 0, batch >= 1 and settle_windows >= 2")
        if self.max_warmup_s < max(self.warmup_s, self.sustain_s):
            raise ValueError("timing needs warmup_s and sustain_s <= max_warmup_s")
        if self.long_call_s < 0 or self.long_repeats < 2:
            raise ValueError("timing needs long_call_s >= 0 and long_repeats >= 2")
        if self.unknown_max_time_s and (self.unknown_max_time_s < self.max_time_s or not self.target_rel_ci):
            raise ValueError("timing needs unknown_max_time_s >= max_time_s, and target_rel_ci to go with it")
        if self.brief_call_s < 0 or self.brief_max_warmup_s <= 0:
            raise ValueError("timing needs brief_call_s >= 0 and brief_max_warmup_s > 0")
        if self.rest_s < 0 or self.rest_from_call_s < 0:
            raise ValueError("timing needs rest_s and rest_from_call_s >= 0")

    @property
    def settles(self) -> bool:
        return self.settle_rel > 0

    def for_sustained(self) -> TimingPolicy:
        """This policy for a rate under continuous load (matmul, a training step): at least ``sustain_s`` of
        warm-up, so the power limit's transient is over before anything is timed."""
        if not self.sustain_s or self.unsustained_warmup_s is not None:
            return self
        return replace(self, warmup_s=max(self.warmup_s, self.sustain_s), unsustained_warmup_s=self.warmup_s)

    def is_long(self, call_s: float) -> bool:
        return 0.0 < self.long_call_s <= call_s

    def for_call(self, call_s: float) -> TimingPolicy:
        """This policy once a call is known to take ``call_s`` on the device: a sustained warm-up only where the
        call is heavy enough to bring the power limit in (``sustain_from_call_s``: on the H200 a 2048^3 bf16
        product, 27 us between flushes, kept 1980 MHz, a 4096^3 one, 195 us, was held to 1605-1725 MHz), and
        ``for_long_calls`` where a call is a window of its own."""
        policy = self
        if self.unsustained_warmup_s is not None and call_s < self.sustain_from_call_s:
            policy = replace(policy, warmup_s=self.unsustained_warmup_s, unsustained_warmup_s=None)
        return policy.for_long_calls() if policy.is_long(call_s) else policy

    def rest_before(self, call_s: float) -> float:
        """How long the device idles before a case's timed windows (after its warm-up calls): ``rest_s`` for a call
        of ``rest_from_call_s`` or more that is not timed under sustained load (``for_sustained``) nor a window of its
        own. Such a cell (a BERT-large block at batch 128, 4.4 ms a call) reads what the cells before it left: right
        after 0.4 s of load its first windows on the H200 were 14 % slower than after a rest and 22 % apart over
        four trials; after 40 ms idle, 0.5 % apart (benchmarks/rest_before_cell.py). Its first call used to make
        that pause, before the call was prepared ahead."""
        if not self.rest_s or call_s < self.rest_from_call_s or self.is_long(call_s):
            return 0.0
        return 0.0 if self.unsustained_warmup_s is not None else self.rest_s

    def warmup_limit(self, timed_call_s: float) -> float:
        """About when a settling warm-up ends, settled or not, once its timed repeats say a call takes
        ``timed_call_s``. A call under ``brief_call_s`` (a 512^3 product: less time than the L2 flush before it)
        times the launch and the clock's dithering at light load, which no warm-up removes: on the H200 such
        cells' windows agreed within 1 % in 0.3 s in 3 of 8, and moved by up to 4.9 % between runs all the same,
        so theirs ends at ``brief_max_warmup_s``. (Told by the timed repeats, not the warm-up calls: a first call's
        events also hold the host's launch.)"""
        if timed_call_s < self.brief_call_s:
            return min(self.max_warmup_s, max(self.brief_max_warmup_s, self.warmup_s))
        return self.max_warmup_s

    def warmed_up(self, calls: int, elapsed_s: float, call_s: float) -> bool:
        """Whether the warm-up calls may stop after ``calls`` of them, ``elapsed_s`` since the case began, the
        fastest taking ``call_s``: at least ``min_warmup``, then at once where settling goes on from the timed
        repeats, else once this call's warm-up time (``for_call``) has passed."""
        if calls < self.min_warmup:
            return False
        settling = self.settles and not self.is_long(call_s)
        return settling or elapsed_s >= self.for_call(call_s).warmup_s

    def for_long_calls(self) -> TimingPolicy:
        """This policy for calls of ``long_call_s`` or more (a prefill of thousands of tokens, a training step, an
        fp32 product of 16384): each call is continuous load long enough to be a settling window by itself, so one
        warm-up call (or ``warmup_s`` of them) replaces the windows, and ``long_repeats`` calls are timed. Settling
        them call by call took 2-3.5 s of warm-up a case on the H200 and still ended unsettled: single calls of a
        power-capped GPU differ by more than 1 %, and a window of one call has no noise estimate to allow for it."""
        return replace(self, settle_rel=0.0, min_warmup=1, min_repeats=min(self.min_repeats, self.long_repeats),
                       max_repeats=max(min(self.max_repeats, self.long_repeats), 2), batch=1)  # fmt: skip


@dataclass(frozen=True)
class BurstPolicy:
    """Bursts of ``calls`` after ``idle_s`` of idleness; statistics over the ``keep`` fastest calls."""

    bursts: int = 5
    calls: int = 10
    idle_s: float = 0.3
    keep: int = 5


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
        iqr_s=_iqr(samples),
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
    )


def _share(value: float | None) -> float | None:
    return None if value is None else min(max(value, 0.0), 1.0)


def _iqr(samples: list[float]) -> float:
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
    return _iqr(samples) <= policy.target_rel_iqr * statistics.median(samples)


def _unknown_at_limit(samples: list[float], elapsed: float, policy: TimingPolicy) -> bool:
    """Whether repetition stopped at ``unknown_max_time_s`` with the median still not known to ``target_rel_ci``."""
    return (bool(policy.unknown_max_time_s) and elapsed >= policy.unknown_max_time_s
            and len(samples) < policy.max_repeats and not median_known(samples, policy.target_rel_ci))  # fmt: skip


@dataclass
class Idle:
    """What the device saw of the host over a window's batches. Between repeats: each batch of several repeats' span
    from its first start event to its last end event, less its repeats and the flushes between them (``flush_s``
    each, the fastest seen, so idleness is never overstated); enqueued back to back, a batch leaves the device idle
    there only where the host fell behind. Within them: the host's time to launch each batch (its flushes, events
    and calls) against the device's time to run it, near 1 where the device could only follow the host, which idle
    between repeats does not show (agent/timing/starvation.py)."""

    flush_s: float
    span_s: float = 0.0  # batches of several repeats
    busy_s: float = 0.0
    run_s: float = 0.0  # every batch
    launch_s: float = 0.0

    def add(self, span_s: float, repeats_s: list[float], flushes: int, launch_s: float) -> None:
        self.run_s += span_s
        self.launch_s += launch_s
        if len(repeats_s) > 1:
            self.span_s += span_s
            self.busy_s += min(sum(repeats_s) + flushes * self.flush_s, span_s)

    def share(self) -> float | None:
        return (self.span_s - self.busy_s) / self.span_s if self.span_s > 0 else None

    def launch_share(self) -> float | None:
        return min(self.launch_s / self.run_s, 1.0) if self.run_s > 0 else None


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
    batch: Batch, policy: TimingPolicy, began: float, per_repeat_s: float, calls: int = 1, *, asynchronous: bool = False
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


#: What a rehearsing process may keep cached of its dropped captures' memory (a spare that prepared 100 large cells
#: had held 88 GiB on the H200, and a training step beside it ran out of memory).
REHEARSAL_RESERVE_BYTES = 4 << 30


class CudaTimer:
    """CUDA-event timing on one device, with an L2 flush buffer sized from the device's cache."""

    def __init__(self, device: torch.device, l2_bytes: int) -> None:
        import torch

        self._torch = torch
        self.device = device
        # Zeroing twice the L2 evicts whatever the previous repeat left there; at least 256 MiB, the buffer triton's
        # do_bench zeroes, so that a product timed call by call sits between the same flushes in both harnesses (the
        # flush's own memory traffic sets the power a short product starts from: on the H200, 2048^3 read 3 % apart
        # with a 120 MB flush).
        self._flush_buf = torch.empty(max(2 * l2_bytes, FLUSH_BYTES) // 4, dtype=torch.float32, device=device)
        self._frame: tuple[float, float] | None = None

    def flush(self) -> None:
        self._flush_buf.zero_()

    def frame(self) -> tuple[float, float]:
        """What a timed repeat costs around its call: the host's time to make and record its two events and
        launch the flush, and the GPU's time for the flush (the fastest of a few, measured once)."""
        if self._frame is None:
            torch = self._torch
            host, gpu = math.inf, math.inf
            for _ in range(5):
                self._sync()
                h0 = time.perf_counter()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                self.flush()
                end.record()
                host = min(host, time.perf_counter() - h0)
                end.synchronize()
                gpu = min(gpu, start.elapsed_time(end) / 1e3)
            self._frame = (host, gpu)
        return self._frame

    def _sync(self) -> None:
        self._torch.cuda.synchronize(self.device)

    def _warm(self, fn: Callable[[], object], policy: TimingPolicy) -> tuple[int, float, float]:
        """Warm-up calls, each timed: the fastest says how long the GPU takes and how long the host took to launch.
        After ``min_warmup`` calls, long ones (``is_long``) go on for ``warmup_s``: they are timed without settling."""
        torch = self._torch
        begin, calls = time.perf_counter(), 0
        gpu, host = math.inf, math.inf
        while not policy.warmed_up(calls, time.perf_counter() - begin, gpu):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self._sync()
            start.record()
            h0 = time.perf_counter()
            fn()
            h1 = time.perf_counter()
            end.record()
            end.synchronize()
            calls += 1
            if calls > 1 or policy.min_warmup == 1:  # the first call pays for allocation and lazy loading
                gpu, host = min(gpu, start.elapsed_time(end) / 1e3), min(host, h1 - h0)
        return calls, gpu, host

    def _capture(self, fn: Callable[[], object], calls: int) -> Callable[[], object] | None:
        """A replay of ``calls`` back-to-back calls, or None where the work cannot be captured."""
        torch = self._torch
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream(device=self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        try:
            with torch.cuda.stream(side):  # what a new stream needs (its workspace, say) is made before capture
                fn()
            torch.cuda.current_stream(self.device).wait_stream(side)
            # The capture stream must live on this device: torch's default capture stream is made once, on
            # whichever device was current first, and kernels on another device's tensors escape its capture.
            # Captured without torch.cuda.graph's context, which empties the allocator's caches at every capture:
            # each case would then pay for fresh device and pinned allocations.
            with torch.cuda.stream(side):
                graph.capture_begin()
                try:
                    for _ in range(calls):
                        fn()
                finally:
                    graph.capture_end()
            graph.replay()
            self._sync()
        except (RuntimeError, NotImplementedError):
            self._sync()
            return None
        replay: Callable[[], object] = graph.replay
        return replay

    def rehearse(self, fn: Callable[[], object]) -> bool:
        """Capture one call of ``fn`` into a CUDA graph and drop it: the host does everything a first call does
        (cuDNN builds its attention graph for a new shape: 73-83 ms a layer cell on the H200, against 2.5-4 ms for
        a later call), and the GPU runs nothing, so another process can measure meanwhile. Relaxed capture, so
        that allocations made on the way are allowed; any failure only means nothing was prepared."""
        torch = self._torch
        graph = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream(device=self.device)
        try:
            with torch.cuda.stream(side):
                graph.capture_begin(capture_error_mode="relaxed")
                try:
                    fn()
                finally:
                    graph.capture_end()
        except (RuntimeError, NotImplementedError):
            return False
        finally:
            del graph
            # The dropped capture's memory stays cached for this process: past a bound, give it back, so that
            # preparing many large cells does not take the device memory the measuring process beside it needs.
            if torch.cuda.memory_reserved(self.device) > REHEARSAL_RESERVE_BYTES:
                torch.cuda.empty_cache()
        return True

    def measure(
        self, fn: Callable[[], object], policy: TimingPolicy, *, flush: bool = True, graphable: bool = True
    ) -> Timed:
        begin = time.perf_counter()
        warmup, gpu_s, host_s = self._warm(fn, policy)
        policy = policy.for_call(gpu_s)
        launch_bound = host_s > 0.5 * gpu_s
        body: Callable[[], object] = fn
        method: Method = "cuda_event"
        calls = 1
        captured = time.perf_counter()
        # Timed call by call, a repeat is a flush, two events and the call: where the host takes longer to enqueue
        # that than the GPU to run it, the GPU waits between the start event and the call, and the wait is timed.
        frame_host, frame_gpu = self.frame() if flush else (0.0, 0.0)
        starved = host_s + frame_host > policy.graph_host_share * (gpu_s + frame_gpu)
        if graphable and (gpu_s < policy.graph_below_s or starved):
            calls = max(1, min(policy.graph_max_calls, math.ceil(policy.graph_target_s / max(gpu_s, 1e-7))))
            replay = self._capture(fn, calls)
            if replay is not None:
                body, method, launch_bound = replay, "cuda_graph", False
            else:
                calls = 1
        capture_s = time.perf_counter() - captured
        rest_s = policy.rest_before(gpu_s)
        if rest_s:
            self._sync()
            time.sleep(rest_s)

        idle = Idle(frame_gpu)

        def batch(count: int) -> Callable[[], list[float]]:
            read = self._enqueue(body, count, flush, idle)
            return lambda: [t / calls for t in read()]

        host = HostWindow()
        done = repeat(batch, policy, begin, gpu_s * calls, calls, asynchronous=True)
        phases = Phases(warmup_s=done.warmup_end - begin - capture_s, capture_s=capture_s, settled=done.settled,
                        host_wait=host.share(), device_idle=idle.share(), launch_share=idle.launch_share())  # fmt: skip
        stats = summarize(
            done.samples,
            method=method,
            warmup=warmup + done.discarded * calls,
            calls_per_repeat=calls,
            total_s=time.perf_counter() - begin,
            phases=phases,
        )
        return Timed(stats=stats, launch_bound=launch_bound, samples_s=tuple(done.samples))

    def _enqueue(
        self, body: Callable[[], object], count: int, flush: bool, idle: Idle | None = None
    ) -> Callable[[], list[float]]:
        """``count`` repeats enqueued back to back, each between its own pair of events; what it returns waits for
        the last and reads their times (one synchronisation per batch), adding the batch's span to ``idle``."""
        torch = self._torch
        events = []
        began = time.perf_counter()
        for _ in range(count):
            if flush:
                self.flush()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            body()
            end.record()
            events.append((start, end))
        launch_s = time.perf_counter() - began

        def read() -> list[float]:
            events[-1][1].synchronize()
            times = [s.elapsed_time(e) / 1e3 for s, e in events]
            if idle is not None:
                span = events[0][0].elapsed_time(events[-1][1]) / 1e3
                idle.add(span, times, flushes=len(events) - 1 if flush else 0, launch_s=launch_s)
            return times

        return read

    def _repeats(self, body: Callable[[], object], count: int, flush: bool) -> list[float]:
        return self._enqueue(body, count, flush)()

    def bursts(self, fn: Callable[[], object], bursts: BurstPolicy) -> Timed:
        """Short bursts after idle gaps, each call timed: what the GPU achieves at boost clock (mamf-finder's MAMF)."""
        begin = time.perf_counter()
        fn()
        self._sync()
        samples: list[float] = []
        for _ in range(bursts.bursts):
            time.sleep(bursts.idle_s)
            samples.extend(self._repeats(fn, bursts.calls, flush=True))
        fastest = sorted(samples)[: bursts.keep]
        stats = summarize(
            fastest, method="cuda_event", warmup=1, calls_per_repeat=1, total_s=time.perf_counter() - begin
        )
        return Timed(stats=stats, launch_bound=False)


_IMPORTED = time.monotonic()


def process_started() -> float:
    """When this process started, on ``time.monotonic``'s clock: dated by the kernel where it says (Linux's
    /proc, to its clock tick), else when this module was imported."""
    try:
        with open("/proc/self/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return _IMPORTED
    return min(time.monotonic() - max(age, 0.0), _IMPORTED)


@dataclass(frozen=True)
class GroupPolicy:
    """How a case that spans several processes is timed: fixed counts, because every rank must run the same
    number of collectives (a rank that stops early leaves the others waiting forever)."""

    warmup: int = 5
    repeats: int = 20
    repeat_s: float = 0.02  # one timed repeat lasts about this long; calls per repeat come from a pilot call
    max_calls: int = 1000

    def __post_init__(self) -> None:
        if self.warmup < 1 or self.repeats < 2 or self.max_calls < 1 or self.repeat_s <= 0:
            raise ValueError("group timing needs warmup >= 1, repeats >= 2, max_calls >= 1, repeat_s > 0")


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


class Clock(Protocol):
    """Times ``calls`` back-to-back calls once, on one rank's device."""

    @property
    def method(self) -> Method: ...

    def time(self, fn: Callable[[], object], calls: int) -> float: ...


class PerfClock:
    """``perf_counter`` around the calls: the CPU runs them synchronously."""

    method: Method = "perf_counter"

    def time(self, fn: Callable[[], object], calls: int) -> float:
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return time.perf_counter() - t0


class CudaEventClock:
    """CUDA events around the calls: the stream's view, without host jitter."""

    method: Method = "cuda_event"

    def __init__(self) -> None:
        import torch

        self._torch = torch

    def time(self, fn: Callable[[], object], calls: int) -> float:
        start = self._torch.cuda.Event(enable_timing=True)
        end = self._torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1e3

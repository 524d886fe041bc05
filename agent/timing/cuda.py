"""CUDA events and graphs: the timer of a GPU's cases (L2 flushed between repeats, short calls replayed from a graph)
and the clock of a rank on a GPU."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..machine.energy import EnergyMeter
from .loop import Idle, repeat
from .policy import BurstPolicy, TimingPolicy
from .starvation import FOLLOWED_WITHIN_S, HostWindow
from .stats import Method, Phases, Timed, summarize

if TYPE_CHECKING:
    import torch

#: The least a CUDA timer zeroes between repeats: triton.testing.do_bench's L2-clearing buffer.
FLUSH_BYTES = 256 << 20
#: What a rehearsing process may keep cached of its dropped captures' memory (a spare that prepared 100 large cells
#: had held 88 GiB on the H200, and a training step beside it ran out of memory).
REHEARSAL_RESERVE_BYTES = 4 << 30
#: A graph whose replay fills less than this share of ``graph_target_s`` on the device is captured again with the calls
#: that fill it: the warm-up times a call as the host launches it (docs/methodology.md, "Timing").
REFILL_BELOW = 0.5
#: Replays timed to learn what a graph's calls take on the device; the fastest counts (a host away holds up one).
REPLAY_PROBES = 3


class CudaTimer:
    """CUDA-event timing on one device, with an L2 flush buffer sized from the device's cache."""

    def __init__(self, device: torch.device, l2_bytes: int, energy: EnergyMeter | None = None) -> None:
        import torch

        self._torch = torch
        self.device = device
        # Zeroing twice the L2 evicts whatever the previous repeat left there; at least 256 MiB, the buffer triton's
        # do_bench zeroes, so that a product timed call by call sits between the same flushes in both harnesses (the
        # flush's own memory traffic sets the power a short product starts from: on the H200, 2048^3 read 3 % apart
        # with a 120 MB flush).
        self._flush_buf = torch.empty(max(2 * l2_bytes, FLUSH_BYTES) // 4, dtype=torch.float32, device=device)
        self._frame: tuple[float, float] | None = None
        self._energy = energy

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

    def _refilled(
        self, fn: Callable[[], object], replay: Callable[[], object], calls: int, policy: TimingPolicy
    ) -> tuple[Callable[[], object], int]:
        """The replay, captured again with more calls where its calls fill under ``REFILL_BELOW`` of the target on
        the device. The warm-up timed one call as the host launched it, so a call the host launches slower than the
        device runs it read the host's pace, and a busy host's pace gave fewer calls a replay, each carrying more of
        the replay's own cost (the cold cache after the flush, the graph's start): docs/methodology.md, "Timing"."""
        fits = _calls(policy, self._replay_s(replay) / calls)
        if fits < calls / REFILL_BELOW:
            return replay, calls
        refilled = self._capture(fn, fits)
        return (replay, calls) if refilled is None else (refilled, fits)

    def _replay_s(self, replay: Callable[[], object]) -> float:
        """The fastest of ``REPLAY_PROBES`` replays on the device, each between its events after a synchronisation."""
        torch = self._torch
        fastest = math.inf
        for _ in range(REPLAY_PROBES):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            self._sync()
            start.record()
            replay()
            end.record()
            end.synchronize()
            fastest = min(fastest, start.elapsed_time(end) / 1e3)
        return fastest

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
            calls = _calls(policy, gpu_s)
            replay = self._capture(fn, calls)
            if replay is not None:
                replay, calls = self._refilled(fn, replay, calls, policy)
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
        # The energy counter is read through the repeats (the settling ones too: the same call at the same pace), from
        # its first move inside them to its last (machine/energy.py).
        meter = self._energy
        window = meter.start() if meter is not None else None
        done = repeat(batch, policy, begin, gpu_s * calls, calls, asynchronous=True)
        energy = meter.stop(window) if meter is not None else None
        phases = Phases(warmup_s=done.warmup_end - begin - capture_s, capture_s=capture_s, settled=done.settled,
                        host_wait=host.share(), device_idle=idle.share(), launch_share=idle.launch_share(),
                        energy=energy)  # fmt: skip
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
        # Per repeat, where the device reached the repeat's start before the host had launched all of it: the
        # launching thread's time off a CPU meanwhile, which the device may have waited, and whether the device
        # followed the host to the repeat's end (``Idle`` says how much of it counts).
        waited: list[float] = []
        followed: list[bool] = []
        for _ in range(count):
            if flush:
                self.flush()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            launch = launched(body, start, end, probe=idle is not None)
            waited.append(launch.off_cpu_s if launch.held else 0.0)
            followed.append(launch.followed)
            events.append((start, end))

        def read() -> list[float]:
            events[-1][1].synchronize()
            times = [s.elapsed_time(e) / 1e3 for s, e in events]
            if idle is not None:
                span = events[0][0].elapsed_time(events[-1][1]) / 1e3
                idle.add(span, times, flushes=len(events) - 1 if flush else 0, waited_s=waited, followed=followed)
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


def _calls(policy: TimingPolicy, call_s: float) -> int:
    """How many calls of ``call_s`` a graph holds: about ``graph_target_s`` of them, at most ``graph_max_calls``."""
    return max(1, min(policy.graph_max_calls, math.ceil(policy.graph_target_s / max(call_s, 1e-7))))


@dataclass(frozen=True)
class Launch:
    """What the host saw of one repeat's launch: its launching thread's time off a CPU meanwhile, whether the device
    had reached the repeat's start event by the launch's end with that thread away (``held``: the device may have
    waited on it), and, where held, whether the end event completed within ``follow_s`` of the last launch
    (``followed``: the device followed the host to the end; ``loop.Idle`` says how much of the time away counts)."""

    off_cpu_s: float
    held: bool
    followed: bool


def launched(
    body: Callable[[], object],
    start: torch.cuda.Event,
    end: torch.cuda.Event,
    probe: bool = True,
    follow_s: float = FOLLOWED_WITHIN_S,
) -> Launch:
    """``body`` launched between ``start`` and ``end``, probed (``probe``) as the busy-host rule reads a repeat.
    The follow wait is cut short as soon as the end completes and costs no device time where it does not, the
    device having that much work queued."""
    start.record()
    wall, cpu = time.perf_counter(), time.thread_time()
    body()
    end.record()
    off = (time.perf_counter() - wall) - (time.thread_time() - cpu)
    held = probe and off > 0 and bool(start.query())
    if not held:
        return Launch(off, False, False)
    deadline = time.perf_counter() + follow_s
    while not end.query():
        if time.perf_counter() >= deadline:
            return Launch(off, True, False)
    return Launch(off, True, True)


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

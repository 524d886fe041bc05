"""The only place that measures time.

GPU work is timed with CUDA events per repeat, after warm-up, with the L2 cache flushed before each repeat.
Calls the host cannot launch fast enough to keep the GPU busy are captured in a CUDA graph and replayed, so
host jitter is never reported as GPU speed. The CPU path uses ``time.perf_counter``. Warm-up can last until the
timings settle, and repetition stops once the median is known well enough, or the interquartile range is small,
or when the case's time budget is spent (the rules are in ``repeats``).

Each device kind picks its implementations (``Device.timer``, ``Device.clock``): a ``Timer`` for the cases of one
device, a ``Clock`` for one rank of a worker group; the harness never asks which kind it has.

The package's parts, lowest first: ``repeats`` (warm-up and stopping rules, pure), ``starvation`` (what the host gave
a window), ``policy``, ``stats``, ``loop`` (the repeat loop and the CPU timer), ``cuda`` (events and graphs),
``clocks`` and ``group`` (a worker group's ranks). Its public names are re-exported here; none imports torch at
import time.
"""

from .clocks import Clock, PerfClock, process_started
from .cuda import FLUSH_BYTES, REHEARSAL_RESERVE_BYTES, CudaEventClock, CudaTimer
from .group import measure_group
from .loop import Batch, CpuTimer, Idle, Repeated, Timer, bursts_cpu, measure_cpu, repeat
from .policy import BurstPolicy, GroupPolicy, TimingPolicy
from .stats import Method, Phases, Timed, summarize

__all__ = [
    "FLUSH_BYTES",
    "REHEARSAL_RESERVE_BYTES",
    "Batch",
    "BurstPolicy",
    "Clock",
    "CpuTimer",
    "CudaEventClock",
    "CudaTimer",
    "GroupPolicy",
    "Idle",
    "Method",
    "PerfClock",
    "Phases",
    "Repeated",
    "Timed",
    "Timer",
    "TimingPolicy",
    "bursts_cpu",
    "measure_cpu",
    "measure_group",
    "process_started",
    "repeat",
    "summarize",
]

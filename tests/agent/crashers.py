"""Benchmark families that fail for real, registered through FLOPFLEET_PLUGINS for the isolation tests.

Each has two cases: ``crash`` fails its own way (a segfault, an exit, a hang, an exception, a kill from outside, a
device-side assert),
``after`` is an ordinary small matmul that must still be measured, by a fresh child where the first one died.
"""

from __future__ import annotations

import ctypes
import os
import time

from agent.benchmarks import Case
from agent.benchmarks.base import Context, Outcome
from agent.benchmarks.matmul import MatmulBenchmark, MatmulGrid
from agent.devices.target import Target
from agent.harness.plugins import register
from agent.harness.suites import Suite
from agent.timing import TimingPolicy
from schemas import MatmulParams

#: The file a ``crash_killed`` child writes its pid to, so that a test can SIGKILL it from outside.
PIDFILE = "FLOPFLEET_TEST_PIDFILE"


class _Crashing(MatmulBenchmark):
    def cases(self, target: Target) -> list[Case]:
        params = MatmulParams(m=64, n=64, k=64, dtype="fp32")
        return [Case(label="crash n=64", params=params), Case(label="after n=64", params=params)]

    def run(self, case: Case, ctx: Context) -> Outcome:
        if case.label.startswith("crash"):
            self.crash()
        return super().run(case, ctx)

    def crash(self) -> None:
        raise NotImplementedError


class Raises(_Crashing):
    NAME = "crash_raise"

    def crash(self) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered (raised by the test)")


class Segfaults(_Crashing):
    NAME = "crash_segfault"

    def crash(self) -> None:
        ctypes.string_at(0)  # reads address 0: SIGSEGV


class Exits(_Crashing):
    NAME = "crash_exit"

    def crash(self) -> None:
        os._exit(3)


#: The file a ``crash_hang`` child writes its pid to as it starts hanging (a test then knows a case is under way).
HANGING = "FLOPFLEET_TEST_HANGING"


class Hangs(_Crashing):
    NAME = "crash_hang"

    def crash(self) -> None:
        if os.environ.get(HANGING):
            with open(os.environ[HANGING], "w") as marker:
                marker.write(str(os.getpid()))
        time.sleep(3600)


class KilledFromOutside(_Crashing):
    NAME = "crash_killed"

    def crash(self) -> None:
        with open(os.environ[PIDFILE], "w") as pidfile:
            pidfile.write(str(os.getpid()))
        time.sleep(120)  # until the test kills this process, as the kernel's OOM killer would


class DeviceAssert(_Crashing):
    """An index out of bounds: on a GPU a device-side assert, which poisons the process's CUDA context for good
    (a sticky error); on the CPU an ordinary IndexError."""

    NAME = "crash_assert"

    def crash(self) -> None:
        import torch

        device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
        values = torch.zeros(8, device=device)
        values[torch.tensor([1 << 20], device=device)].sum().item()


FAMILIES = (Raises, Segfaults, Exits, Hangs, KilledFromOutside, DeviceAssert)
TINY = MatmulGrid(sizes=(64,), dtypes=("fp32",))
CRASH = Suite(
    name="crash",
    description="a small matmul, then families that fail in every way a process can",
    policy=TimingPolicy(min_repeats=3, max_repeats=5, min_time_s=0.001, max_time_s=0.01),
    grids={"matmul": TINY, **{f.NAME: TINY for f in FAMILIES}},
)
register(*FAMILIES, suites=(CRASH,))

"""Where benchmarks run, chosen in one place: ``inline`` (the agent's process), ``process`` (a child process per
device, the default) for device benchmarks, and the torchrun-style worker group (``agent.distributed.launch``)
for the collective and data-parallel ones."""

from __future__ import annotations

from typing import Literal

from ..timing import TimingPolicy
from .base import Counted, DeviceLauncher, Finisher, Job, Progress
from .inline import InlineLauncher
from .process import ProcessLauncher

Isolation = Literal["process", "inline"]
ISOLATIONS: tuple[Isolation, ...] = ("process", "inline")


def device_launcher(
    isolation: Isolation, policy: TimingPolicy, *, case_timeout_s: float | None = None, parallel: bool = False
) -> DeviceLauncher:
    """The launcher for device benchmarks: ``parallel`` measures every device at once, each in its own child."""
    if isolation == "inline":
        return InlineLauncher(policy)
    return ProcessLauncher(policy, case_timeout_s=case_timeout_s, parallel=parallel)


__all__ = [
    "ISOLATIONS",
    "Counted",
    "DeviceLauncher",
    "Finisher",
    "Isolation",
    "Job",
    "Progress",
    "device_launcher",
]

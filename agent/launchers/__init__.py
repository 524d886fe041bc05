"""Where benchmarks run, chosen in one place (``launchers_for``): device benchmarks ``inline`` (the agent's process)
or ``process`` (a child process per device, the default), and group benchmarks (collectives, data-parallel) on
torchrun-style worker groups (``group``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..timing import TimingPolicy
from .base import Counted, DeviceLauncher, Finisher, Job, Progress
from .group import GroupLauncher
from .inline import InlineLauncher
from .process import ProcessLauncher

Isolation = Literal["process", "inline"]
ISOLATIONS: tuple[Isolation, ...] = ("process", "inline")


@dataclass(frozen=True)
class Launchers:
    """The launcher for each kind of benchmark in a run."""

    device: DeviceLauncher
    group: GroupLauncher = field(default_factory=GroupLauncher)


def launchers_for(
    isolation: Isolation,
    policy: TimingPolicy,
    *,
    case_timeout_s: float | None = None,
    parallel: bool = False,
) -> Launchers:
    """``parallel`` measures every device at once, each in its own child; ``case_timeout_s`` bounds every case, a
    device case's or a worker group's."""
    device: DeviceLauncher = (
        InlineLauncher(policy)
        if isolation == "inline"
        else ProcessLauncher(policy, case_timeout_s=case_timeout_s, parallel=parallel)
    )
    return Launchers(device, GroupLauncher(case_timeout_s))


__all__ = [
    "ISOLATIONS",
    "Counted",
    "DeviceLauncher",
    "Finisher",
    "GroupLauncher",
    "Isolation",
    "Job",
    "Launchers",
    "Progress",
    "launchers_for",
]

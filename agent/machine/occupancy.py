"""Whether a GPU is someone else's right now, and what a run does about it (``--when-busy skip|wait|measure``).

Fleets run the agent on GPUs that jobs use: a measurement on a busy GPU disturbs the job and measures the share the
job left, so a busy GPU is by default not measured but reported ``skipped`` with the reason. Busy means another
process holds a CUDA context on it (NVML's compute and graphics processes, this process excluded), or its
utilisation is at least ``BUSY_UTILISATION_PCT`` (a container sees other containers' load, not their processes).
The survey runs before any measuring process has touched the GPU.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import ConfigError

WhenBusy = Literal["skip", "wait", "measure"]
WHEN_BUSY: tuple[WhenBusy, ...] = ("skip", "wait", "measure")
#: At or above this, a GPU is busy even with no process visible.
BUSY_UTILISATION_PCT = 10
#: Utilisation is NVML's average over its last sample period (1/6 s to 1 s by GPU): read a few times, the highest.
READS = 3
READ_GAP_S = 0.1
#: How often ``wait`` looks again.
POLL_S = 10.0
DEFAULT_WAIT_S = 600.0


@dataclass(frozen=True)
class Occupancy:
    """What else is on one GPU: other processes (None: NVML could not say) and utilisation in percent."""

    processes: int | None
    utilisation_pct: int | None

    @property
    def busy(self) -> bool:
        return bool(self.processes) or (self.utilisation_pct or 0) >= BUSY_UTILISATION_PCT

    def reason(self) -> str:
        """``busy: 2 processes, 87 % utilisation`` (what is known of it)."""
        parts = []
        if self.processes is not None:
            parts.append(f"{self.processes} process" + ("" if self.processes == 1 else "es"))
        if self.utilisation_pct is not None:
            parts.append(f"{self.utilisation_pct} % utilisation")
        return "busy: " + (", ".join(parts) or "in use")


def check_when_busy(value: str) -> WhenBusy:
    if value not in WHEN_BUSY:
        raise ConfigError(f"--when-busy {value!r} is not one of: {', '.join(WHEN_BUSY)}")
    return value


def survey(nvml: Any, handles: Mapping[int, Any]) -> dict[int, Occupancy]:
    """Each GPU's occupancy now (by torch index), through an open ``agent.machine.nvml.Nvml``: every GPU is read in each
    of the ``READS`` rounds, so the survey takes the same 0.2 s on one GPU or eight."""
    utilisation: dict[int, list[int]] = {index: [] for index in handles}
    for attempt in range(READS):
        if attempt:
            time.sleep(READ_GAP_S)
        for index, handle in handles.items():
            value = nvml.read(handle).utilization_pct
            if value is not None:
                utilisation[index].append(int(value))
    found = {}
    for index, handle in handles.items():
        pids = nvml.process_ids(handle)
        found[index] = Occupancy(
            processes=None if pids is None else len(set(pids) - {os.getpid()}),
            utilisation_pct=max(utilisation[index]) if utilisation[index] else None,
        )
    return found


def decide(
    look: Callable[[], Mapping[int, Occupancy]],
    when_busy: WhenBusy,
    wait_s: float = DEFAULT_WAIT_S,
    *,
    poll_s: float = POLL_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[int, str]:
    """The GPUs not to measure, each with why. ``look`` surveys the GPUs; ``wait`` looks again every ``poll_s``
    until all are idle or ``wait_s`` has passed, then skips those still busy."""
    if when_busy == "measure":
        return {}
    seen = look()
    if when_busy == "wait":
        waited_until = clock() + wait_s
        while any(o.busy for o in seen.values()) and clock() < waited_until:
            sleep(min(poll_s, max(0.0, waited_until - clock())))
            seen = look()
        if any(o.busy for o in seen.values()):
            return {i: f"{o.reason()} (still, after waiting {wait_s:g} s)" for i, o in seen.items() if o.busy}
    return {i: o.reason() for i, o in seen.items() if o.busy}


def busy_now(look: Callable[[], Mapping[int, Occupancy]]) -> dict[int, str]:
    """The GPUs busy now, with why (for ``measure``, which measures them but says so)."""
    return {i: o.reason() for i, o in look().items() if o.busy}

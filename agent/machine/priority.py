"""The agent's own CPU and I/O priority: ``normal`` by default, ``low`` (``nice`` 19 and the idle I/O class, as
``nice -n 19 ionice -c 3`` would set) where the agent must yield to the host's other work. The measuring processes
inherit it.

Why normal: a measurement taken at nice 19 on a busy host is not a GPU figure. Against two busy processes of its own
session on a 2-core machine, the quick suite at nice 19 had not finished after 900 s (26 s at normal; CFS gives a
nice-19 thread 15/1039 of a contended CPU), and the H200 machine's standard run with 16 busy processes beside it had
not finished after 420 s (58 s quiet). At normal priority a busy host costs a run its fair share, not its whole
time, and the windows it starved are flagged ``starved`` (``starvation``). Each use (docs/methodology.md,
"A busy host"): ``run`` by hand and ``check`` in a prolog measure at normal; a periodic run on idle GPUs may ask
for ``low``, and then a host found busy before measuring is handled as ``--when-busy`` says (skipped by default).
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
from typing import Literal

from ..errors import ConfigError

log = logging.getLogger(__name__)

Priority = Literal["low", "normal"]
PRIORITIES: tuple[Priority, ...] = ("low", "normal")
LOWEST_NICE = 19
#: ioprio_set(2) and ioprio_get(2) by machine (no libc wrapper exists).
_IOPRIO_SYSCALLS = {"x86_64": (251, 252), "aarch64": (30, 31), "ppc64le": (273, 274)}
IOPRIO_CLASS_IDLE = 3
_IOPRIO_WHO_PROCESS = 1
_IOPRIO_CLASS_SHIFT = 13


def check_priority(value: str) -> Priority:
    if value not in PRIORITIES:
        raise ConfigError(f"--priority {value!r} is not one of: {', '.join(PRIORITIES)}")
    return value


def apply(priority: Priority) -> None:
    """Lower this process (and what it starts later) to the lowest CPU and I/O priority; ``normal``: leave it.
    Where the system refuses, the agent goes on at the priority it has and says so in its log."""
    if priority == "normal":
        return
    try:
        os.setpriority(os.PRIO_PROCESS, 0, LOWEST_NICE)
    except OSError as exc:
        log.warning("could not lower the CPU priority: %s", exc)
    if not _ioprio_set(IOPRIO_CLASS_IDLE):
        log.info("the I/O priority stays as it is (no ioprio_set here)")


def io_class() -> int | None:
    """This process's I/O scheduling class (0 none, 1 realtime, 2 best-effort, 3 idle); None where unknown."""
    numbers = _IOPRIO_SYSCALLS.get(platform.machine())
    if numbers is None or not hasattr(ctypes, "CDLL"):
        return None
    value = int(ctypes.CDLL(None, use_errno=True).syscall(numbers[1], _IOPRIO_WHO_PROCESS, 0))
    return None if value < 0 else value >> _IOPRIO_CLASS_SHIFT


def _ioprio_set(klass: int) -> bool:
    numbers = _IOPRIO_SYSCALLS.get(platform.machine())
    if numbers is None:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(numbers[0], _IOPRIO_WHO_PROCESS, 0, klass << _IOPRIO_CLASS_SHIFT)) == 0

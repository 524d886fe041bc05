"""The host CPU as one device: found from the host's facts, timed with ``perf_counter``, nothing to synchronize."""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..timing import Clock, CpuTimer, PerfClock, Timer
from .base import Described, Device, Found

if TYPE_CHECKING:
    import torch

MEMINFO = "/proc/meminfo"


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        pass
    return platform.processor() or None


def memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def memory_available(meminfo: str = MEMINFO) -> int | None:
    """What the kernel could give without swapping (MemAvailable counts reclaimable caches), else free pages."""
    try:
        with open(meminfo, encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


class Cpu(Device):
    kind = "cpu"
    is_gpu = False
    collective_backend = "gloo"

    def available(self) -> bool:
        return True

    def discover(self, indices: tuple[int, ...] | None) -> list[Found]:
        """The one CPU; GPU indices do not apply to it."""
        name = cpu_model() or platform.processor() or "cpu"
        return [Found(index=None, name=name, capability=None, total_memory=memory_bytes() or 0, l2_bytes=0)]

    def torch_device(self, index: int | None) -> torch.device:
        import torch

        return torch.device("cpu")

    def select(self, index: int | None) -> None:
        pass

    def synchronize(self, index: int | None) -> None:
        pass

    def empty_cache(self, index: int | None) -> None:
        pass

    def reset_peak_memory(self, index: int | None) -> None:
        pass

    def peak_memory_bytes(self, index: int | None) -> int | None:
        return None

    def memory_free(self, index: int | None) -> int | None:
        return memory_available()

    def unsupported_reason(self, dtype: str, device: Described) -> str | None:
        if dtype == "tf32":
            return "TF32 is a tensor-core mode of NVIDIA GPUs; this run is on the CPU"
        if dtype.startswith("fp8"):
            return "fp8 matmul (torch._scaled_mm) needs an NVIDIA GPU; this run is on the CPU"
        return None

    def autocast_dtype(self, device: Described) -> str | None:
        return None

    def timer(self, device: Described) -> Timer:
        return CpuTimer()

    def clock(self, index: int | None) -> Clock:
        return PerfClock()

    def topology(self, environ: Mapping[str, str]) -> str | None:
        return None

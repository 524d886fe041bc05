"""The device a suite runs on: its facts, and every device operation, through the ``Device`` of its kind.

A ``Target`` is plain data, cheap to pickle; a process that is handed one, or only its ``(kind, index)``
(``target_for``), rebuilds the same target without being told anything else.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from . import Device, DeviceKind, default_kind, device

if TYPE_CHECKING:
    import torch

    from ..timing import Clock, Timer

__all__ = ["DeviceKind", "Target", "cpu_target", "cuda_targets", "default_device", "find_targets", "target_for"]

_TORCH_DTYPES = {"fp32": "float32", "tf32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@dataclass(frozen=True)
class Target:
    """One device: the CPU, or one GPU by torch index."""

    kind: DeviceKind
    index: int | None
    name: str
    capability: tuple[int, int] | None
    total_memory: int
    l2_bytes: int
    uuid: str | None = None
    sm_count: int | None = None

    @property
    def device(self) -> Device:
        """What this kind of device does differently (``devices``)."""
        return device(self.kind)

    @property
    def is_gpu(self) -> bool:
        return self.device.is_gpu

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.index} ({self.name})" if self.index is not None else f"{self.kind} ({self.name})"

    def torch_device(self) -> torch.device:
        return self.device.torch_device(self.index)

    def torch_dtype(self, dtype: str) -> torch.dtype:
        import torch

        if dtype.startswith("fp8"):
            return torch.float8_e4m3fn if dtype == "fp8_e4m3" else torch.float8_e5m2
        result: torch.dtype = getattr(torch, _TORCH_DTYPES[dtype])
        return result

    def unsupported_reason(self, dtype: str) -> str | None:
        """Why ``dtype`` cannot run here, or None when it can."""
        return self.device.unsupported_reason(dtype, self)

    def supports(self, dtype: str) -> bool:
        return self.unsupported_reason(dtype) is None

    def autocast_dtype(self) -> str | None:
        """What training autocasts to here ('bf16'), or None for plain fp32."""
        return self.device.autocast_dtype(self)

    def select(self) -> None:
        """Make this the current device of the process."""
        self.device.select(self.index)

    def synchronize(self) -> None:
        """Wait for queued work, so that an asynchronous error surfaces in the case that caused it."""
        self.device.synchronize(self.index)

    def empty_cache(self) -> None:
        self.device.empty_cache(self.index)

    def reset_peak_memory(self) -> None:
        self.device.reset_peak_memory(self.index)

    def peak_memory_bytes(self) -> int | None:
        """Peak allocated memory since ``reset_peak_memory``; None where the device does not track it (the CPU)."""
        return self.device.peak_memory_bytes(self.index)

    def memory_free(self) -> int | None:
        return self.device.memory_free(self.index)

    def timer(self) -> Timer:
        """The timer for this device's cases: CUDA events and graphs on a GPU, ``perf_counter`` on the CPU."""
        return self.device.timer(self)

    def clock(self) -> Clock:
        """The clock for one rank of a worker group on this device."""
        return self.device.clock(self.index)


def find_targets(kind: str, indices: tuple[int, ...] | None = None) -> list[Target]:
    """The devices of ``kind`` to measure, by index; all of them when ``indices`` is None."""
    chosen = device(kind)
    return [Target(kind=chosen.kind, **asdict(found)) for found in chosen.discover(indices)]


def target_for(kind: str, index: int | None) -> Target:
    """The target ``(kind, index)`` names, as another process of this machine found it."""
    return find_targets(kind, None if index is None else (index,))[0]


def cpu_target() -> Target:
    return find_targets("cpu")[0]


def cuda_targets(indices: tuple[int, ...] | None) -> list[Target]:
    """The GPUs to measure, by torch index; all of them when ``indices`` is None."""
    return find_targets("cuda", indices)


def default_device() -> DeviceKind:
    return default_kind()

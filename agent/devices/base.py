"""What differs between kinds of device: a ``Device`` per kind says how to find, run on, time and clean up one."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, Protocol

if TYPE_CHECKING:
    import torch

    from ..timing import Clock, Timer

#: The kinds the wire contract knows (``RunSubmission.device``); a new kind is added there too.
DeviceKind = Literal["cuda", "cpu"]


@dataclass(frozen=True)
class Found:
    """What one device says about itself when a run looks for it; ``Target`` adds its kind."""

    index: int | None
    name: str
    capability: tuple[int, int] | None
    total_memory: int
    l2_bytes: int
    uuid: str | None = None
    sm_count: int | None = None


class Described(Protocol):
    """The facts a kind's rules read: a ``Found`` or a ``Target``."""

    @property
    def index(self) -> int | None: ...

    @property
    def name(self) -> str: ...

    @property
    def capability(self) -> tuple[int, int] | None: ...

    @property
    def l2_bytes(self) -> int: ...

    @property
    def uuid(self) -> str | None: ...


class Device(ABC):
    """One kind of device; stateless, so one instance per kind serves every target of that kind."""

    kind: ClassVar[DeviceKind]
    is_gpu: ClassVar[bool]
    #: The torch.distributed backend of a group of these devices.
    collective_backend: ClassVar[Literal["nccl", "gloo"]]

    @abstractmethod
    def available(self) -> bool:
        """Whether torch can use this kind here at all (checked without starting a run)."""

    @abstractmethod
    def discover(self, indices: tuple[int, ...] | None) -> list[Found]:
        """The devices to measure, by index (all when None); ``DeviceError`` names the ones that are not there."""

    @abstractmethod
    def torch_device(self, index: int | None) -> torch.device: ...

    @abstractmethod
    def select(self, index: int | None) -> None:
        """Make the device current in this process, so work without an explicit device lands on it."""

    @abstractmethod
    def synchronize(self, index: int | None) -> None:
        """Wait for queued work, so an asynchronous failure surfaces in the case that caused it."""

    @abstractmethod
    def empty_cache(self, index: int | None) -> None:
        """Give cached, unused allocator memory back, so the next case starts with all of it."""

    @abstractmethod
    def reset_peak_memory(self, index: int | None) -> None: ...

    @abstractmethod
    def peak_memory_bytes(self, index: int | None) -> int | None:
        """The most memory allocated since the last reset; None where the kind does not track it."""

    @abstractmethod
    def memory_free(self, index: int | None) -> int | None:
        """Bytes free on the device now, None where unknown."""

    @abstractmethod
    def unsupported_reason(self, dtype: str, device: Described) -> str | None:
        """Why ``dtype`` cannot run on ``device``, or None when it can."""

    @abstractmethod
    def autocast_dtype(self, device: Described) -> str | None:
        """The dtype mixed-precision training autocasts to where it is fast here; None trains in plain fp32."""

    @abstractmethod
    def timer(self, device: Described) -> Timer:
        """How a case on ``device`` is timed (``timing`` holds every implementation)."""

    @abstractmethod
    def clock(self, index: int | None) -> Clock:
        """How one rank of a worker group times its calls."""

    @abstractmethod
    def topology(self, environ: Mapping[str, str]) -> str | None:
        """How the machine's devices of this kind are linked and the settings that change that; None if moot."""

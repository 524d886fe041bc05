"""What a benchmark is: a small class that plans cases and runs one, while the runner owns timing and failure."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from schemas import Flag, TimingStats
from schemas.base import WireModel

from ..target import Target
from ..timing import BurstPolicy, Timed, TimingPolicy


@dataclass(frozen=True)
class Case:
    """One cell of a benchmark: the params it will report, a label for people, and private details."""

    label: str
    params: WireModel
    spec: Any = None


@dataclass(frozen=True)
class Outcome:
    """What a case measured; ``params`` replaces the planned ones where running refined them."""

    metrics: WireModel
    timing: TimingStats
    params: WireModel | None = None
    flags: tuple[Flag, ...] = ()


class Context(Protocol):
    """The harness a case runs in: it alone measures time."""

    target: Target
    policy: TimingPolicy

    def measure(
        self,
        fn: Callable[[], object],
        *,
        flush: bool = True,
        graphable: bool = True,
        policy: TimingPolicy | None = None,
    ) -> Timed: ...

    def bursts(self, fn: Callable[[], object], policy: BurstPolicy) -> Timed: ...

    def free_memory(self) -> None: ...


G = TypeVar("G")


class Benchmark(ABC, Generic[G]):
    """A registered family of cases over a typed grid. ``KIND`` is the result kind it produces on the wire."""

    NAME: ClassVar[str]
    KIND: ClassVar[str]
    DESCRIPTION: ClassVar[str]
    Grid: ClassVar[type[Any]]

    def __init__(self, grid: G) -> None:
        if not isinstance(grid, self.Grid):
            raise TypeError(f"{self.NAME} takes a {self.Grid.__name__}, not {type(grid).__name__}")
        self.grid: G = grid

    @abstractmethod
    def cases(self, target: Target) -> list[Case]:
        """Every case this benchmark's grid asks for on ``target``, in run order."""

    @abstractmethod
    def run(self, case: Case, ctx: Context) -> Outcome:
        """Measure one case; raise ``Unsupported`` where the device cannot run it."""

    def close(self) -> None:
        """Drop anything kept between cases (built models), so the next benchmark has the memory."""


#: A benchmark over any grid, as registries and runners hold them.
AnyBenchmark = Benchmark[Any]

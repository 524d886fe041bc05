"""What a benchmark is: a small class that plans cases and runs one, while the runner owns timing and failure.

A ``Benchmark`` runs on one device at a time, in the agent's process. A ``GroupBenchmark`` spans the machine
(or several): its cases run in a group of worker processes, one per GPU, that the runner launches.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from schemas import Flag, TimingStats
from schemas.base import WireModel

from ..devices.target import DeviceKind, Target
from ..distributed.launch import WorkerKind
from ..distributed.nodes import Nodes
from ..timing import BurstPolicy, GroupPolicy, Timed, TimingPolicy


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

    def rehearse(self, fn: Callable[[], object]) -> bool:
        """Prepare what ``fn``'s first call prepares (kernel plans) without running it on the device, where the
        device can (a CUDA graph captured and dropped); whether it did."""
        ...

    def free_memory(self) -> None: ...


G = TypeVar("G")


class BenchmarkBase(ABC, Generic[G]):
    """A registered family of cases over a typed grid. ``KIND`` is the result kind it produces on the wire."""

    NAME: ClassVar[str]
    KIND: ClassVar[str]
    DESCRIPTION: ClassVar[str]
    Grid: ClassVar[type[Any]]
    #: Modules its cases import: a measuring child imports them before its first case, while the agent probes.
    WARM: ClassVar[tuple[str, ...]] = ()

    def __init__(self, grid: G) -> None:
        if not isinstance(grid, self.Grid):
            raise TypeError(f"{self.NAME} takes a {self.Grid.__name__}, not {type(grid).__name__}")
        self.grid: G = grid

    def rehearse(self, case: Case, ctx: Context) -> None:
        """What ``case``'s first call builds, built ahead without running on the device (``Context.rehearse``), by a
        measuring process waiting while another measures: nothing by default."""

    def warm_for(self, case: Case) -> tuple[str, ...]:
        """The modules ``case`` imports (``WARM`` for every case unless a family says otherwise): a case that needs
        none can run in a measuring process that has not imported model code."""
        return self.WARM

    def close(self) -> None:
        """Drop anything kept between cases (built models), so the next benchmark has the memory."""


class Benchmark(BenchmarkBase[G]):
    """Cases measured on one device at a time, in the agent's own process."""

    @abstractmethod
    def cases(self, target: Target) -> list[Case]:
        """Every case this benchmark's grid asks for on ``target``, in run order."""

    @abstractmethod
    def run(self, case: Case, ctx: Context) -> Outcome:
        """Measure one case; raise ``Unsupported`` where the device cannot run it."""


@dataclass(frozen=True)
class Span:
    """What a group benchmark may use: this machine's devices and, in a multi-node run, the other nodes."""

    kind: DeviceKind
    targets: tuple[Target, ...]
    nodes: Nodes = field(default_factory=Nodes)


class GroupBenchmark(BenchmarkBase[G]):
    """Cases run by a group of worker processes; ``WORKER`` names the family's rank code (``worker_kind``).

    ``plan`` gives each case a ``spec``: the ``Group`` of processes that runs it, or an ``Unsupported`` saying
    why it cannot run here. Consecutive cases on the same group share one launch.
    """

    WORKER: ClassVar[WorkerKind]

    @abstractmethod
    def plan(self, span: Span) -> list[Case]:
        """Every case on ``span``, in run order."""

    @abstractmethod
    def policy(self) -> GroupPolicy:
        """How the workers time each case."""

    def timeout_s(self) -> float:
        """A case making no progress for this long is a hang, and its group is stopped."""
        return 300.0

    def refine(self, cases: list[Case], outcomes: list[Outcome | None]) -> list[Outcome | None]:
        """Figures that need several cases (scaling against one GPU); the outcomes as they came by default."""
        return outcomes


#: A benchmark over any grid, as registries and runners hold them.
AnyBenchmark = BenchmarkBase[Any]

"""NCCL (gloo on the CPU) all-reduce, all-gather and reduce-scatter across every GPU of the machine.

Bus bandwidth (nccl-tests' busbw) is what the links between the GPUs carry; the run's topology (NVLink or
PCIe, from ``nvidia-smi topo -m``) says which links those are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas import CollectiveParams
from schemas.labels import human_bytes

from ..devices import device
from ..distributed.launch import Group, worker_kind
from ..errors import Unsupported
from ..timing import GroupPolicy
from . import collective_rank
from .base import Case, GroupBenchmark, Span

OPS = ("all_reduce", "all_gather", "reduce_scatter")


@dataclass(frozen=True)
class CollectiveGrid:
    sizes: tuple[int, ...]
    ops: tuple[str, ...] = OPS
    dtype: str = "fp32"
    cpu_procs: int = 2  # gloo processes when the run is on the CPU
    policy: GroupPolicy = field(default_factory=GroupPolicy)


def machine_group(span: Span, cpu_procs: int) -> Group:
    """One process per GPU of the run (NCCL), or ``cpu_procs`` CPU processes (gloo), on every node."""
    on = device(span.kind)
    devices = tuple(t.index for t in span.targets) if on.is_gpu else (None,) * cpu_procs
    return Group(on.collective_backend, devices, span.nodes, span.kind)


def too_few(group: Group, what: str) -> Unsupported | None:
    if group.world_size >= 2:
        return None
    return Unsupported(f"{what} needs two or more GPUs; this run has {group.world_size} (--gpus chooses them)")


class CollectiveBenchmark(GroupBenchmark[CollectiveGrid]):
    NAME = "collective"
    KIND = "collective"
    WORKER = worker_kind(collective_rank.run_case)
    DESCRIPTION = "all-reduce, all-gather, reduce-scatter across the machine's GPUs: algbw and busbw (nccl-tests)"
    Grid = CollectiveGrid

    def plan(self, span: Span) -> list[Case]:
        group = machine_group(span, self.grid.cpu_procs)
        unsupported = too_few(group, "a collective")
        if unsupported is not None:  # one result says why, not one per size and op
            return [self._case(self.grid.ops[0], self.grid.sizes[-1], group, span, unsupported)]
        return [self._case(op, size, group, span, group) for op in self.grid.ops for size in self.grid.sizes]

    def _case(self, op: str, size: int, group: Group, span: Span, spec: Group | Unsupported) -> Case:
        return Case(
            label=f"{op} {human_bytes(size)} x{group.world_size}",
            params=CollectiveParams(
                op=op,  # type: ignore[arg-type]
                backend=group.backend,
                dtype=self.grid.dtype,  # type: ignore[arg-type]
                bytes=size,
                world_size=max(group.world_size, 1),
                nodes=span.nodes.count,
            ),
            spec=spec,
        )

    def policy(self) -> GroupPolicy:
        return self.grid.policy

"""What a worker knows about itself inside its group, and the two small collectives the timing needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from ..devices.target import Target


@dataclass(frozen=True)
class Rank:
    """``target`` is this rank's device, rebuilt from its (kind, index); ``device`` its torch device."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    nodes: int
    backend: str
    target: Target
    device: torch.device

    def align(self) -> None:
        """A one-element all-reduce: enqueued before a timed repeat, it starts every rank's repeat together."""
        import torch
        import torch.distributed as dist

        dist.all_reduce(torch.zeros(1, device=self.device))

    def slowest(self, values: list[float]) -> list[float]:
        """Element-wise maximum over the ranks."""
        import torch
        import torch.distributed as dist

        tensor = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return [float(v) for v in tensor.tolist()]

    def close(self) -> None:
        """Wait until every rank is done. The group is not torn down: the worker exits without the interpreter's
        teardown (``worker.main``), since torch 2.2's gloo ``destroy_process_group`` hung for minutes in one rank
        whose peers had already left (seen once in a full test run of the two-node test)."""
        import torch.distributed as dist

        dist.barrier()

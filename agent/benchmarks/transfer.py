"""Host<->device copies over PCIe (or NVLink-C2C), from pinned and from pageable host memory (flagged
``host_bound``: a figure about the host as much as the GPU)."""

from __future__ import annotations

from dataclasses import dataclass

from schemas import Flag, TransferMetrics, TransferParams
from schemas.labels import human_bytes

from ..devices.target import Target
from ..errors import Unsupported
from .base import Benchmark, Case, Context, Outcome


@dataclass(frozen=True)
class TransferGrid:
    sizes: tuple[int, ...]  # bytes
    directions: tuple[str, ...] = ("h2d", "d2h")
    pinned: tuple[bool, ...] = (True, False)


class TransferBenchmark(Benchmark[TransferGrid]):
    NAME = "transfer"
    KIND = "transfer"
    DESCRIPTION = "host->device and device->host GB/s, pinned and pageable"
    Grid = TransferGrid

    def cases(self, target: Target) -> list[Case]:
        return [
            Case(
                label=f"{direction} {'pinned' if pinned else 'pageable'} {human_bytes(size)}",
                params=TransferParams(direction=direction, pinned=pinned, bytes=size),  # type: ignore[arg-type]
            )
            for direction in self.grid.directions
            for pinned in self.grid.pinned
            for size in self.grid.sizes
        ]

    def run(self, case: Case, ctx: Context) -> Outcome:
        import torch

        params = case.params
        assert isinstance(params, TransferParams)
        if not ctx.target.is_gpu:
            raise Unsupported("host<->device transfers need a GPU; this run is on the CPU")
        device = ctx.target.torch_device()
        # Filled (so pageable pages are faulted in) but not random: links do not compress, and randint on
        # hundreds of MiB would cost the suite seconds.
        host = torch.full((params.bytes,), 7, dtype=torch.uint8, pin_memory=params.pinned)
        dev = torch.empty(params.bytes, dtype=torch.uint8, device=device)
        src, dst = (host, dev) if params.direction == "h2d" else (dev, host)
        # Pageable copies are staged by the driver and cannot be captured in a graph; the cache is irrelevant.
        timed = ctx.measure(lambda: dst.copy_(src, non_blocking=params.pinned), flush=False, graphable=False)
        metrics = TransferMetrics(gbps=params.bytes / timed.stats.median_s / 1e9)
        # A pageable copy goes through the driver's pinned staging buffers: the host's memory copies and its
        # scheduler set the pace (11-30 % between two runs on the H200, against 2 % pinned), not the link or GPU.
        flags: tuple[Flag, ...] = () if params.pinned else ("host_bound",)
        return Outcome(metrics=metrics, timing=timed.stats, flags=flags)

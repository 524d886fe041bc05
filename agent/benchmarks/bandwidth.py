"""Device-memory bandwidth: the notebook's a*1.2, a device-to-device copy and a BabelStream triad.

Bytes are counted as BabelStream counts them, reads plus writes: scale and copy move 2 arrays, triad 3.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from schemas import BandwidthMetrics, BandwidthParams
from schemas.labels import human_bytes

from ..devices.target import Target
from .base import Benchmark, Case, Context, Outcome

#: Per element: (arrays read + written, floating-point operations).
OPS: dict[str, tuple[int, int]] = {"scale": (2, 1), "copy": (2, 0), "triad": (3, 2)}
TRIAD_SCALAR = 0.4
MAX_SETS = 256


@dataclass(frozen=True)
class BandwidthGrid:
    """fp32 element counts per op; an empty tuple leaves the op out."""

    scale: tuple[int, ...] = ()
    copy: tuple[int, ...] = ()
    triad: tuple[int, ...] = ()


class BandwidthBenchmark(Benchmark[BandwidthGrid]):
    NAME = "bandwidth"
    KIND = "bandwidth"
    DESCRIPTION = "device memory GB/s: a*1.2 (1 FLOP, 8 bytes per fp32 element), copy, triad"
    Grid = BandwidthGrid

    def cases(self, target: Target) -> list[Case]:
        cases = []
        for op, (arrays, flops) in OPS.items():
            for n in getattr(self.grid, op):
                params = BandwidthParams(
                    op=op,  # type: ignore[arg-type]
                    dtype="fp32",
                    elements=n,
                    bytes_per_call=arrays * 4 * n,
                    flops_per_call=flops * n,
                )
                cases.append(Case(label=f"{op} {human_bytes(4 * n)}", params=params))
        return cases

    def run(self, case: Case, ctx: Context) -> Outcome:
        import torch

        params = case.params
        assert isinstance(params, BandwidthParams)
        device = ctx.target.torch_device()
        arrays = OPS[params.op][0]
        # Calls replayed back to back in a CUDA graph would find a small working set in L2; rotating over
        # enough buffer sets to overflow it keeps every call reading device memory.
        sets = max(1, min(MAX_SETS, math.ceil(2 * ctx.target.l2_bytes / params.bytes_per_call)))
        buffers = [[torch.randn(params.elements, device=device) for _ in range(arrays)] for _ in range(sets)]
        turn = itertools.cycle(buffers)

        def call() -> object:
            bufs = next(turn)
            if params.op == "scale":
                return torch.mul(bufs[0], 1.2, out=bufs[1])
            if params.op == "copy":
                return bufs[1].copy_(bufs[0])
            return torch.add(bufs[1], bufs[2], alpha=TRIAD_SCALAR, out=bufs[0])

        timed = ctx.measure(call)
        seconds = timed.stats.median_s
        metrics = BandwidthMetrics(
            gbps=params.bytes_per_call / seconds / 1e9, tflops=params.flops_per_call / seconds / 1e12
        )
        return Outcome(metrics=metrics, timing=timed.stats)

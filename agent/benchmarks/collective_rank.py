"""One rank of a ``collective`` case: all-reduce, all-gather or reduce-scatter timed, with nccl-tests' formulas.

algbw = bytes / time, where ``bytes`` is nccl-tests' size (the whole buffer: all-reduce's tensor, all-gather's
gathered output, reduce-scatter's input). busbw rescales algbw to what each link carries, so that it can be
compared with the hardware's link bandwidth whatever the rank count n:
all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from schemas import CollectiveMetrics, CollectiveParams

from ..distributed.launch import Task
from ..distributed.rank import Rank
from ..errors import Unsupported
from ..timing import measure_group

BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
}
#: Largest relative error accepted: the sums are small integers, exact in fp32; half types round large ones.
TOLERANCE = {"fp32": 1e-6, "fp16": 1e-3, "bf16": 8e-3}
_CHECK_CHUNK = 1 << 24  # elements compared at a time, so checking an 8 GiB buffer needs no second 8 GiB
_ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2}


def bandwidths(op: str, nbytes: int, seconds: float, world_size: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for one collective moving ``nbytes`` (nccl-tests' size) in ``seconds``."""
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * BUS_FACTOR[op](world_size)


def elements(nbytes: int, dtype: str, world_size: int) -> int:
    """Elements of the whole buffer: ``nbytes`` rounded down to whole elements that split evenly over the ranks."""
    count = nbytes // _ITEMSIZE[dtype]
    return count - count % world_size


def run_case(case: dict[str, Any], task: Task, rank: Rank) -> dict[str, Any]:
    import torch

    params = CollectiveParams.model_validate(case)
    n = rank.world_size
    if n < 2:
        raise Unsupported("a collective needs at least two ranks")
    if params.dtype not in _ITEMSIZE:
        raise Unsupported(f"collectives run in {', '.join(_ITEMSIZE)}, not {params.dtype}")
    count = elements(params.bytes, params.dtype, n)
    if count < n:
        raise Unsupported(f"{params.bytes} bytes is less than one {params.dtype} element per rank")
    dtype = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[params.dtype]
    buffers = _Buffers(params.op, count, dtype, rank)
    # Zeros while timing: repeated in-place sums of zeros stay zeros, so no value overflows to inf or NaN.
    buffers.zero()
    stats = measure_group(buffers.call, task.policy, clock=rank.target.clock(), align=rank.align, slowest=rank.slowest)
    rel_error = rank.slowest([buffers.check()])[0]
    nbytes = count * _ITEMSIZE[params.dtype]
    algbw, busbw = bandwidths(params.op, nbytes, stats.median_s, n)
    metrics = CollectiveMetrics(algbw_gbps=algbw, busbw_gbps=busbw, rel_error=rel_error)
    refined = params.model_copy(update={"bytes": nbytes, "world_size": n, "nodes": rank.nodes, "backend": rank.backend})
    return {
        "params": refined.model_dump(mode="json"),
        "metrics": metrics.model_dump(mode="json"),
        "timing": stats.model_dump(mode="json"),
        "flags": ["wrong_result"] if rel_error > TOLERANCE[params.dtype] else [],
    }


class _Buffers:
    """The tensors of one collective and the call that runs it out of place (in place for all-reduce)."""

    def __init__(self, op: str, count: int, dtype: Any, rank: Rank) -> None:
        import torch
        import torch.distributed as dist

        self.op, self.rank, self.count = op, rank, count
        shard = count // rank.world_size
        device = rank.device
        if op == "all_reduce":
            self.inp = torch.empty(count, dtype=dtype, device=device)
            self.out = self.inp
            self.call: Callable[[], object] = lambda: dist.all_reduce(self.inp)
        elif op == "all_gather":
            self.inp = torch.empty(shard, dtype=dtype, device=device)
            self.out = torch.empty(count, dtype=dtype, device=device)
            gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
            self.call = lambda: gather(self.out, self.inp)
        else:
            self.inp = torch.empty(count, dtype=dtype, device=device)
            self.out = torch.empty(shard, dtype=dtype, device=device)
            scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
            self.call = lambda: scatter(self.out, self.inp)

    def zero(self) -> None:
        self.inp.zero_()
        self.out.zero_()

    def check(self) -> float:
        """Run once on known values and return the largest relative error against the exact answer.

        Rank r holds (r + 1) * p(i) with p(i) = i mod 3 + 1: sums are small integers, exact in every dtype.
        """
        n, r = self.rank.world_size, self.rank.rank
        shard = self.count // n
        offset = r * shard if self.op == "all_gather" else 0
        self._fill(self.inp, offset, r + 1)
        self.call()
        self.rank.target.synchronize()
        total = n * (n + 1) // 2
        if self.op == "all_reduce":
            return self._error(self.out, 0, lambda pattern, start: pattern * total)
        if self.op == "reduce_scatter":
            return self._error(self.out, r * shard, lambda pattern, start: pattern * total)
        # all-gather: chunk k of the output is rank k's input, (k + 1) * p(i).
        return self._error(self.out, 0, lambda pattern, start: pattern * (start // shard + 1))

    @staticmethod
    def _pattern(start: int, length: int, device: Any) -> Any:
        import torch

        return (torch.arange(start, start + length, device=device, dtype=torch.int64) % 3 + 1).double()

    def _fill(self, tensor: Any, offset: int, scale: int) -> None:
        for start in range(0, tensor.numel(), _CHECK_CHUNK):
            length = min(_CHECK_CHUNK, tensor.numel() - start)
            values = self._pattern(offset + start, length, tensor.device) * scale
            tensor[start : start + length].copy_(values)

    def _error(self, tensor: Any, offset: int, expect: Callable[[Any, int], Any]) -> float:
        """Max relative error; ``expect(pattern, start)`` gives the exact values of a chunk starting at ``start``."""
        shard = self.count // self.rank.world_size
        worst = 0.0
        # Chunks never straddle a rank's shard, so expect() can read the owner of a chunk from its start.
        start = 0
        while start < tensor.numel():
            length = min(_CHECK_CHUNK, tensor.numel() - start, shard - (offset + start) % shard)
            exact = expect(self._pattern(offset + start, length, tensor.device), offset + start)
            got = tensor[start : start + length].double()
            worst = max(worst, float(((got - exact).abs() / exact.abs()).max()))
            start += length
        return worst

"""Matrix multiply TFLOPS (2mnk/t) per dtype, each product checked against a float64 reference (as gpu-burn does)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from schemas import Flag, MatmulMetrics, MatmulParams

from .. import compat
from ..devices.target import Target
from ..errors import Unsupported
from ..timing import TimingPolicy
from .base import Benchmark, Case, Context, Outcome
from .flops import matmul_flops

if TYPE_CHECKING:
    import torch

#: Relative error (Frobenius norm, against float64 on the same rounded inputs) above which a result is wrong.
#: fp32 accumulates in fp32; tf32 rounds inputs to 10 mantissa bits; fp16/bf16/fp8 round the output.
TOLERANCE = {"fp32": 1e-4, "tf32": 5e-3, "fp16": 5e-3, "bf16": 2e-2, "fp8_e4m3": 2e-2, "fp8_e5m2": 2e-2}
CHECK_ROWS = 64


@dataclass(frozen=True)
class MatmulGrid:
    """``each_call``: every call timed after its own L2 flush, as triton's do_bench times it, and replayed as a
    graph only where launching it takes longer than it runs; otherwise (the health profile's way) products under
    2 ms are replayed back to back as a graph, the L2 flushed once per replay. ``also``: products beside the
    grid's, as (dtype, n), where one dtype needs a size the others do not (the health profile's fp32 at 4096)."""

    sizes: tuple[int, ...]
    dtypes: tuple[str, ...]
    each_call: bool = False
    also: tuple[tuple[str, int], ...] = ()

    def products(self) -> list[tuple[str, int]]:
        """The (dtype, n) products it measures, in order: the grid's, then those of ``also`` not in it."""
        grid = [(dtype, n) for dtype in self.dtypes for n in self.sizes]
        return [*grid, *(c for c in self.also if c not in grid)]


@contextmanager
def float32_precision(dtype: str) -> Iterator[None]:
    """TF32 on for 'tf32', off for everything else (so 'fp32' is true IEEE fp32), restored afterwards."""
    import torch

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


@dataclass
class MatmulOp:
    """A ready product: ``call`` runs it, ``error()`` checks its last output against float64."""

    call: Callable[[], torch.Tensor]
    a: torch.Tensor
    b: torch.Tensor

    def error(self) -> float:
        import torch

        out = self.call()
        rows = torch.randperm(self.a.shape[0], device=self.a.device)[:CHECK_ROWS]
        ref = self.a[rows].double() @ self.b.double()
        err = torch.linalg.vector_norm(out[rows].double() - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-300)
        value = float(err)
        return value if value == value else float("inf")  # NaN never passes


#: With ``each_call``, a product is replayed as a graph only where enqueueing a timed repeat (flush, events, the
#: call) takes the host longer than the GPU takes to run it: one kernel per call leaves no gaps inside the call, and
#: with repeats enqueued a batch ahead the host only has to keep up on average (the H200: 512^3 needs a graph,
#: timed call by call it read 14.8 us against a fastest 6.2 us; 2048^3 does not).
EACH_CALL_HOST_SHARE = 1.0


def sustained(policy: TimingPolicy, each_call: bool) -> TimingPolicy:
    """The policy a product is timed under: after the warm-up a sustained rate needs (``sustain_s``, for products
    heavy enough to bring the power limit in), and with ``each_call`` a graph only where the host cannot enqueue
    repeats as fast as the GPU runs them."""
    policy = policy.for_sustained()
    return replace(policy, graph_below_s=0.0, graph_host_share=EACH_CALL_HOST_SHARE) if each_call else policy


def matmul_op(target: Target, dtype: str, m: int, n: int, k: int) -> MatmulOp:
    """Random operands (zeros run measurably faster: less switching power) and the product to time."""
    import torch

    reason = target.unsupported_reason(dtype)
    if reason:
        raise Unsupported(reason)
    device, tdtype = target.torch_device(), target.torch_dtype(dtype)
    a = torch.randn(m, k, device=device).to(tdtype)
    if dtype.startswith("fp8"):
        if n % 16 or k % 16:
            raise Unsupported(f"fp8 matmul needs n and k divisible by 16; got n={n}, k={k}")
        b = torch.randn(n, k, device=device).to(tdtype).t()  # column-major, as cuBLASLt wants it
        one = torch.tensor(1.0, device=device)
        return MatmulOp(
            call=lambda: compat.scaled_mm(a, b, one, torch.bfloat16),
            a=a.float(),
            b=b.float(),
        )
    b = torch.randn(k, n, device=device).to(tdtype)
    out = a.new_empty(m, n)
    return MatmulOp(call=lambda: torch.mm(a, b, out=out), a=a, b=b)


class MatmulBenchmark(Benchmark[MatmulGrid]):
    NAME = "matmul"
    KIND = "matmul"
    DESCRIPTION = "square matmul TFLOPS over sizes in fp32 (TF32 off), tf32, fp16, bf16"
    Grid = MatmulGrid

    def cases(self, target: Target) -> list[Case]:
        return [
            Case(label=f"{dtype} n={n}", params=MatmulParams(m=n, n=n, k=n, dtype=dtype))  # type: ignore[arg-type]
            for dtype, n in self.grid.products()
        ]

    def run(self, case: Case, ctx: Context) -> Outcome:
        p = case.params
        assert isinstance(p, MatmulParams)
        with float32_precision(p.dtype):
            op = matmul_op(ctx.target, p.dtype, p.m, p.n, p.k)
            timed = ctx.measure(op.call, policy=sustained(ctx.policy, self.grid.each_call))
            err = op.error()
        tolerance = TOLERANCE[p.dtype]
        metrics = MatmulMetrics(
            tflops=matmul_flops(p.m, p.n, p.k) / timed.stats.median_s / 1e12, rel_error=err, tolerance=tolerance
        )
        flags: tuple[Flag, ...] = ("wrong_result",) if err > tolerance else ()
        return Outcome(metrics=metrics, timing=timed.stats, flags=flags)


class Fp8MatmulBenchmark(MatmulBenchmark):
    """fp8 (e4m3) operands with per-tensor scales through ``torch._scaled_mm``, bf16 output."""

    NAME = "matmul_fp8"
    DESCRIPTION = "square fp8 (e4m3) matmul TFLOPS via torch._scaled_mm; compute capability >= 8.9"

"""Maximum achievable matmul FLOPS: a search over shapes, as stas00's mamf-finder does.

Every shape is timed briefly; the best few are timed again with the suite's full policy, and the best median
is the result, with its shape. Datasheet peaks are not reachable; this is the ceiling a real workload has.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, replace

from schemas import MamfMetrics, MamfParams

from ..flops import matmul_flops
from ..target import Target
from ..timing import Timed, TimingPolicy
from .base import Benchmark, Case, Context, Outcome
from .matmul import float32_precision, matmul_op

FINALISTS = 3


@dataclass(frozen=True)
class MamfGrid:
    dtypes: tuple[str, ...]
    m_range: tuple[int, int, int]  # start, stop (inclusive), step
    n_range: tuple[int, int, int]
    k_range: tuple[int, int, int]
    budget_s: float = 60.0  # per dtype: stop trying new shapes after this long


def _values(r: tuple[int, int, int]) -> list[int]:
    start, stop, step = r
    return list(range(start, stop + 1, step))


class MamfBenchmark(Benchmark):
    NAME = "mamf"
    KIND = "mamf"
    DESCRIPTION = "maximum achievable matmul TFLOPS: best shape of a search over m, n, k (mamf-finder)"
    Grid = MamfGrid

    def cases(self, target: Target) -> list[Case]:
        shapes = len(_values(self.grid.m_range)) * len(_values(self.grid.n_range)) * len(_values(self.grid.k_range))
        return [
            Case(
                label=f"{dtype} {shapes} shapes",
                params=MamfParams(
                    dtype=dtype,  # type: ignore[arg-type]
                    m_range=self.grid.m_range,
                    n_range=self.grid.n_range,
                    k_range=self.grid.k_range,
                    shapes_tried=shapes,
                ),
            )
            for dtype in self.grid.dtypes
        ]

    def run(self, case: Case, ctx: Context) -> Outcome:
        p = case.params
        assert isinstance(p, MamfParams)
        scout = replace(ctx.policy, min_repeats=3, min_time_s=0.0, max_time_s=0.05, warmup_s=0.005)
        shapes = itertools.product(_values(p.m_range), _values(p.n_range), _values(p.k_range))
        scouted: list[tuple[float, tuple[int, int, int]]] = []
        deadline = time.monotonic() + self.grid.budget_s
        with float32_precision(p.dtype):
            for m, n, k in shapes:
                if scouted and time.monotonic() > deadline:
                    break
                timed = self._time(ctx, p.dtype, m, n, k, scout)
                scouted.append((matmul_flops(m, n, k) / timed.stats.median_s / 1e12, (m, n, k)))
            scouted.sort(reverse=True)
            best: tuple[float, tuple[int, int, int], Timed] | None = None
            for _, (m, n, k) in scouted[:FINALISTS]:
                timed = self._time(ctx, p.dtype, m, n, k, ctx.policy)
                tflops = matmul_flops(m, n, k) / timed.stats.median_s / 1e12
                if best is None or tflops > best[0]:
                    best = (tflops, (m, n, k), timed)
        assert best is not None
        tflops, (m, n, k), timed = best
        ranked = sorted(t for t, _ in scouted)
        metrics = MamfMetrics(tflops=tflops, m=m, n=n, k=k, median_tflops_over_shapes=ranked[len(ranked) // 2])
        return Outcome(metrics=metrics, timing=timed.stats, params=p.model_copy(update={"shapes_tried": len(scouted)}))

    @staticmethod
    def _time(ctx: Context, dtype: str, m: int, n: int, k: int, policy: TimingPolicy) -> Timed:
        op = matmul_op(ctx.target, dtype, m, n, k)
        return ctx.measure(op.call, policy=policy)

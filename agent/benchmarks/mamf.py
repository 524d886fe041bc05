"""Maximum achievable matmul FLOPS: a search over shapes, as stas00's mamf-finder does.

Every shape is timed briefly under continuous load; the fastest few are then timed in short bursts after idle
gaps, and the result is the median of the best shape's five fastest calls, taken at boost clock (mamf-finder's
MAMF), with the same shape's continuous-load figure beside it. Datasheet peaks are not reachable; this is the
ceiling a real workload can approach.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field, replace

from schemas import MamfMetrics, MamfParams

from ..devices.target import Target
from ..timing import BurstPolicy, Timed
from .base import Benchmark, Case, Context, Outcome
from .flops import matmul_flops
from .matmul import float32_precision, matmul_op, sustained

FINALISTS = 3


@dataclass(frozen=True)
class MamfGrid:
    dtypes: tuple[str, ...]
    m_range: tuple[int, int, int]  # start, stop (inclusive), step
    n_range: tuple[int, int, int]
    k_range: tuple[int, int, int]
    budget_s: float = 60.0  # per dtype: stop trying new shapes after this long
    bursts: BurstPolicy = field(default_factory=BurstPolicy)


def _values(r: tuple[int, int, int]) -> list[int]:
    start, stop, step = r
    return list(range(start, stop + 1, step))


class MamfBenchmark(Benchmark[MamfGrid]):
    NAME = "mamf"
    KIND = "mamf"
    DESCRIPTION = "maximum achievable matmul TFLOPS: best shape of a search over m, n, k (mamf-finder)"
    Grid = MamfGrid

    def cases(self, target: Target) -> list[Case]:
        g = self.grid
        shapes = len(_values(g.m_range)) * len(_values(g.n_range)) * len(_values(g.k_range))
        return [
            Case(
                label=f"{dtype} {shapes} shapes",
                params=MamfParams(
                    dtype=dtype,  # type: ignore[arg-type]
                    m_range=g.m_range,
                    n_range=g.n_range,
                    k_range=g.k_range,
                    shapes_tried=shapes,
                ),
            )
            for dtype in g.dtypes
        ]

    def run(self, case: Case, ctx: Context) -> Outcome:
        p = case.params
        assert isinstance(p, MamfParams)
        # Scouting is a quick ranking of hundreds of shapes: no settling, no stop on the median's interval.
        scout = replace(ctx.policy, min_repeats=3, min_time_s=0.0, max_time_s=0.03, warmup_s=0.0, settle_rel=0.0,
                        target_rel_ci=0.0, sustain_s=0.0)  # fmt: skip
        scouted: list[tuple[float, tuple[int, int, int]]] = []
        deadline = time.monotonic() + self.grid.budget_s
        with float32_precision(p.dtype):
            for m, n, k in itertools.product(_values(p.m_range), _values(p.n_range), _values(p.k_range)):
                if scouted and time.monotonic() > deadline:
                    break
                op = matmul_op(ctx.target, p.dtype, m, n, k)
                timed = ctx.measure(op.call, policy=scout)
                scouted.append((_tflops(m, n, k, timed), (m, n, k)))
            scouted.sort(reverse=True)
            best: tuple[float, tuple[int, int, int], Timed] | None = None
            for _, (m, n, k) in scouted[:FINALISTS]:
                op = matmul_op(ctx.target, p.dtype, m, n, k)
                timed = ctx.bursts(op.call, self.grid.bursts)
                if best is None or _tflops(m, n, k, timed) > best[0]:
                    best = (_tflops(m, n, k, timed), (m, n, k), timed)
            assert best is not None
            tflops, (m, n, k), timed = best
            held = ctx.measure(matmul_op(ctx.target, p.dtype, m, n, k).call, policy=sustained(ctx.policy, True))
        ranked = sorted(t for t, _ in scouted)
        metrics = MamfMetrics(
            tflops=tflops,
            sustained_tflops=_tflops(m, n, k, held),
            m=m,
            n=n,
            k=k,
            median_tflops_over_shapes=ranked[len(ranked) // 2],
        )
        return Outcome(metrics=metrics, timing=timed.stats, params=p.model_copy(update={"shapes_tried": len(scouted)}))


def _tflops(m: int, n: int, k: int, timed: Timed) -> float:
    return matmul_flops(m, n, k) / timed.stats.median_s / 1e12

"""Runs benchmark cases on each target: timing, failure isolation, time budget, physics check and progress.

A failing case never stops the suite: out-of-memory becomes status 'oom', a device that cannot run a dtype or op
'unsupported', any other exception 'error' (with its traceback logged), and cases past the time budget 'skipped'.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from schemas import (
    BandwidthResult,
    CollectiveResult,
    Flag,
    Gpu,
    LayerResult,
    MamfResult,
    MatmulResult,
    Result,
    Status,
    TrainingResult,
    TransferResult,
)
from schemas.base import WireModel

from .benchmarks import AnyBenchmark, Case
from .errors import Unsupported, is_oom
from .monitor import Monitor
from .nvml import slowed_down
from .physics import ABOVE_PEAK, peak_fraction
from .target import Target
from .timing import BurstPolicy, CudaTimer, Timed, TimingPolicy, bursts_cpu, measure_cpu

log = logging.getLogger(__name__)

RESULT_MODELS: dict[str, type[Any]] = {
    "matmul": MatmulResult,
    "mamf": MamfResult,
    "bandwidth": BandwidthResult,
    "transfer": TransferResult,
    "layer": LayerResult,
    "training": TrainingResult,
    "collective": CollectiveResult,
}
HIGH_CV = 0.10
MAX_REASON = 1000


@dataclass(frozen=True)
class CaseEvent:
    """Progress: ``result`` is None when the case starts, set when it ends."""

    done: int
    total: int
    benchmark: str
    label: str
    target: str
    result: Result | None = None


ProgressFn = Callable[[CaseEvent], None]


class CaseContext:
    """The harness handed to a case: it owns timing and memory clean-up on one target."""

    def __init__(self, target: Target, policy: TimingPolicy) -> None:
        self.target = target
        self.policy = policy
        self._timer = CudaTimer(target.torch_device(), target.l2_bytes) if target.kind == "cuda" else None

    def measure(
        self,
        fn: Callable[[], object],
        *,
        flush: bool = True,
        graphable: bool = True,
        policy: TimingPolicy | None = None,
    ) -> Timed:
        chosen = policy or self.policy
        if self._timer is None:
            return measure_cpu(fn, chosen)
        return self._timer.measure(fn, chosen, flush=flush, graphable=graphable)

    def bursts(self, fn: Callable[[], object], policy: BurstPolicy) -> Timed:
        return bursts_cpu(fn, policy) if self._timer is None else self._timer.bursts(fn, policy)

    def free_memory(self) -> None:
        gc.collect()
        if self.target.kind == "cuda":
            import torch

            torch.cuda.empty_cache()


def planned(benchmarks: Sequence[AnyBenchmark], targets: Sequence[Target]) -> list[tuple[Target, AnyBenchmark, Case]]:
    return [(t, b, c) for t in targets for b in benchmarks for c in b.cases(t)]


def run_cases(
    benchmarks: Sequence[AnyBenchmark],
    targets: Sequence[Target],
    gpus: Sequence[Gpu],
    policy: TimingPolicy,
    monitor: Monitor,
    *,
    deadline: float | None = None,
    on_event: ProgressFn | None = None,
) -> list[Result]:
    """Every case of every benchmark on every target, one after another, each isolated from the others."""
    plan = planned(benchmarks, targets)
    by_index = {g.index: g for g in gpus}
    results: list[Result] = []
    contexts: dict[str, CaseContext] = {}
    previous: AnyBenchmark | None = None
    notify = on_event or (lambda _: None)
    for done, (target, bench, case) in enumerate(plan):
        if previous is not None and previous is not bench:
            previous.close()
        previous = bench
        notify(CaseEvent(done, len(plan), bench.NAME, case.label, target.label))
        if deadline is not None and time.monotonic() > deadline:
            result = _failed(bench, case, target, "skipped", "the run's time budget was spent before this case")
        else:
            if target.label not in contexts:
                _select(target)
                contexts[target.label] = CaseContext(target, policy)
            gpu = by_index.get(target.index) if target.index is not None else None
            result = run_case(bench, case, contexts[target.label], monitor, gpu)
        results.append(result)
        notify(CaseEvent(done + 1, len(plan), bench.NAME, case.label, target.label, result))
    if previous is not None:
        previous.close()
    for ctx in contexts.values():
        ctx.free_memory()
    return results


def _select(target: Target) -> None:
    if target.kind == "cuda":
        import torch

        torch.cuda.set_device(target.index)


def run_case(bench: AnyBenchmark, case: Case, ctx: CaseContext, monitor: Monitor, gpu: Gpu | None) -> Result:
    target = ctx.target
    started, t0 = monitor.now(), time.perf_counter()
    status: Status = "ok"
    reason: str | None = None
    outcome = None
    try:
        outcome = bench.run(case, ctx)
        _synchronize(target)
    except Unsupported as exc:
        status, reason = "unsupported", str(exc)
    except Exception as exc:
        if is_oom(exc):
            status, reason = "oom", _first_line(exc)
        else:
            log.exception("benchmark %s case %s failed", bench.NAME, case.label)
            status, reason = "error", f"{type(exc).__name__}: {_first_line(exc)}"
    if outcome is None:
        ctx.free_memory()
        return _failed(bench, case, target, status, reason or "failed", duration=time.perf_counter() - t0)
    state = monitor.window(gpu.index, started, monitor.now()) if gpu is not None else None
    params = outcome.params or case.params
    fraction = peak_fraction(bench.KIND, params, outcome.metrics, target, gpu)
    flags: list[Flag] = list(outcome.flags)
    if outcome.timing.cv > HIGH_CV:
        flags.append("high_cv")
    if fraction is not None and fraction > ABOVE_PEAK:
        flags.append("above_peak")
    if state is not None and slowed_down(state.throttle_reasons, gpu):
        flags.append("throttled")
    return _result(
        bench,
        params,
        target,
        status="ok",
        metrics=outcome.metrics,
        timing=outcome.timing,
        peak_fraction=fraction,
        flags=tuple(dict.fromkeys(flags)),
        state=state,
        duration_s=time.perf_counter() - t0,
    )


def _synchronize(target: Target) -> None:
    """Surface asynchronous CUDA errors inside the case that caused them."""
    if target.kind == "cuda":
        import torch

        torch.cuda.synchronize(target.index)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:MAX_REASON]


def _failed(
    bench: AnyBenchmark, case: Case, target: Target, status: Status, reason: str, duration: float = 0.0
) -> Result:
    return _result(bench, case.params, target, status=status, reason=reason, duration_s=duration)


def _result(bench: AnyBenchmark, params: WireModel, target: Target, **fields: Any) -> Result:
    model = RESULT_MODELS[bench.KIND]
    flags: tuple[Flag, ...] = fields.pop("flags", ())
    result: Result = model(
        benchmark=bench.KIND, name=bench.NAME, gpu_index=target.index, params=params, flags=flags, **fields
    )
    return result

"""One device case from start to result: the harness it runs in, measuring it with its failure caught, and
finishing its result with what only the agent's own process knows (GPU state, physics check, flags).

``measure_case`` runs wherever the case runs (the agent's process, or a child: ``launchers``); ``finish_case``
always runs in the agent's process, which holds the GPU monitor.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from schemas import (
    BandwidthResult,
    CollectiveResult,
    Flag,
    Gpu,
    InferenceResult,
    LayerResult,
    MamfResult,
    MatmulResult,
    Result,
    Status,
    TrainingResult,
    TransferResult,
)
from schemas.base import WireModel

from ..benchmarks import AnyBenchmark, Benchmark, Case, Outcome
from ..devices.physics import ABOVE_PEAK, peak_fraction
from ..devices.target import Target
from ..errors import Unsupported, is_oom
from ..machine.monitor import Monitor
from ..machine.nvml import power_capped, slowed_down
from ..timing import BurstPolicy, Timed, TimingPolicy
from ..timing.starvation import Remeasure, starved

log = logging.getLogger(__name__)

RESULT_MODELS: dict[str, type[Any]] = {
    "matmul": MatmulResult,
    "mamf": MamfResult,
    "bandwidth": BandwidthResult,
    "transfer": TransferResult,
    "layer": LayerResult,
    "training": TrainingResult,
    "inference": InferenceResult,
    "collective": CollectiveResult,
}
HIGH_CV = 0.10
MAX_FRACTION = 1e3  # the wire contract's bound: a figure a thousand times the datasheet is a broken timer
MAX_REASON = 1000


class CaseContext:
    """The harness handed to a case: it owns timing and memory clean-up on one target."""

    def __init__(self, target: Target, policy: TimingPolicy) -> None:
        self.target = target
        self.policy = policy
        self._timer = target.timer()
        self._remeasure = Remeasure()

    def measure(
        self,
        fn: Callable[[], object],
        *,
        flush: bool = True,
        graphable: bool = True,
        policy: TimingPolicy | None = None,
    ) -> Timed:
        """``fn`` timed; a window that did not get the host it needed (``starvation.starved``) measured again, the
        least starved kept: flagged ``starved`` by ``finish_case`` if even that one was."""
        timed = self._timer.measure(fn, policy or self.policy, flush=flush, graphable=graphable)
        for _ in range(self._remeasure.tries() if starved(timed.stats) else 0):
            again = self._timer.measure(fn, policy or self.policy, flush=flush, graphable=graphable)
            timed = min(timed, again, key=lambda t: (starved(t.stats), t.stats.host_wait or 0.0))
            if not starved(timed.stats):
                break
        self._remeasure.record(starved(timed.stats))
        return timed

    def bursts(self, fn: Callable[[], object], policy: BurstPolicy) -> Timed:
        return self._timer.bursts(fn, policy)

    def rehearse(self, fn: Callable[[], object]) -> bool:
        return self._timer.rehearse(fn)

    def free_memory(self) -> None:
        gc.collect()
        self.target.empty_cache()


def select(target: Target) -> None:
    """Make ``target`` the current device of this process."""
    target.select()


@dataclass(frozen=True)
class Measured:
    """What measuring one case gave, wherever it ran: an outcome, or the status and reason it has none."""

    outcome: Outcome | None
    status: Status
    reason: str | None
    duration_s: float


def measure_case(bench: Benchmark[Any], case: Case, ctx: CaseContext) -> Measured:
    """Run one case, its failure caught as its status: what runs in the measuring process (ours or a child)."""
    t0 = time.perf_counter()
    status: Status = "ok"
    reason: str | None = None
    outcome = None
    try:
        outcome = bench.run(case, ctx)
        _synchronize(ctx.target)
    except Unsupported as exc:
        status, reason = "unsupported", str(exc)
    except Exception as exc:
        if is_oom(exc):
            status, reason = "oom", _first_line(exc)
        else:
            log.exception("benchmark %s case %s failed", bench.NAME, case.label)
            status, reason = "error", f"{type(exc).__name__}: {_first_line(exc)}"
    if outcome is None:
        try:
            ctx.free_memory()
        except Exception:  # a poisoned device context fails here too; the case's own error is what to report
            log.warning("freeing memory after %s case %s failed too", bench.NAME, case.label, exc_info=True)
    return Measured(outcome, status, reason, time.perf_counter() - t0)


def finish_case(
    bench: Benchmark[Any],
    case: Case,
    target: Target,
    measured: Measured,
    monitor: Monitor,
    gpu: Gpu | None,
    started: float,
) -> Result:
    """The case's result from what was measured, with what only the agent's own process knows: the GPU state
    sampled while it ran (since ``started``, on the monitor's clock), the physics check and the flags."""
    outcome = measured.outcome
    state = monitor.window(gpu.index, started, monitor.now()) if gpu is not None else None
    if outcome is None:  # the GPU's state while it failed (clocks, temperature, throttling) is kept with it
        return make_result(bench, case.params, target.index, status=measured.status,
                           reason=measured.reason or "failed", duration_s=measured.duration_s, state=state)  # fmt: skip
    params = outcome.params or case.params
    fraction = peak_fraction(bench.KIND, params, outcome.metrics, target, gpu)
    flags: list[Flag] = list(outcome.flags)
    if outcome.timing.cv > HIGH_CV:
        flags.append("high_cv")
    if outcome.timing.settled is False:
        flags.append("unsettled")
    if starved(outcome.timing):
        flags.append("starved")
    if fraction is not None and fraction > ABOVE_PEAK:
        flags.append("above_peak")
    if state is not None and slowed_down(state.throttle_reasons, gpu):
        flags.append("throttled")
    elif state is not None and power_capped(state, gpu):
        flags.append("power_capped")
    try:
        return make_result(
            bench,
            params,
            target.index,
            status="ok",
            metrics=outcome.metrics,
            timing=outcome.timing,
            peak_fraction=fraction if fraction is None or fraction <= MAX_FRACTION else None,
            flags=tuple(dict.fromkeys(flags)),
            state=state,
            duration_s=measured.duration_s,
        )
    except ValidationError as exc:  # a figure the wire contract refuses is this case's error, not the run's end
        log.error("benchmark %s case %s produced an invalid result: %s", bench.NAME, case.label, exc)
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return failed_result(bench, case, target, "error", f"invalid result: {where}: {first['msg']}")


def run_case(bench: Benchmark[Any], case: Case, ctx: CaseContext, monitor: Monitor, gpu: Gpu | None) -> Result:
    """Measure and finish one case in this process."""
    started = monitor.now()
    return finish_case(bench, case, ctx.target, measure_case(bench, case, ctx), monitor, gpu, started)


def _synchronize(target: Target) -> None:
    """Surface asynchronous device errors inside the case that caused them."""
    target.synchronize()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:MAX_REASON]


def failed_result(
    bench: AnyBenchmark, case: Case, target: Target, status: Status, reason: str, duration: float = 0.0
) -> Result:
    """The result of a case that did not produce figures: its status and why."""
    return make_result(bench, case.params, target.index, status=status, reason=reason, duration_s=duration)


def make_result(bench: AnyBenchmark, params: WireModel, gpu_index: int | None, **fields: Any) -> Result:
    """A result of ``bench``'s kind on the wire."""
    model = RESULT_MODELS[bench.KIND]
    flags: tuple[Flag, ...] = fields.pop("flags", ())
    result: Result = model(
        benchmark=bench.KIND, name=bench.NAME, gpu_index=gpu_index, params=params, flags=flags, **fields
    )
    return result

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
from typing import Any, get_args

from pydantic import ValidationError

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
    TimingStats,
    TrainingResult,
    TransferResult,
)
from schemas.base import WireModel

from .benchmarks import AnyBenchmark, Benchmark, Case, GroupBenchmark, Outcome, Span
from .distributed.launch import Group, Task, launch
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
MAX_FRACTION = 1e3  # the wire contract's bound: a figure a thousand times the datasheet is a broken timer
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


def span_of(targets: Sequence[Target]) -> Span:
    """A single machine's span: the run's targets, no other nodes."""
    return Span(kind=targets[0].kind if targets else "cpu", targets=tuple(targets))


def cases_of(bench: AnyBenchmark, target: Target, span: Span) -> list[Case]:
    """The cases ``bench`` plans: per target for a device benchmark, once for the span for a group benchmark."""
    if isinstance(bench, GroupBenchmark):
        return bench.plan(span)
    assert isinstance(bench, Benchmark)
    return bench.cases(target)


def planned(
    benchmarks: Sequence[AnyBenchmark], targets: Sequence[Target], span: Span | None = None
) -> list[tuple[Target | None, AnyBenchmark, Case]]:
    """Device benchmarks on each target in turn, then the group benchmarks, which use every target at once."""
    span = span or span_of(targets)
    plan: list[tuple[Target | None, AnyBenchmark, Case]] = [
        (t, b, c) for t in targets for b in benchmarks if isinstance(b, Benchmark) for c in b.cases(t)
    ]
    plan += [(None, b, c) for b in benchmarks if isinstance(b, GroupBenchmark) for c in b.plan(span)]
    return plan


def run_cases(
    benchmarks: Sequence[AnyBenchmark],
    targets: Sequence[Target],
    gpus: Sequence[Gpu],
    policy: TimingPolicy,
    monitor: Monitor,
    *,
    span: Span | None = None,
    deadline: float | None = None,
    on_event: ProgressFn | None = None,
) -> list[Result]:
    """Every case of every benchmark on every target, one after another, each isolated from the others."""
    plan = planned(benchmarks, targets, span)
    by_index = {g.index: g for g in gpus}
    results: list[Result] = []
    contexts: dict[str, CaseContext] = {}
    previous: AnyBenchmark | None = None
    notify = on_event or (lambda _: None)
    device_plan = [(t, b, c) for t, b, c in plan if t is not None]
    for done, (target, bench, case) in enumerate(device_plan):
        assert isinstance(bench, Benchmark)
        if previous is not None and previous is not bench:
            previous.close()
        previous = bench
        notify(CaseEvent(done, len(plan), bench.NAME, case.label, target.label))
        if deadline is not None and time.monotonic() > deadline:
            result = failed_result(bench, case, target, "skipped", "the run's time budget was spent before this case")
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
    groups: dict[str, list[tuple[GroupBenchmark[Any], Case]]] = {}
    for where, member, case in plan:
        if where is None:
            assert isinstance(member, GroupBenchmark)
            groups.setdefault(member.NAME, []).append((member, case))
    progress = _Progress(notify, len(device_plan), len(plan))
    for members in groups.values():
        results += run_group(members[0][0], [case for _, case in members], deadline=deadline, progress=progress)
    return results


@dataclass
class _Progress:
    notify: ProgressFn
    done: int
    total: int

    def start(self, bench: AnyBenchmark, case: Case, where: str) -> None:
        self.notify(CaseEvent(self.done, self.total, bench.NAME, case.label, where))

    def end(self, bench: AnyBenchmark, case: Case, where: str, result: Result | None = None) -> None:
        """A case ended; its result comes once the whole benchmark is refined (``result`` then, no count)."""
        if result is None:
            self.done += 1
        self.notify(CaseEvent(self.done, self.total, bench.NAME, case.label, where, result))


def run_group(
    bench: GroupBenchmark[Any], cases: list[Case], *, deadline: float | None, progress: _Progress
) -> list[Result]:
    """A group benchmark's cases: consecutive cases on the same group of processes share one launch."""
    outcomes: list[Outcome | None] = [None] * len(cases)
    failed: dict[int, tuple[Status, str]] = {}
    durations = [0.0] * len(cases)
    index = 0
    while index < len(cases):
        spec = cases[index].spec
        where = _where(spec)
        progress.start(bench, cases[index], where)
        end = index + 1
        while end < len(cases) and cases[end].spec == spec:
            end += 1
        if isinstance(spec, Unsupported):
            failed.update({i: ("unsupported", str(spec)) for i in range(index, end)})
        elif deadline is not None and time.monotonic() > deadline:
            spent = "the run's time budget was spent before this case"
            failed.update({i: ("skipped", spent) for i in range(index, end)})
        if index in failed:
            for i in range(index, end):
                progress.end(bench, cases[i], where)
        else:
            assert isinstance(spec, Group)
            task = Task(
                kind=bench.WORKER,
                cases=tuple(c.params.model_dump(mode="json") for c in cases[index:end]),
                policy=bench.policy(),
                timeout_s=bench.timeout_s(),
            )
            for record in launch(task, spec):
                i = index + record.index
                durations[i] = record.duration_s
                if record.status == "ok":
                    outcomes[i] = _outcome(bench, cases[i], record.params, record.metrics, record.timing, record.flags)
                else:
                    failed[i] = (record.status, record.reason or "failed")
                progress.end(bench, cases[i], where)
                if i + 1 < end:
                    progress.start(bench, cases[i + 1], where)
        index = end
    outcomes = bench.refine(cases, outcomes)
    results: list[Result] = []
    for i, (case, outcome) in enumerate(zip(cases, outcomes, strict=True)):
        where = _where(case.spec)
        if outcome is None:
            status, reason = failed.get(i, ("error", "the worker group returned no record for this case"))
            result = _result(bench, case.params, None, status=status, reason=reason, duration_s=durations[i])
        else:
            flags: list[Flag] = list(outcome.flags)
            if outcome.timing.cv > HIGH_CV:
                flags.append("high_cv")
            result = _result(
                bench,
                outcome.params or case.params,
                None,
                status="ok",
                metrics=outcome.metrics,
                timing=outcome.timing,
                flags=tuple(dict.fromkeys(flags)),
                duration_s=durations[i],
            )
        progress.end(bench, case, where, result)
        results.append(result)
    return results


def _where(spec: object) -> str:
    """What a group case runs on, for progress: its group of processes, or the machine when it cannot run."""
    return spec.label if isinstance(spec, Group) else "machine"


def _outcome(
    bench: AnyBenchmark,
    case: Case,
    params: dict[str, Any] | None,
    metrics: dict[str, Any] | None,
    timing: dict[str, Any] | None,
    flags: tuple[str, ...],
) -> Outcome:
    """A worker's record as typed models: the wire models validate what came through the file."""
    field = RESULT_MODELS[bench.KIND].model_fields["metrics"].annotation
    metrics_model = next(a for a in get_args(field) if a is not type(None))
    return Outcome(
        metrics=metrics_model.model_validate(metrics),
        timing=TimingStats.model_validate(timing),
        params=type(case.params).model_validate(params) if params is not None else None,
        flags=tuple(flags),  # type: ignore[arg-type]
    )


def _select(target: Target) -> None:
    if target.kind == "cuda":
        import torch

        torch.cuda.set_device(target.index)


def run_case(bench: Benchmark[Any], case: Case, ctx: CaseContext, monitor: Monitor, gpu: Gpu | None) -> Result:
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
        return failed_result(bench, case, target, status, reason or "failed", duration=time.perf_counter() - t0)
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
    try:
        return _result(
            bench,
            params,
            target.index,
            status="ok",
            metrics=outcome.metrics,
            timing=outcome.timing,
            peak_fraction=fraction if fraction is None or fraction <= MAX_FRACTION else None,
            flags=tuple(dict.fromkeys(flags)),
            state=state,
            duration_s=time.perf_counter() - t0,
        )
    except ValidationError as exc:  # a figure the wire contract refuses is this case's error, not the run's end
        log.error("benchmark %s case %s produced an invalid result: %s", bench.NAME, case.label, exc)
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return failed_result(bench, case, target, "error", f"invalid result: {where}: {first['msg']}")


def _synchronize(target: Target) -> None:
    """Surface asynchronous CUDA errors inside the case that caused them."""
    if target.kind == "cuda":
        import torch

        torch.cuda.synchronize(target.index)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:MAX_REASON]


def failed_result(
    bench: AnyBenchmark, case: Case, target: Target, status: Status, reason: str, duration: float = 0.0
) -> Result:
    """The result of a case that did not produce figures: its status and why."""
    return _result(bench, case.params, target.index, status=status, reason=reason, duration_s=duration)


def _result(bench: AnyBenchmark, params: WireModel, gpu_index: int | None, **fields: Any) -> Result:
    model = RESULT_MODELS[bench.KIND]
    flags: tuple[Flag, ...] = fields.pop("flags", ())
    result: Result = model(
        benchmark=bench.KIND, name=bench.NAME, gpu_index=gpu_index, params=params, flags=flags, **fields
    )
    return result

"""Runs a suite's cases: the plan (device cases on each target, then group cases), progress, and the group
benchmarks' worker groups; device cases go through a launcher (``launchers``), each case through ``cases``.

A failing case never stops the suite: out-of-memory becomes status 'oom', a device that cannot run a dtype or op
'unsupported', any other exception 'error' (with its traceback logged), a measuring process that dies or hangs
'error' naming how, and cases past the time budget 'skipped'.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, get_args

from schemas import (
    Flag,
    Gpu,
    Result,
    Status,
    TimingStats,
)

from .benchmarks import AnyBenchmark, Benchmark, Case, GroupBenchmark, Outcome, Span
from .cases import HIGH_CV, RESULT_MODELS, make_result
from .distributed.launch import Group, Task, launch
from .errors import Unsupported
from .launchers import Counted, DeviceLauncher, Finisher, Job
from .launchers.base import SPENT
from .launchers.inline import InlineLauncher
from .monitor import Monitor
from .target import Target
from .timing import TimingPolicy

log = logging.getLogger(__name__)


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
    launcher: DeviceLauncher | None = None,
) -> list[Result]:
    """Every case of every benchmark on every target, each isolated from the others: device cases through
    ``launcher`` (in this process unless told otherwise), then the group cases through worker groups."""
    plan = planned(benchmarks, targets, span)
    notify = on_event or (lambda _: None)
    jobs = [Job(t, b, c) for t, b, c in plan if t is not None and isinstance(b, Benchmark)]
    total = len(plan)

    def report(done: int, job: Job, result: Result | None) -> None:
        notify(CaseEvent(done, total, job.bench.NAME, job.case.label, job.target.label, result))

    finish = Finisher(monitor, {g.index: g for g in gpus}, deadline)
    results = (launcher or InlineLauncher(policy)).run(jobs, finish, Counted(report))
    groups: dict[str, list[tuple[GroupBenchmark[Any], Case]]] = {}
    for where, member, case in plan:
        if where is None:
            assert isinstance(member, GroupBenchmark)
            groups.setdefault(member.NAME, []).append((member, case))
    progress = _Progress(notify, len(jobs), total)
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
            failed.update({i: ("skipped", SPENT) for i in range(index, end)})
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
            result = make_result(bench, case.params, None, status=status, reason=reason, duration_s=durations[i])
        else:
            flags: list[Flag] = list(outcome.flags)
            if outcome.timing.cv > HIGH_CV:
                flags.append("high_cv")
            result = make_result(
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

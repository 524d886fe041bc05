"""Runs a suite's cases: the plan (device cases on each target, then group cases) and progress; the cases go
through the launchers (``launchers``: a device launcher, worker groups), each device case through ``cases``.

A failing case never stops the suite: out-of-memory becomes status 'oom', a device that cannot run a dtype or op
'unsupported', any other exception 'error' (with its traceback logged), a measuring process that dies or hangs
'error' naming how, and cases past the time budget 'skipped'.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from schemas import Gpu, Result

from ..benchmarks import AnyBenchmark, Benchmark, Case, GroupBenchmark, Span
from ..devices.target import Target
from ..launchers import Counted, Finisher, Job, Launchers
from ..launchers.inline import InlineLauncher
from ..machine.monitor import Monitor
from ..stop import Stop
from ..timing import TimingPolicy


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
    """Device benchmarks on each target in turn, then the group benchmarks, which use every target at once (none
    where no target is measured: every GPU skipped as busy)."""
    span = span or span_of(targets)
    plan: list[tuple[Target | None, AnyBenchmark, Case]] = [
        (t, b, c) for t in targets for b in benchmarks if isinstance(b, Benchmark) for c in b.cases(t)
    ]
    if span.targets:
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
    launchers: Launchers | None = None,
    origin: float | None = None,
    stop: Stop | None = None,
) -> list[Result]:
    """Every case of every benchmark on every target, each isolated from the others: device cases through the
    device launcher (in this process unless told otherwise), then the group cases through worker groups.
    ``origin`` (the agent's start, on time.monotonic) dates each result's hand-over and return; once ``stop`` is
    requested the case being measured ends and the rest are skipped (``agent.stop``)."""
    plan = planned(benchmarks, targets, span)
    notify = on_event or (lambda _: None)
    total = len(plan)

    def report(done: int, bench: AnyBenchmark, case: Case, where: str, result: Result | None) -> None:
        notify(CaseEvent(done, total, bench.NAME, case.label, where, result))

    chosen = launchers or Launchers(InlineLauncher(policy))
    finish = Finisher(monitor, {g.index: g for g in gpus}, deadline, origin, stop or Stop())
    progress = Counted(report)
    jobs = [Job(t, b, c) for t, b, c in plan if t is not None and isinstance(b, Benchmark)]
    results = chosen.device.run(jobs, finish, progress)
    groups: dict[str, list[tuple[GroupBenchmark[Any], Case]]] = {}
    for where, member, case in plan:
        if where is None:
            assert isinstance(member, GroupBenchmark)
            groups.setdefault(member.NAME, []).append((member, case))
    for members in groups.values():
        results += chosen.group.run(members[0][0], [case for _, case in members], finish, progress)
    return results

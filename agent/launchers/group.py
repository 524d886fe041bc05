"""Group cases (collectives, data-parallel training) on torchrun-style worker groups (``agent.distributed.launch``).

The third launcher beside ``inline`` and ``process``: consecutive cases on the same group of processes share one
launch, a group that dies takes only the case it was on (a fresh group takes the rest), and the whole benchmark's
outcomes are refined together (scaling needs several cases) before they become results.
"""

from __future__ import annotations

from typing import Any, get_args

from schemas import Flag, Result, Status, TimingStats

from ..benchmarks import Case, GroupBenchmark, Outcome
from ..distributed.launch import Group, Task, launch
from ..errors import Unsupported
from ..harness.cases import HIGH_CV, RESULT_MODELS, make_result
from .base import Finisher, Progress


class GroupLauncher:
    """Runs a group benchmark's cases; ``case_timeout_s`` overrides the family's own hang limit (``--case-timeout``)."""

    def __init__(self, case_timeout_s: float | None = None) -> None:
        self.case_timeout_s = case_timeout_s

    def run(self, bench: GroupBenchmark[Any], cases: list[Case], finish: Finisher, progress: Progress) -> list[Result]:
        outcomes: list[Outcome | None] = [None] * len(cases)
        failed: dict[int, tuple[Status, str]] = {}
        durations = [0.0] * len(cases)
        index = 0
        while index < len(cases):
            spec = cases[index].spec
            where = where_of(spec)
            progress.start(bench, cases[index], where)
            end = index + 1
            while end < len(cases) and cases[end].spec == spec:
                end += 1
            if isinstance(spec, Unsupported):
                failed.update({i: ("unsupported", str(spec)) for i in range(index, end)})
            elif finish.spent():
                failed.update({i: ("skipped", finish.spent_reason) for i in range(index, end)})
            if index in failed:
                for i in range(index, end):
                    progress.end(bench, cases[i], where)
            else:
                assert isinstance(spec, Group)
                task = Task(
                    kind=bench.WORKER,
                    cases=tuple(c.params.model_dump(mode="json") for c in cases[index:end]),
                    policy=bench.policy(),
                    timeout_s=self.case_timeout_s or bench.timeout_s(),
                )
                for record in launch(task, spec, stopped=lambda: finish.stop.requested):
                    i = index + record.index
                    durations[i] = record.duration_s
                    if record.status == "ok":
                        outcomes[i] = _outcome(bench, cases[i], record.params, record.metrics, record.timing,
                                               record.flags)  # fmt: skip
                    else:
                        failed[i] = (record.status, record.reason or "failed")
                    progress.end(bench, cases[i], where)
                    if i + 1 < end:
                        progress.start(bench, cases[i + 1], where)
                if finish.stop.requested:  # the group was stopped: the cases it did not report are skipped
                    for i in range(index, end):
                        if outcomes[i] is None and i not in failed:
                            failed[i] = ("skipped", finish.spent_reason)
                            progress.end(bench, cases[i], where)
            index = end
        outcomes = bench.refine(cases, outcomes)
        results = [
            _result(bench, case, outcome, failed.get(i), durations[i])
            for i, (case, outcome) in enumerate(zip(cases, outcomes, strict=True))
        ]
        for case, result in zip(cases, results, strict=True):
            progress.settled(bench, case, where_of(case.spec), result)
        return results


def where_of(spec: object) -> str:
    """What a group case runs on, for progress: its group of processes, or the machine when it cannot run."""
    return spec.label if isinstance(spec, Group) else "machine"


def _result(
    bench: GroupBenchmark[Any], case: Case, outcome: Outcome | None, failure: tuple[Status, str] | None, took: float
) -> Result:
    if outcome is None:
        status, reason = failure or ("error", "the worker group returned no record for this case")
        return make_result(bench, case.params, None, status=status, reason=reason, duration_s=took)
    flags: list[Flag] = list(outcome.flags)
    if outcome.timing.cv > HIGH_CV:
        flags.append("high_cv")
    return make_result(
        bench,
        outcome.params or case.params,
        None,
        status="ok",
        metrics=outcome.metrics,
        timing=outcome.timing,
        flags=tuple(dict.fromkeys(flags)),
        duration_s=took,
    )


def _outcome(
    bench: GroupBenchmark[Any],
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

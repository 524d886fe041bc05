"""``flopfleet-agent check``: a preflight whose exit code a job prolog, Slurm's HealthCheckProgram or Kubernetes'
node-problem-detector can act on (0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN; ``schemas.verdicts.EXIT_CODES``).

It measures the ``health`` profile and judges each GPU by the shared judge (``schemas.observations``): with a collector,
the collector judges it (peers of its model across the fleet, its own history, its card's baseline, its floor) once
the run is posted; without one, or when the collector cannot be reached, the agent judges it against this machine's
other GPUs of its model, its card's baseline (bundled, or the file given: ``baselines_for``) and its model's bundled
floor. A figure that fails once is measured again before the verdict is given (``remeasure``): two failing
measurements confirm it (``slow``), a good second one clears it. ``from_collector`` measures nothing and reads this
machine's latest verdicts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
from pydantic import TypeAdapter, ValidationError

from schemas import Gpu, RunSubmission
from schemas.api import VERDICTS_PATH
from schemas.baselines import BaselineError, BaselineIndex, bundled, card_key, gpu_model, parse_bundle
from schemas.contract import request_headers
from schemas.health_figures import HEALTH_FIGURES, figure_values
from schemas.judgement import GpuFacts, Reading
from schemas.observations import Observed, Taken, judge_fleet
from schemas.verdicts import EXIT_CODES, GpuVerdict, Level, worst

from ..devices import device
from ..errors import AgentError, ConfigError
from ..harness.suites import HEALTH
from .config import RunConfig
from .upload import Delivery, deliver

#: Why a machine without a GPU is UNKNOWN without measuring anything (the health profile takes minutes on a CPU).
NO_GPU = "no GPU on this machine: nothing to judge (flopfleet-agent run --device cpu --suite quick measures its CPU)"
#: Why ``check --device cpu`` with the health profile is refused before measuring: the profile is sized for a GPU
#: (on this project's 2-core machine it ran 355 s, hung a case for 300 s and ended UNKNOWN), and nothing judges a CPU.
CPU_PROFILE_REFUSED = (
    "check judges GPUs: its health profile (an 8192^3 bf16 product, 1 GiB arrays, a BERT-large layer at batch 64) is "
    "sized for one and takes minutes on a CPU, with no floor or baseline to judge a CPU by. To measure this CPU: "
    "flopfleet-agent run --device cpu --suite quick (or check --suite NAME with a profile of your own for a CPU)"
)
_VERDICTS = TypeAdapter(list[GpuVerdict])


@dataclass(frozen=True)
class CheckConfig:
    run: RunConfig  # the profile's run: suite (``health``), device, GPUs, collector
    from_collector: bool = False
    remeasure: bool = True
    #: The CPU was asked for (``--device cpu``): without it, a machine with no GPU is UNKNOWN at once, unmeasured.
    measure_cpu: bool = False
    #: Baselines for judging here: the bundled ones, or a bundle given with --baseline (``baselines_for``).
    baselines: BaselineIndex = field(default_factory=BaselineIndex)


def baselines_for(path: Path | None) -> BaselineIndex:
    """The baselines ``check`` judges against when it judges here: the file given, else those bundled."""
    if path is None:
        return BaselineIndex((b, "bundled") for b in bundled())
    try:
        return BaselineIndex([(parse_bundle(path.read_bytes()), "file")])
    except OSError as exc:
        raise ConfigError(f"--baseline {path}: {exc.strerror or exc}") from None
    except BaselineError as exc:
        raise ConfigError(f"--baseline {path}: {exc}") from None


@dataclass(frozen=True)
class CheckOutcome:
    verdicts: tuple[GpuVerdict, ...]
    notes: tuple[str, ...] = ()
    runs: tuple[RunSubmission, ...] = ()  # newest first: a re-measurement, then the profile
    deliveries: tuple[Delivery, ...] = ()
    #: Where the check's time went (measure, deliver, verdicts; summed over a re-measurement), for prolog budgets.
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def level(self) -> Level:
        return worst([v.level for v in self.verdicts])

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.level]


Measure = Callable[[RunConfig], RunSubmission]


@dataclass
class _Progress:
    runs: list[RunSubmission] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] = round(self.seconds.get(phase, 0.0) + time.perf_counter() - start, 3)


def check(
    config: CheckConfig, client: httpx.Client, measure: Measure, gpus: Callable[[], Sequence[Gpu]]
) -> CheckOutcome:
    """The verdict of every GPU of this machine. ``measure``: runs a suite (``session.execute``); ``gpus``: this
    machine's GPUs without measuring (for ``from_collector``)."""
    upload = config.run.upload
    if config.from_collector:
        if not upload.collector_url:
            raise AgentError("check --from-collector needs --collector URL (or FLOPFLEET_COLLECTOR)")
        found = list(gpus())
        verdicts, note = _from_collector(client, config.run, found)
        return CheckOutcome(tuple(verdicts), (note,) if note else ())
    if not device(config.run.device).is_gpu and not config.measure_cpu:
        from .probe import host

        return CheckOutcome((_unknown(None, host().hostname, NO_GPU),))
    if not device(config.run.device).is_gpu and config.run.suite == HEALTH.name:
        raise ConfigError(CPU_PROFILE_REFUSED)
    state = _Progress()
    verdicts = _measure_and_judge(config.run, client, measure, state, config.baselines)
    suspect = [v for v in verdicts if v.level is Level.suspect]
    if config.remeasure and suspect:
        figures = sorted({f.figure for v in suspect for f in v.figures if f.level is Level.suspect})
        benchmarks = tuple(sorted({HEALTH_FIGURES[f].measured_by for f in figures if f in HEALTH_FIGURES}))
        indices = tuple(sorted({v.gpu_index for v in suspect if v.gpu_index is not None}))
        if benchmarks and indices:
            state.notes.append(
                f"measured {', '.join(benchmarks)} again on GPU {', '.join(map(str, indices))}: "
                f"{', '.join(figures)} failed once"
            )
            again = replace(config.run, gpus=indices, only=benchmarks, tags={**config.run.tags, "check": "remeasure"})
            verdicts = _measure_and_judge(again, client, measure, state, config.baselines)
    verdicts = not_measured(verdicts, state.runs[-1])
    return CheckOutcome(tuple(verdicts), tuple(state.notes), tuple(state.runs), tuple(state.deliveries),
                        state.seconds)  # fmt: skip


def not_measured(verdicts: Sequence[GpuVerdict], profile: RunSubmission) -> list[GpuVerdict]:
    """UNKNOWN for a GPU the profile skipped because another process used it (``--when-busy``): the check could
    not tell now, whatever the collector knows from earlier runs (kept in the figures, for reading)."""
    busy = {r.gpu_index: r.reason for r in profile.results
            if r.status == "skipped" and (r.reason or "").startswith("busy:") and r.gpu_index is not None}  # fmt: skip
    out = []
    for v in verdicts:
        if v.gpu_index in busy:
            v = v.model_copy(update={"level": Level.unknown, "reasons": (f"not measured now: {busy[v.gpu_index]}",
                                                                        *v.reasons)})  # fmt: skip
        out.append(v)
    return out


def _measure_and_judge(
    run: RunConfig, client: httpx.Client, measure: Measure, state: _Progress, baselines: BaselineIndex
) -> list[GpuVerdict]:
    with state.timed("measure"):
        submission = measure(run)
    state.runs.insert(0, submission)
    local = judge_locally(state.runs, baselines)
    if not run.upload.collector_url:
        return local
    with state.timed("deliver"):
        delivery = deliver(submission, run.upload, client)
    state.deliveries.append(delivery)
    if delivery.status not in ("sent", "duplicate"):
        state.notes.append(f"the collector did not take the run ({delivery.detail}); judged here instead")
        return local
    profile = state.runs[-1]  # every GPU of the machine; a re-measurement covers only some
    with state.timed("verdicts"):
        remote, note = _from_collector(client, run, profile.gpus, fallback=local)
    if note:
        state.notes.append(note)
    return remote


def _from_collector(
    client: httpx.Client, run: RunConfig, gpus: Sequence[Gpu], fallback: Sequence[GpuVerdict] = ()
) -> tuple[list[GpuVerdict], str | None]:
    """The collector's verdicts of ``gpus`` (by UUID, and this host's by name); a GPU it does not know gets the
    local verdict in ``fallback``, or ``unknown``. Unreachable: the fallback, or every GPU unknown."""
    from .probe import host

    hostname = host().hostname
    params: list[tuple[str, str | int | float | bool | None]] = [("uuid", g.uuid) for g in gpus if g.uuid]
    params.append(("host", hostname))
    upload = run.upload
    assert upload.collector_url is not None
    headers = {"Accept": "application/json", **request_headers(),
               **({"Authorization": f"Bearer {upload.token}"} if upload.token else {})}  # fmt: skip
    local = {v.uuid: v for v in fallback}
    try:
        answer = client.get(upload.collector_url.rstrip("/") + VERDICTS_PATH, params=params, headers=headers,
                            timeout=upload.timeout_s)  # fmt: skip
        if answer.status_code != 200:
            raise AgentError(f"HTTP {answer.status_code}: {answer.text[:300]}")
        remote = _VERDICTS.validate_json(answer.content)
    except (httpx.HTTPError, AgentError, ValidationError) as exc:
        text = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        why = f"the collector's verdicts could not be read ({text})"
        if fallback:
            return list(fallback), why + "; judged here instead"
        return [_unknown(g, hostname, why) for g in gpus] or [_unknown(None, hostname, why)], why
    by_uuid = {v.uuid: v for v in remote}
    out = []
    for g in gpus:
        if g.uuid in by_uuid:
            out.append(by_uuid.pop(g.uuid).model_copy(update={"gpu_index": g.index}))
        elif g.uuid in local:
            out.append(local[g.uuid])
        else:
            out.append(_unknown(g, hostname, "the collector has no run of this GPU yet"))
    out += list(by_uuid.values())  # this host's GPUs the agent does not see now (another device kind, hidden)
    return sorted(out, key=lambda v: (v.gpu_index is None, v.gpu_index or 0)), None


def _unknown(gpu: Gpu | None, hostname: str, why: str) -> GpuVerdict:
    return GpuVerdict(
        uuid=gpu.uuid if gpu else None,
        gpu_index=gpu.index if gpu else None,
        gpu_model=gpu_model(gpu.name, gpu.memory_bytes) if gpu else "no GPU",
        host=hostname,
        level=Level.unknown,
        reasons=(why,),
        judged_by="agent",
    )


def judge_locally(runs: Sequence[RunSubmission], baselines: BaselineIndex | None = None) -> list[GpuVerdict]:
    """Each GPU of this machine's ``runs`` (newest first) judged by the shared judge (``schemas.observations``)
    from what these runs hold: the machine's other GPUs of its model, its own measurements (a re-measurement
    confirms or clears the first), its card's baseline and its model's bundled floor, the counters of every run for
    faults."""
    if not runs:
        return []
    gpus: dict[int, GpuFacts] = {}
    readings: dict[int, list[Reading]] = {}
    taken: dict[int, dict[str, list[Taken]]] = {}  # GPU -> figure -> (value, suite), newest first
    for run in runs:
        for g in run.gpus:
            gpus.setdefault(g.index, _facts(g, run))
            counters = g.counters_after.model_dump() if g.counters_after else None
            link = (g.pcie_gen, g.pcie_gen_max, g.pcie_width, g.pcie_width_max)
            readings.setdefault(g.index, []).append(Reading(counters, tuple(e.xid for e in g.xid_events or ()), link))
        for (index, figure), value in figure_values(run.results).items():
            if index is not None:
                taken.setdefault(index, {}).setdefault(figure, []).append((value, run.suite))
    observed = [
        Observed(replace(gpu, readings=tuple(readings[i])), taken.get(i, {})) for i, gpu in sorted(gpus.items())
    ]
    verdicts = [j.wire("agent") for j in judge_fleet(observed, baselines or BaselineIndex())]
    if not verdicts:
        verdicts.append(_unknown(None, runs[0].host.hostname, f"no GPU on this machine ({runs[0].device} run)"))
    return verdicts


def _facts(g: Gpu, run: RunSubmission) -> GpuFacts:
    """A GPU as its newest run in the check describes it (its readings are added from every run)."""
    software = {"driver": run.software.driver, "cuda": run.software.cuda, "torch": run.software.torch,
                "transformers": run.software.transformers}  # fmt: skip
    return GpuFacts(
        uuid=g.uuid,
        index=g.index,
        name=g.name,
        model=gpu_model(g.name, g.memory_bytes),
        card=card_key(g.name, g.memory_bytes, g.power_limit_w),
        host=run.host.hostname,
        run_id=str(run.run_id),
        suite=run.suite,
        power_limit_default_w=g.power_limit_default_w,
        software=software,
        started_at=run.started_at,
    )

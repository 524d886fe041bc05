"""One run from start to envelope: probe the machine, sample its GPUs, run the suite, assemble the submission."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from schemas import SCHEMA_VERSION, Gpu, Result, RunSubmission
from schemas.contract import RUN_MINOR
from schemas.environment import MAX_SAMPLES
from schemas.timeline import Timeline

from .. import __version__
from ..benchmarks import Benchmark, Span
from ..devices import device
from ..devices.target import Target, find_targets
from ..harness.cases import failed_result
from ..harness.suites import suite
from ..imports import import_frozen
from ..launchers import launchers_for
from ..machine import occupancy
from ..machine.counters import XidWatch
from ..machine.monitor import Monitor, RunState
from ..machine.nvml import Nvml, open_nvml
from ..stop import Stop
from ..timing import process_started
from . import probe
from .config import RunConfig
from .runner import ProgressFn, run_cases


def targets_for(config: RunConfig) -> list[Target]:
    return find_targets(config.device, config.gpus)


def execute(config: RunConfig, on_event: ProgressFn | None = None, stop: Stop | None = None) -> RunSubmission:
    """One run of ``config``'s suite; with ``stop`` requested midway (a signal: ``agent.stop``) it ends at once with
    what it measured, marked ``interrupted``."""
    stop = stop or Stop()
    chosen = suite(config.suite).with_attention(config.attn_implementation)
    benchmarks = chosen.benchmarks(config.only, config.skip)
    launchers = launchers_for(config.isolation, chosen.policy, case_timeout_s=config.case_timeout_s,
                              parallel=config.parallel)  # fmt: skip
    device_benchmarks = [b for b in benchmarks if isinstance(b, Benchmark)]
    if device_benchmarks and not config.parallel:  # started before torch's import here, to overlap with it
        launchers.device.prepare(
            tuple(m for b in device_benchmarks for m in b.WARM), overlap=device(config.device).is_gpu
        )
    import_frozen(["torch"])  # its first import in this process: the collector off meanwhile (agent/imports.py)
    import torch

    targets = targets_for(config)
    if device_benchmarks and config.parallel:
        launchers.device.prepare(tuple(m for b in device_benchmarks for m in b.WARM), count=len(targets))
    torch.manual_seed(0)
    started, started_mono, origin = datetime.now(timezone.utc), time.monotonic(), process_started()
    deadline = time.monotonic() + config.time_budget_s if config.time_budget_s else None
    with open_nvml() as nvml:
        gpus = probe.gpus(targets, nvml)
        handles = {}
        if nvml is not None:
            for gpu in gpus:
                handle = nvml.handle_for_uuid(gpu.uuid) if gpu.uuid else None
                if handle is not None:
                    handles[gpu.index] = handle
        busy = _busy(config, nvml, handles)
        measured = [t for t in targets if t.index not in busy or config.when_busy == "measure"]
        before = {index: nvml.counters(handle) for index, handle in handles.items()} if nvml else {}
        # Read beside the cases, not after them: cuDNN's and NCCL's versions load their libraries into this process,
        # which would otherwise be the run's last wait.
        software_now = ThreadPoolExecutor(max_workers=1, thread_name_prefix="software")
        software_read = software_now.submit(probe.software, nvml)
        software_now.shutdown(wait=False)
        with Monitor(nvml, handles) as monitor, _xids(nvml, handles) as xids:
            span = Span(kind=config.device, targets=tuple(measured), nodes=config.nodes)  # type: ignore[arg-type]
            results = run_cases(benchmarks, measured, gpus, chosen.policy, monitor, span=span, deadline=deadline,
                                on_event=on_event, launchers=launchers, origin=origin, stop=stop)  # fmt: skip
        results = _busy_marked(results, busy) if config.when_busy == "measure" else results
        results += [
            failed_result(b, c, t, "skipped", busy.get(t.index or 0, "busy"))
            for t in targets if t not in measured for b in benchmarks if isinstance(b, Benchmark) for c in b.cases(t)
        ]  # fmt: skip
        after = {index: nvml.counters(handle) for index, handle in handles.items()} if nvml else {}
        gpus = [
            _with_state(gpu, monitor.run_state(gpu.index)).model_copy(update={
                "counters_before": before.get(gpu.index), "counters_after": after.get(gpu.index),
                "xid_events": tuple(xids.events[gpu.index]) if xids and xids.watching.get(gpu.index) else None,
            })
            for gpu in gpus
        ]  # fmt: skip
        samples = monitor.samples(MAX_SAMPLES)
        software = software_read.result()
    finished, finished_mono = datetime.now(timezone.utc), time.monotonic()
    timeline = Timeline(run_started_s=max(started_mono - origin, 0.0), run_finished_s=max(finished_mono - origin, 0.0),
                        processes=tuple(launchers.device.processes(origin)))  # fmt: skip
    return RunSubmission(
        schema_version=SCHEMA_VERSION,
        schema_minor=RUN_MINOR,
        run_id=uuid.uuid4(),
        agent_version=__version__,
        suite=chosen.name,
        device=config.device,  # type: ignore[arg-type]
        started_at=started,
        finished_at=finished,
        host=probe.host(),
        software=software,
        gpus=tuple(gpus),
        results=tuple(results),
        gpu_samples=samples,
        topology=probe.topology(config.device),
        tags=dict(config.tags),
        timeline=timeline,
        interrupted=f"stopped by {stop.signal.name}" if stop.signal is not None else None,
    )


def _busy(config: RunConfig, nvml: Nvml | None, handles: dict[int, Any]) -> dict[int, str]:
    """The GPUs another process uses, each with why; for ``skip`` and ``wait`` the ones not to measure (NVML
    missing: none is known to be busy)."""
    if nvml is None or not handles:
        return {}

    def look() -> dict[int, occupancy.Occupancy]:
        return occupancy.survey(nvml, handles)

    if config.when_busy == "measure":
        return occupancy.busy_now(look)
    return occupancy.decide(look, config.when_busy, config.busy_wait_s)


def _busy_marked(results: list[Result], busy: dict[int, str]) -> list[Result]:
    """Results measured on a busy GPU flagged ``busy``: judged as any other, the GPU's other processes named."""
    return [
        r.model_copy(update={"flags": tuple(dict.fromkeys((*r.flags, "busy")))}) if r.gpu_index in busy else r
        for r in results
    ]


@contextmanager
def _xids(nvml: Nvml | None, handles: dict[int, Any]) -> Iterator[XidWatch | None]:
    """XID events during the run where NVML can watch for them; None where it cannot."""
    if nvml is None or not handles:
        yield None
        return
    with nvml.watch_xids(handles, time.monotonic()) as watch:
        yield watch


def _with_state(gpu: Gpu, state: RunState) -> Gpu:
    """The probe's GPU record completed with what the samples saw: end temperature, throttling, live link."""
    update: dict[str, object] = {
        "temperature_end_c": state.temperature_end_c,
        "throttle_reasons_seen": state.throttle_reasons_seen,
    }
    # An idle link trains down to save power; the fastest link seen under load is the one that matters.
    if state.pcie_gen is not None:
        update["pcie_gen"] = max(state.pcie_gen, gpu.pcie_gen or 0)
    if state.pcie_width is not None:
        update["pcie_width"] = max(state.pcie_width, gpu.pcie_width or 0)
    return Gpu.model_validate({**gpu.model_dump(), **update})

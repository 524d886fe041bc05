"""A validated run, flattened into column lists for a bulk insert (one Arrow table per table)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from schemas import Result, RunSubmission

from .tables import GPU_SAMPLES, GPUS, RESULTS, RUNS, Column

_RESULT_PARAMS = (
    "dtype", "mode", "model", "block", "op", "direction", "pinned", "m", "n", "k", "batch", "seq_len",
    "elements", "bytes", "world_size", "attn_implementation",
)  # fmt: skip
_RESULT_METRICS = (
    "tflops", "gbps", "busbw_gbps", "samples_per_s", "tokens_per_s", "mfu", "peak_memory_bytes", "rel_error",
)  # fmt: skip


def canonical(run: RunSubmission) -> str:
    """The run as JSON in one canonical form: the same run always hashes the same, however it was sent."""
    return run.model_dump_json()


def payload_hash(payload: str) -> str:
    return hashlib.sha256(payload.encode()).hexdigest()


def _columns(columns: tuple[Column, ...], rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {c.name: [row.get(c.name) for row in rows] for c in columns}


def run_row(run: RunSubmission, *, received_at: datetime, source: str, token_name: str | None) -> dict[str, Any]:
    payload = canonical(run)
    host, sw = run.host, run.software
    return {
        "run_id": str(run.run_id),
        "schema_version": run.schema_version,
        "agent_version": run.agent_version,
        "suite": run.suite,
        "device": run.device,
        "source": source,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "received_at": received_at,
        **host.model_dump(),
        **sw.model_dump(exclude={"agent"}),
        "tags": json.dumps(run.tags, sort_keys=True),
        "token_name": token_name,
        "payload_sha256": payload_hash(payload),
        "payload": payload,
    }


def result_row(run_id: str, seq: int, result: Result) -> dict[str, Any]:
    params, metrics, timing, state = result.params, result.metrics, result.timing, result.state
    row: dict[str, Any] = {
        "run_id": run_id,
        "seq": seq,
        "benchmark": result.benchmark,
        "name": result.name,
        "status": result.status,
        "reason": result.reason,
        "gpu_index": result.gpu_index,
        "peak_fraction": result.peak_fraction,
        "flags": list(result.flags),
        "params": params.model_dump_json(),
        "metrics": metrics.model_dump_json() if metrics is not None else None,
    }
    for key in _RESULT_PARAMS:
        row[key] = getattr(params, key, None)
    for key in _RESULT_METRICS:
        row[key] = getattr(metrics, key, None) if metrics is not None else None
    if timing is not None:
        row.update(
            median_s=timing.median_s,
            mean_s=timing.mean_s,
            min_s=timing.min_s,
            max_s=timing.max_s,
            iqr_s=timing.iqr_s,
            cv=timing.cv,
            repeats=timing.repeats,
            calls_per_repeat=timing.calls_per_repeat,
            timing_method=timing.method,
        )
    if state is not None:
        row.update(
            sm_clock_mhz_median=state.sm_clock_mhz_median,
            power_w_max=state.power_w_max,
            temperature_c_max=state.temperature_c_max,
            throttle_reasons=list(state.throttle_reasons),
        )
    return row


def flatten(
    run: RunSubmission, *, received_at: datetime, source: str = "agent", token_name: str | None = None
) -> dict[str, dict[str, list[Any]]]:
    """Column lists per table, ready to become Arrow tables."""
    run_id = str(run.run_id)
    gpus = [
        {
            "run_id": run_id,
            "gpu_index": g.index,
            **g.model_dump(exclude={"index", "throttle_reasons_seen"}),
            "throttle_reasons_seen": list(g.throttle_reasons_seen),
        }
        for g in run.gpus
    ]
    samples = [
        {"run_id": run_id, **s.model_dump(exclude={"throttle_reasons"}), "throttle_reasons": list(s.throttle_reasons)}
        for s in run.gpu_samples
    ]
    return {
        "runs": _columns(RUNS, [run_row(run, received_at=received_at, source=source, token_name=token_name)]),
        "gpus": _columns(GPUS, gpus),
        "results": _columns(RESULTS, [result_row(run_id, i, r) for i, r in enumerate(run.results)]),
        "gpu_samples": _columns(GPU_SAMPLES, samples),
    }

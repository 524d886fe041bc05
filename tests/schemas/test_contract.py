"""The wire contract: valid runs round-trip; every kind of bad payload is refused with the field's path."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

import schemas
from schemas import RunSubmission
from schemas.jsonschema import SCHEMA_FILE, render_json_schema
from tests.factories import bandwidth, inference, layer, matmul, run_dict


def _validate(data: dict[str, Any]) -> RunSubmission:
    return RunSubmission.model_validate_json(json.dumps(data))


def _errors(data: dict[str, Any] | str) -> list[tuple[str, str]]:
    text = data if isinstance(data, str) else json.dumps(data)
    with pytest.raises(ValidationError) as info:
        RunSubmission.model_validate_json(text)
    return [(".".join(str(p) for p in e["loc"]), e["type"]) for e in info.value.errors()]


GOOD = run_dict([matmul(8192, "bf16", 700.0), layer("bert_layer", "fwd", 64, 128, 300.0), bandwidth(1 << 26, 4000.0)])


def test_a_valid_run_round_trips_unchanged() -> None:
    run = _validate(GOOD)
    again = RunSubmission.model_validate_json(run.model_dump_json())
    assert again == run
    assert [r.benchmark for r in run.results] == ["matmul", "layer", "bandwidth"]
    assert run.results[0].params.dtype == "bf16"  # type: ignore[union-attr]


def test_inference_results_round_trip_and_name_their_phase() -> None:
    run = _validate(run_dict([inference("prefill", 8, 2048, 0.45), inference("decode", 1, 1024, 5.6e-3)]))
    prefill, decode = run.results
    assert (prefill.params.phase, decode.params.phase) == ("prefill", "decode")  # type: ignore[union-attr]
    assert decode.params.bytes_per_call == 15_144_067_072  # type: ignore[union-attr]
    bad = run_dict([inference("decode", 1, 1024, 5.6e-3)])
    bad["results"][0]["params"]["phase"] = "generate"
    assert ("results.0.inference.params.phase", "literal_error") in _errors(bad)


def test_results_are_discriminated_on_benchmark() -> None:
    bad = copy.deepcopy(GOOD)
    bad["results"][0]["benchmark"] = "teleport"
    assert _errors(bad)[0][0] == "results.0"
    bad = copy.deepcopy(GOOD)
    bad["results"][0]["params"]["batch"] = 3  # a layer param on a matmul
    assert ("results.0.matmul.params.batch", "extra_forbidden") in _errors(bad)


@pytest.mark.parametrize(
    ("mutate", "loc", "kind"),
    [
        (lambda d: d.update(surprise=1), "surprise", "extra_forbidden"),
        (lambda d: d["host"].update(cpu_count="16"), "host.cpu_count", "int_type"),
        (lambda d: d["results"][0]["timing"].update(median_s=-1.0), "results.0.matmul.timing.median_s", "greater_than"),
        (lambda d: d["results"][0]["params"].update(dtype="fp64"), "results.0.matmul.params.dtype", "literal_error"),
        (lambda d: d["results"][0]["params"].update(n=0), "results.0.matmul.params.n", "greater_than_equal"),
        (lambda d: d["host"].update(hostname="x" * 300), "host.hostname", "string_too_long"),
        (lambda d: d.update(tags={f"k{i}": "v" for i in range(40)}), "tags", "too_long"),
        (lambda d: d.update(results=[d["results"][0]] * 20_001), "results", "too_long"),
        (lambda d: d.update(run_id="not-a-uuid"), "run_id", "uuid_parsing"),
        (lambda d: d.update(started_at="2026-11-01T12:00:00"), "started_at", "timezone_aware"),
        (lambda d: d["results"][0].update(status="oom"), "results.0.matmul", "value_error"),
        (lambda d: d["results"][0].pop("timing"), "results.0.matmul", "value_error"),
        (lambda d: d["results"][0].update(gpu_index=3), "", "value_error"),
        (lambda d: d.update(schema_version=2), "schema_version", "unsupported_version"),
        (lambda d: d.update(finished_at="2026-10-01T00:00:00Z"), "", "value_error"),
    ],
)
def test_bad_payloads_are_refused_naming_the_field(mutate: Any, loc: str, kind: str) -> None:
    bad = copy.deepcopy(GOOD)
    mutate(bad)
    assert (loc, kind) in _errors(bad)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_are_refused(number: str) -> None:
    text = json.dumps(GOOD).replace('"tflops": 700.0', f'"tflops": {number}')
    assert ("results.0.matmul.metrics.tflops", "finite_number") in _errors(text)


def test_a_newer_schema_version_names_the_accepted_ones() -> None:
    bad = copy.deepcopy(GOOD)
    bad["schema_version"] = 2
    with pytest.raises(ValidationError, match=r"schema_version 2 is newer than the versions accepted here \(1\)"):
        _validate(bad)


def test_failed_results_carry_a_reason_and_no_metrics() -> None:
    ok = copy.deepcopy(GOOD)
    ok["results"][0] = {**ok["results"][0], "status": "oom", "reason": "CUDA out of memory", "metrics": None}
    assert _validate(ok).results[0].status == "oom"


def test_models_are_frozen() -> None:
    run = _validate(GOOD)
    with pytest.raises(ValidationError):
        run.suite = "other"  # type: ignore[misc]


def test_public_names_are_pinned() -> None:
    assert sorted(schemas.__all__) == sorted(
        [
            "ACCEPTED_SCHEMA_VERSIONS", "GPU_SPECS", "RESULT_KINDS", "SCHEMA_VERSION", "BandwidthMetrics",
            "BandwidthParams", "BandwidthResult", "CollectiveMetrics", "CollectiveParams", "CollectiveResult", "Dtype",
            "ErrorBody", "ErrorDetail", "ErrorInfo", "Flag", "Gpu", "GpuCounters", "GpuSamples", "GpuSpec", "Host",
            "InferenceMetrics", "InferenceParams", "InferenceResult", "LayerMetrics",
            "LayerParams", "LayerResult", "Machine", "MamfMetrics", "MamfParams", "MamfResult", "MatmulMetrics",
            "MatmulParams", "MatmulResult", "Result", "RunAccepted", "RunSubmission", "RunSummary", "RunsPage",
            "Software", "StateSummary", "Status", "ThrottleReason", "TimingStats", "TrainingMetrics",
            "TrainingParams", "TrainingResult", "TransferMetrics", "TransferParams", "TransferResult", "XidEvent",
            "match_spec",
            "pcie_peak_gbps", "run_json_schema",
        ]
    )  # fmt: skip
    for name in schemas.__all__:
        assert hasattr(schemas, name), name


def test_the_published_json_schema_is_generated_from_the_models() -> None:
    assert SCHEMA_FILE.read_text(encoding="utf-8") == render_json_schema(), (
        "schemas/run.v1.schema.json is stale: run `make schema`"
    )
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    assert schema["additionalProperties"] is False
    assert "RunSubmission" in schema["title"]

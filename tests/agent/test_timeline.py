"""Where a run's time goes, as the run carries it (schemas/timeline.py), and what the agent does before its first
case: planning a suite must not import transformers (the H200's agent spent 11 s there before any case started)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from typing import Any

import pytest

from agent.benchmarks.training import dense_params
from agent.models import families
from tests.conftest import ROOT


def test_a_run_dates_its_processes_and_each_case_on_one_clock(quick_run: dict[str, Any]) -> None:
    timeline = quick_run["timeline"]
    assert 0 < timeline["run_started_s"] < timeline["run_finished_s"]
    processes = timeline["processes"]
    assert [p["name"] for p in processes] == [f"child-{i + 1}" for i in range(len(processes))]
    for p in processes:
        moments = [p["started_s"], p["imported_s"], p["ready_s"], p["stopped_s"]]
        assert None not in moments and moments == sorted(moments), p
        assert p["started_s"] < timeline["run_started_s"]  # started before the agent had imported torch
    assert any("transformers" in p["modules"] for p in processes)  # the one that imports model code
    device = [
        r for r in quick_run["results"] if r["status"] == "ok" and r["name"] not in ("collective", "training_ddp")
    ]
    assert device
    for r in device:
        assert timeline["run_started_s"] <= r["started_s"] <= r["finished_s"] <= timeline["run_finished_s"]
        assert r["duration_s"] <= r["finished_s"] - r["started_s"] + 0.01  # the case inside its hand-over
        timing = r["timing"]
        assert timing["warmup_s"] is not None and timing["capture_s"] is not None
        assert timing["warmup_s"] + timing["capture_s"] <= timing["total_s"] + 1e-6
    ordered = sorted(device, key=lambda r: r["started_s"])
    assert all(a["finished_s"] <= b["started_s"] + 1e-6 for a, b in itertools.pairwise(ordered))  # one at a time


def test_planning_the_standard_suite_imports_no_transformers() -> None:
    code = (
        "import sys; from agent.harness.suites import suite; from agent.run.runner import planned; "
        "from agent.devices.target import cpu_target; plan = planned(suite('standard').benchmarks(), [cpu_target()]); "
        "print(len(plan), 'transformers' in sys.modules)"
    )
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    cases, imported = printed.stdout.split()
    assert int(cases) > 200 and imported == "False"


@pytest.mark.parametrize("name", ["bert-large", "gpt2-medium", "bert-tiny", "gpt2-tiny"])
def test_a_training_model_s_parameters_are_counted_from_its_shape_as_from_the_model(name: str) -> None:
    import torch

    shape = families.SHAPES[name]
    with torch.device("meta"):
        model = families.language_model(shape, "eager")
    assert dense_params(shape) == families.dense_params(model)

"""Every supported torch and transformers (``make test`` the newest, ``make test-oldest`` the oldest pair): each
benchmark measures or says why it cannot, and results record the attention that ran."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import tomllib

from agent import compat
from agent.benchmarks.layers import LayerGrid, T5EncoderBenchmark
from agent.devices.target import cpu_target
from agent.harness.suites import QUICK
from agent.machine.monitor import Monitor
from agent.run.runner import run_cases
from schemas import RunSubmission
from tests.conftest import ROOT

#: Families whose every case runs on a CPU with every supported torch and transformers.
RUN_EVERYWHERE = ("bandwidth", "layer_bert", "layer_gpt2", "layer_t5_encoder", "layer_t5_decoder",
                  "training_bert", "training_gpt2", "training_ddp")  # fmt: skip
#: The benchmarks that build a transformers model, and its family.
FAMILIES = {"layer_bert": "bert", "layer_gpt2": "gpt2", "layer_t5_encoder": "t5", "layer_t5_decoder": "t5",
            "training_bert": "bert", "training_gpt2": "gpt2", "training_ddp": "gpt2"}  # fmt: skip


def test_the_quick_suite_measures_every_benchmark_or_says_why_not(quick_run: dict[str, object]) -> None:
    run = RunSubmission.model_validate_json(json.dumps(quick_run))
    assert run.software.torch and run.software.transformers
    assert {r.name for r in run.results} == set(QUICK.grids)
    failed = [f"{r.name}: {r.reason}" for r in run.results if r.status not in ("ok", "unsupported")]
    assert failed == []
    assert all(r.reason for r in run.results if r.status == "unsupported")
    assert {r.status for r in run.results if r.name in RUN_EVERYWHERE} == {"ok"}
    fp32 = [r.status for r in run.results if r.name == "matmul" and r.params.dtype == "fp32"]  # type: ignore[union-attr]
    assert fp32 == ["ok", "ok"]


def test_the_quick_suite_records_the_attention_that_ran(quick_run: dict[str, object]) -> None:
    run = RunSubmission.model_validate_json(json.dumps(quick_run))
    recorded = {(r.name, r.params.attn_implementation) for r in run.results if r.name in FAMILIES}  # type: ignore[union-attr]
    # sdpa was asked for (the default): the run's own process counted its calls, eager where it never ran.
    assert recorded == {(name, compat.attention_implementation(family, "sdpa")) for name, family in FAMILIES.items()}


def test_an_attention_the_family_lacks_is_unsupported_by_name() -> None:
    import transformers

    grid = LayerGrid(model="t5-tiny", seq_lens=(8,), batches=(1,), dtypes=("fp32",), modes=("fwd",),
                     attn_implementation="flash_attention_2")  # fmt: skip
    policy = replace(QUICK.policy, max_time_s=0.02, min_time_s=0.0)
    (result,) = run_cases([T5EncoderBenchmark(grid)], [cpu_target()], [], policy, Monitor(None, {}))
    assert result.status == "unsupported"
    assert result.reason == f"transformers {transformers.__version__} has no flash_attention_2 attention for T5"


def test_the_oldest_pair_tested_is_the_minimum_the_agent_extra_allows() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["agent"]
    minima = dict(re.fullmatch(r"(torch|transformers)>=([\d.]+)", dep).groups() for dep in extra  # type: ignore[union-attr]
                  if dep.startswith(("torch>", "transformers>")))  # fmt: skip
    make = (ROOT / "Makefile").read_text()
    pinned = dict(re.findall(r"^OLDEST_(TORCH|TRANSFORMERS) \?= \w+==([\d.]+)$", make, re.MULTILINE))
    assert pinned["TORCH"].startswith(minima["torch"] + ".")
    assert pinned["TRANSFORMERS"].startswith(minima["transformers"] + ".")

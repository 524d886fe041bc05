"""The GPU-only measuring scripts of issues 23 and 24 (benchmarks/gemv_sweep.py, layer_first_calls.py,
rest_before_cell.py): what can be checked without a GPU, that they start and that the sweep times the products a
decode step makes."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent.models import llama
from benchmarks.gemv_sweep import projections
from tests.conftest import ROOT


@pytest.mark.parametrize("script", ["gemv_sweep.py", "layer_first_calls.py", "rest_before_cell.py"])
def test_the_gpu_scripts_start_and_say_what_they_measure(script: str) -> None:
    done = subprocess.run([sys.executable, f"benchmarks/{script}", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--out" in done.stdout


def test_the_sweep_times_every_weight_a_decode_step_reads() -> None:
    shape = llama.SHAPES["llama-3-8b"]
    products = projections(shape)
    layer = sum(n * k for name, n, k, _, _ in products if name != "lm_head")
    head = sum(n * k for name, n, k, _, _ in products if name == "lm_head")
    norms = 2 * shape.layers * shape.hidden + shape.hidden  # read by the fused RMSNorms, not by a product
    assert (shape.layers * layer + head + norms) * 2 == shape.weight_bytes("bf16")

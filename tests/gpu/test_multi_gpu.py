"""Every GPU of the machine: NCCL collectives, DDP, --parallel and the recorded topology (``make test-gpu``).

On a one-GPU machine the machine-wide benchmarks must say why they did not run; on two or more they must run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.benchmarks import Span
from agent.benchmarks.collective import CollectiveBenchmark, CollectiveGrid
from agent.benchmarks.data_parallel import DataParallelGrid, Gpt2DataParallelBenchmark
from agent.devices.target import cuda_targets
from agent.machine.monitor import Monitor
from agent.run.runner import run_cases
from agent.timing import GroupPolicy, TimingPolicy
from tests.conftest import agent_cli

pytestmark = pytest.mark.gpu
MiB = 1 << 20
FAST = GroupPolicy(warmup=2, repeats=5, repeat_s=0.005)


def _run(bench: object) -> list:  # type: ignore[type-arg]
    targets = cuda_targets(None)
    span = Span(kind="cuda", targets=tuple(targets))
    return run_cases([bench], targets, [], TimingPolicy(), Monitor(None, {}), span=span)  # type: ignore[list-item]


def test_nccl_collectives_are_exact_on_every_gpu_or_say_why_not() -> None:
    gpus = len(cuda_targets(None))
    results = _run(CollectiveBenchmark(CollectiveGrid(sizes=(MiB, 256 * MiB), dtype="bf16", policy=FAST)))
    if gpus < 2:
        assert [(r.status, r.reason) for r in results] == [
            ("unsupported", "a collective needs two or more GPUs; this run has 1 (--gpus chooses them)")
        ]
        return
    assert [r.status for r in results] == ["ok"] * 6, [(r.status, r.reason) for r in results]
    for r in results:
        assert r.params.backend == "nccl" and r.params.world_size == gpus
        assert r.metrics.rel_error == 0.0 and "wrong_result" not in r.flags
        assert 0 < r.metrics.busbw_gbps < 2000  # below any NVLink generation's bandwidth per GPU


def test_data_parallel_training_scales_on_every_gpu_or_says_why_not() -> None:
    gpus = len(cuda_targets(None))
    grid = DataParallelGrid(model="gpt2-tiny", seq_len=128, batch=8, policy=FAST)
    results = _run(Gpt2DataParallelBenchmark(grid))
    if gpus < 2:
        assert [r.status for r in results] == ["unsupported"]
        return
    one, many = results
    assert (one.status, many.status) == ("ok", "ok"), (one.reason, many.reason)
    assert many.params.world_size == gpus and many.metrics.scaling_efficiency is not None
    assert many.metrics.peak_memory_bytes > 0


def test_parallel_runs_flag_their_results_and_the_run_records_the_topology(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    done = agent_cli("run", "--suite", "quick", "--device", "cuda", "--only", "matmul", "--parallel", "-q",
                     "--output", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = json.loads(out.read_text())
    gpus = len(cuda_targets(None))
    assert {r["gpu_index"] for r in run["results"]} == set(range(gpus))
    flagged = {("parallel" in r["flags"]) for r in run["results"]}
    assert flagged == ({True} if gpus > 1 else {False})
    assert "GPU0" in run["topology"] and "NCCL settings:" in run["topology"]


def test_every_gpu_is_measured_one_after_another_with_its_own_figures() -> None:
    # Small matmuls are replayed as CUDA graphs: a graph captured on another GPU's stream would replay nothing
    # and report absurd TFLOPS for every GPU after the first (found on a 2×H200 lease).
    from agent.benchmarks.matmul import MatmulBenchmark, MatmulGrid

    targets = cuda_targets(None)
    results = run_cases([MatmulBenchmark(MatmulGrid(sizes=(256, 4096), dtypes=("bf16",)))], targets, [],
                        TimingPolicy(), Monitor(None, {}))  # fmt: skip
    by_gpu: dict[int, list[float]] = {}
    for r in results:
        assert r.status == "ok" and "above_peak" not in r.flags, (r.gpu_index, r.reason, r.flags)
        by_gpu.setdefault(r.gpu_index, []).append(r.metrics.tflops)
    assert set(by_gpu) == {t.index for t in targets}
    for size in range(2):
        values = [figures[size] for figures in by_gpu.values()]
        assert max(values) < 1.5 * min(values), values

"""The standard suite's timing on CUDA: settling warm-up, the stop on the median's interval, each-call matmuls and
graph replays, with their phases recorded. Run on the GPU machine (``-m gpu``)."""

from __future__ import annotations

import pytest

from agent.benchmarks.layers import BertLayerBenchmark, LayerGrid
from agent.benchmarks.matmul import MatmulBenchmark, MatmulGrid, float32_precision, matmul_op, sustained
from agent.monitor import Monitor
from agent.runner import run_cases
from agent.suites import STANDARD_POLICY
from agent.target import cuda_targets
from schemas import LayerParams

pytestmark = pytest.mark.gpu


def _target():  # type: ignore[no-untyped-def]
    return cuda_targets((0,))[0]


def test_a_sustained_matmul_warms_up_past_the_power_transient_and_times_each_call() -> None:
    target = _target()
    with float32_precision("bf16"):
        op = matmul_op(target, "bf16", 4096, 4096, 4096)
        timed = target.timer().measure(op.call, sustained(STANDARD_POLICY, True))
    stats = timed.stats
    assert stats.method == "cuda_event" and stats.calls_per_repeat == 1  # one kernel the host launches fast enough
    assert stats.warmup_s is not None and stats.warmup_s >= STANDARD_POLICY.sustain_s
    assert stats.settled is True and stats.ci_rel is not None
    assert stats.total_s >= stats.warmup_s + (stats.capture_s or 0.0)


def test_standard_cells_are_graph_replays_or_host_free_calls_with_their_phases() -> None:
    target = _target()
    grid = LayerGrid(model="bert-large", seq_lens=(128,), batches=(16,), dtypes=("fp16",))
    results = run_cases([BertLayerBenchmark(grid), MatmulBenchmark(MatmulGrid(sizes=(512,), dtypes=("bf16",),
                                                                             each_call=True))],
                        [target], [], STANDARD_POLICY, Monitor(None, {}))  # fmt: skip
    for result in results:
        assert result.status == "ok", result.reason
        timing = result.timing
        assert timing is not None
        if result.name == "matmul" and timing.method == "cuda_event":
            # Timed call by call only where the host enqueues a repeat (a 256 MiB flush, two events, the product)
            # faster than the GPU runs it: then no call waits for the host, and the median is near the fastest.
            assert timing.median_s <= 1.25 * timing.min_s, timing
        else:
            assert timing.method == "cuda_graph", (result.name, timing)
            assert timing.capture_s is not None and timing.capture_s > 0
        assert timing.settled is not None and timing.repeats >= STANDARD_POLICY.min_repeats
        assert (
            timing.ci_rel is None
            or timing.ci_rel <= STANDARD_POLICY.target_rel_ci
            or timing.total_s >= (STANDARD_POLICY.max_time_s)
        )  # stopped by the median's interval, or by the time limit


def test_a_pageable_copy_is_flagged_as_a_host_figure_and_a_pinned_one_is_not() -> None:
    from agent.benchmarks.transfer import TransferBenchmark, TransferGrid

    grid = TransferGrid(sizes=(64 << 20,), directions=("h2d",))
    pinned, pageable = run_cases([TransferBenchmark(grid)], [_target()], [], STANDARD_POLICY, Monitor(None, {}))
    assert (pinned.status, pageable.status) == ("ok", "ok")
    assert "host_bound" not in pinned.flags and "host_bound" in pageable.flags


def test_a_rehearsed_layer_cell_starts_without_paying_for_its_first_call() -> None:
    """Rehearsing captures a cell's first call and drops it: the host builds what a new shape needs (cuDNN's
    attention graph), the GPU runs nothing; the cell's real first call is then as quick as a later one."""
    import time

    import torch

    from agent.cases import CaseContext

    target = _target()
    ctx = CaseContext(target, STANDARD_POLICY)
    bench = BertLayerBenchmark(LayerGrid(model="bert-large", seq_lens=(384,), batches=(3, 5), dtypes=("bf16",),
                                         modes=("fwd+bwd",)))  # fmt: skip
    fresh, rehearsed = bench.cases(target)
    assert isinstance(rehearsed.params, LayerParams) and isinstance(fresh.params, LayerParams)
    assert ctx.rehearse(bench.call_for(rehearsed.params, ctx))

    def first_call(case) -> float:  # type: ignore[no-untyped-def]
        call = bench.call_for(case.params, ctx)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    unprepared, prepared = first_call(fresh), first_call(rehearsed)
    assert prepared < 0.5 * unprepared, (prepared, unprepared)

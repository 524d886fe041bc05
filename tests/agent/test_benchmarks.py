"""Every benchmark on the CPU with tiny shapes, through the real runner: results, statuses, isolation."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from agent.benchmarks import REGISTRY, benchmark_class
from agent.benchmarks.bandwidth import BandwidthBenchmark, BandwidthGrid
from agent.benchmarks.layers import BertLayerBenchmark, LayerGrid, T5DecoderBenchmark
from agent.benchmarks.mamf import MamfBenchmark, MamfGrid
from agent.benchmarks.matmul import Fp8MatmulBenchmark, MatmulBenchmark, MatmulGrid
from agent.benchmarks.training import Gpt2TrainingBenchmark, TrainingGrid
from agent.benchmarks.transfer import TransferBenchmark, TransferGrid
from agent.errors import ConfigError
from agent.monitor import Monitor
from agent.runner import run_cases
from agent.suites import QUICK, SUITES, suite
from agent.target import cpu_target
from agent.timing import BurstPolicy
from schemas import Result

POLICY = replace(QUICK.policy, max_time_s=0.02, min_time_s=0.0)


def run(*benchmarks: object, deadline: float | None = None) -> list[Result]:
    return run_cases(list(benchmarks), [cpu_target()], [], POLICY, Monitor(None, {}), deadline=deadline)  # type: ignore[arg-type]


def test_matmul_measures_supported_dtypes_and_explains_the_rest() -> None:
    results = run(MatmulBenchmark(MatmulGrid(sizes=(64,), dtypes=("fp32", "tf32", "bf16"))))
    fp32, tf32, bf16 = results
    assert fp32.status == "ok" and fp32.metrics is not None and fp32.metrics.tflops > 0
    assert fp32.metrics.rel_error is not None and fp32.metrics.rel_error < 1e-5
    assert "wrong_result" not in fp32.flags
    assert tf32.status == "unsupported" and "CPU" in (tf32.reason or "")
    assert bf16.status == "ok" and bf16.metrics is not None and bf16.metrics.rel_error < 2e-2  # type: ignore[operator]
    assert fp32.peak_fraction is None  # no datasheet for a CPU


def test_fp8_is_unsupported_without_a_hopper_class_gpu() -> None:
    (result,) = run(Fp8MatmulBenchmark(MatmulGrid(sizes=(64,), dtypes=("fp8_e4m3",))))
    assert result.status == "unsupported"
    assert "fp8" in (result.reason or "")


def test_out_of_memory_becomes_a_status_and_the_suite_goes_on() -> None:
    huge, small = run(MatmulBenchmark(MatmulGrid(sizes=(1 << 23, 32), dtypes=("fp32",))))
    assert huge.status == "oom"
    assert "allocate" in (huge.reason or "")
    assert small.status == "ok"


def test_a_crashing_case_becomes_an_error_and_the_suite_goes_on() -> None:
    broken = BertLayerBenchmark(LayerGrid(model="bert-tiny", seq_lens=(8,), batches=(1,), modes=("fwd",),
                                          dtypes=("fp32",), attn_implementation="flash_attention_2"))  # fmt: skip
    after = MatmulBenchmark(MatmulGrid(sizes=(32,), dtypes=("fp32",)))
    failed, ok = run(broken, after)
    assert failed.status == "error"
    assert failed.reason and failed.reason.startswith("ImportError")
    assert ok.status == "ok"


def test_cases_past_the_time_budget_are_skipped() -> None:
    results = run(MatmulBenchmark(MatmulGrid(sizes=(32, 64), dtypes=("fp32",))), deadline=time.monotonic() - 1)
    assert [r.status for r in results] == ["skipped", "skipped"]
    assert all("time budget" in (r.reason or "") for r in results)


def test_bandwidth_counts_bytes_as_babelstream() -> None:
    results = run(BandwidthBenchmark(BandwidthGrid(scale=(4096,), copy=(4096,), triad=(4096,))))
    by_op = {r.params.op: r for r in results}  # type: ignore[union-attr]
    assert by_op["scale"].params.bytes_per_call == 8 * 4096  # type: ignore[union-attr]
    assert by_op["copy"].params.bytes_per_call == 8 * 4096  # type: ignore[union-attr]
    assert by_op["triad"].params.bytes_per_call == 12 * 4096  # type: ignore[union-attr]
    assert by_op["triad"].params.flops_per_call == 2 * 4096  # type: ignore[union-attr]
    for r in results:
        assert r.status == "ok" and r.metrics is not None and r.metrics.gbps > 0  # type: ignore[union-attr]


def test_transfers_need_a_gpu() -> None:
    results = run(TransferBenchmark(TransferGrid(sizes=(1 << 20,))))
    assert len(results) == 4
    assert {r.status for r in results} == {"unsupported"}


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
def test_layers_record_the_attention_that_ran(attn: str) -> None:
    grid = LayerGrid(model="bert-tiny", seq_lens=(16,), batches=(2,), dtypes=("fp32",), attn_implementation=attn)
    fwd, fwdbwd = run(BertLayerBenchmark(grid))
    assert (fwd.params.mode, fwdbwd.params.mode) == ("fwd", "fwd+bwd")  # type: ignore[union-attr]
    for r in (fwd, fwdbwd):
        assert r.status == "ok", r.reason
        assert r.params.attn_implementation == attn  # type: ignore[union-attr]
    assert fwdbwd.params.flops_per_call == 3 * fwd.params.flops_per_call  # type: ignore[union-attr]


def test_decoder_blocks_count_cross_attention() -> None:
    grid = LayerGrid(model="t5-tiny", seq_lens=(16,), batches=(2,), dtypes=("fp32",), modes=("fwd",))
    (result,) = run(T5DecoderBenchmark(grid))
    assert result.status == "ok", result.reason
    h, b, s = 64, 2, 16
    assert result.params.flops_per_call == 32 * b * s * h * h + 8 * b * s * s * h  # type: ignore[union-attr]


def test_training_step_reports_throughput() -> None:
    (result,) = run(Gpt2TrainingBenchmark(TrainingGrid(model="gpt2-tiny", seq_len=16, batch_cap=2, search=False)))
    assert result.status == "ok", result.reason
    m = result.metrics
    assert m is not None
    assert m.tokens_per_s == pytest.approx(m.samples_per_s * 16)  # type: ignore[union-attr]
    assert m.tflops > 0 and m.mfu is None  # type: ignore[union-attr]
    assert result.params.precision == "fp32" and result.params.batch == 2  # type: ignore[union-attr]


def test_training_past_the_model_positions_is_an_error() -> None:
    (result,) = run(Gpt2TrainingBenchmark(TrainingGrid(model="gpt2-tiny", seq_len=4096, batch_cap=1, search=False)))
    assert result.status == "error"
    assert "4096" in (result.reason or "")


def test_shape_search_reports_the_best_shape() -> None:
    grid = MamfGrid(dtypes=("fp32",), m_range=(32, 64, 32), n_range=(32, 64, 32), k_range=(64, 64, 64),
                    bursts=BurstPolicy(bursts=2, calls=5, idle_s=0.0))  # fmt: skip
    (result,) = run(MamfBenchmark(grid))
    assert result.status == "ok", result.reason
    m = result.metrics
    assert m is not None and m.m in (32, 64) and m.n in (32, 64) and m.k == 64  # type: ignore[union-attr]
    assert result.params.shapes_tried == 4  # type: ignore[union-attr]
    assert m.tflops > 0 and m.sustained_tflops is not None  # type: ignore[union-attr]


def test_the_registry_names_every_family_and_rejects_unknown_names() -> None:
    assert set(REGISTRY) == {
        "matmul", "matmul_fp8", "bandwidth", "transfer", "layer_bert", "layer_gpt2", "layer_t5_encoder",
        "layer_t5_decoder", "training_bert", "training_gpt2", "mamf", "collective", "training_ddp",
    }  # fmt: skip
    with pytest.raises(ConfigError, match="known: matmul, matmul_fp8"):
        benchmark_class("matmull")


def test_suites_cover_the_families() -> None:
    assert set(SUITES["quick"].grids) == set(REGISTRY) - {"mamf"}
    assert set(SUITES["standard"].grids) == set(REGISTRY) - {"mamf"}
    assert set(SUITES["full"].grids) == set(REGISTRY)
    with pytest.raises(ConfigError, match="not in suite 'quick'"):
        suite("quick").benchmarks(only=("mamf",))
    assert [b.NAME for b in suite("quick").benchmarks(only=("matmul", "bandwidth"))] == ["matmul", "bandwidth"]
    assert "matmul" not in [b.NAME for b in suite("quick").benchmarks(skip=("matmul",))]

"""Every benchmark on the CPU with tiny shapes, through the real runner: results, statuses, isolation."""

from __future__ import annotations

import builtins
import time
from dataclasses import replace

import pytest

from agent import compat
from agent.benchmarks import REGISTRY, benchmark_class
from agent.benchmarks.bandwidth import BandwidthBenchmark, BandwidthGrid
from agent.benchmarks.inference import InferenceBenchmark, InferenceGrid
from agent.benchmarks.layers import BertLayerBenchmark, Gpt2BlockBenchmark, LayerGrid, T5DecoderBenchmark
from agent.benchmarks.mamf import MamfBenchmark, MamfGrid
from agent.benchmarks.matmul import Fp8MatmulBenchmark, MatmulBenchmark, MatmulGrid
from agent.benchmarks.training import Gpt2TrainingBenchmark, TrainingGrid
from agent.benchmarks.transfer import TransferBenchmark, TransferGrid
from agent.devices.target import cpu_target
from agent.errors import ConfigError
from agent.harness.suites import QUICK, SUITES, suite
from agent.machine.monitor import Monitor
from agent.run.runner import run_cases
from agent.timing import BurstPolicy
from schemas import Result
from tests.conftest import needs_inference, transformers_at_least

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


def test_a_product_beside_the_grid_is_measured_once_after_it() -> None:
    # the health profile's fp32 at 4096^3 beside its bf16 at 8192^3; one already in the grid is not measured twice
    grid = MatmulGrid(sizes=(32,), dtypes=("bf16",), also=(("fp32", 48), ("bf16", 32)))
    results = run(MatmulBenchmark(grid))
    assert [(r.params.dtype, r.params.n) for r in results] == [("bf16", 32), ("fp32", 48)]  # type: ignore[union-attr]
    assert all(r.status == "ok" for r in results)


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
    # GPT-2 has flash_attention_2 in every supported transformers, and on a CPU it fails inside transformers (4.40:
    # no flash_attn package, ImportError; 5.x: no nn.Linear in GPT-2's attention to take a dtype from, StopIteration).
    broken = Gpt2BlockBenchmark(LayerGrid(model="gpt2-tiny", seq_lens=(8,), batches=(1,), modes=("fwd",),
                                          dtypes=("fp32",), attn_implementation="flash_attention_2"))  # fmt: skip
    after = MatmulBenchmark(MatmulGrid(sizes=(32,), dtypes=("fp32",)))
    failed, ok = run(broken, after)
    assert failed.status == "error"
    raised = (failed.reason or "").partition(":")[0]  # the reason starts with the exception's type
    assert isinstance(getattr(builtins, raised, None), type) and issubclass(getattr(builtins, raised), Exception)
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
    configured = compat.attention_implementation("bert", attn)  # eager where this transformers' BERT has no sdpa
    for r in (fwd, fwdbwd):
        assert r.status == "ok", r.reason
        assert r.params.attn_implementation == configured  # type: ignore[union-attr]
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
        "matmul", "matmul_fp8", "bandwidth", "transfer", "layer_bert", "layer_bert_torch", "layer_gpt2",
        "layer_t5_encoder", "layer_t5_decoder", "training_bert", "training_gpt2", "inference", "mamf", "collective",
        "training_ddp",
    }  # fmt: skip
    with pytest.raises(ConfigError, match="known: matmul, matmul_fp8"):
        benchmark_class("matmull")


def test_suites_cover_the_families() -> None:
    # layer_bert_torch is the health profile's BERT layer (tests/agent/test_bert_torch.py), layer_bert's twin.
    assert set(SUITES["quick"].grids) == set(REGISTRY) - {"mamf", "layer_bert_torch"}
    assert set(SUITES["standard"].grids) == set(REGISTRY) - {"mamf", "layer_bert_torch"}
    assert set(SUITES["full"].grids) == set(REGISTRY) - {"layer_bert_torch"}
    with pytest.raises(ConfigError, match="not in suite 'quick'"):
        suite("quick").benchmarks(only=("mamf",))
    assert [b.NAME for b in suite("quick").benchmarks(only=("matmul", "bandwidth"))] == ["matmul", "bandwidth"]
    assert "matmul" not in [b.NAME for b in suite("quick").benchmarks(skip=("matmul",))]


TINY_LLAMA = InferenceGrid(prefill=((1, 16), (2, 32)), decode_batches=(1, 3), context=48, models=("llama-tiny",))


@needs_inference
def test_inference_measures_prefill_and_decode_with_their_formulas() -> None:
    prefill_1, prefill_2, decode_1, decode_3 = run(InferenceBenchmark(TINY_LLAMA))
    for r in (prefill_1, prefill_2, decode_1, decode_3):
        assert r.status == "ok", r.reason
        assert r.params.model == "llama-tiny" and r.params.dtype == "bf16"  # type: ignore[union-attr]
        assert r.params.attn_implementation == "sdpa"  # type: ignore[union-attr]
        assert r.peak_fraction is None  # no datasheet for a CPU
    # llama-tiny: hidden 64, 2 layers, 4 heads of 16, 2 KV heads, ffn 256, vocab 1000, untied embeddings.
    n = 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 256 + 2 * 64) + 64 + 1000 * 64
    p = prefill_2.params
    assert p.phase == "prefill" and p.n_params == n and p.bytes_per_call is None  # type: ignore[union-attr]
    assert p.flops_per_call == 2 * n * 2 * 32 + 4 * 2 * 2 * 32 * 32 * 64  # type: ignore[union-attr]
    m = prefill_2.metrics
    assert m.ttft_s == prefill_2.timing.median_s  # type: ignore[union-attr]
    assert m.tokens_per_s == pytest.approx(2 * 32 / prefill_2.timing.median_s)  # type: ignore[union-attr]
    assert m.tpot_s is None and m.gbps is None  # type: ignore[union-attr]
    d = decode_3.params
    kv = 2 * 2 * 3 * 48 * 2 * 16 * 2  # K and V, layers, batch, positions, KV heads, head dim, bf16 bytes
    assert d.phase == "decode" and d.seq_len == 48 and d.kv_cache_bytes == kv  # type: ignore[union-attr]
    assert d.bytes_per_call == 2 * n + kv  # type: ignore[union-attr]
    assert d.flops_per_call == 2 * n * 3 + 4 * 2 * 3 * 48 * 64  # type: ignore[union-attr]
    dm, timing = decode_3.metrics, decode_3.timing
    assert dm.tpot_s == timing.median_s and dm.tpot_p90_s >= dm.tpot_s  # type: ignore[union-attr, operator]
    assert dm.tokens_per_s == pytest.approx(3 / timing.median_s)  # type: ignore[union-attr]
    assert dm.gbps == pytest.approx(d.bytes_per_call / timing.median_s / 1e9)  # type: ignore[union-attr]
    assert dm.ttft_s is None  # type: ignore[union-attr]


@needs_inference
def test_inference_records_transformers_eager_attention_when_asked() -> None:
    grid = replace(TINY_LLAMA, prefill=((1, 16),), decode_batches=(2,), attn_implementation="eager")
    results = run(InferenceBenchmark(grid))
    assert [(r.status, r.params.attn_implementation) for r in results] == [("ok", "eager")] * 2  # type: ignore[union-attr]


@needs_inference
def test_a_kv_cache_that_does_not_fit_is_oom_and_the_suite_goes_on() -> None:
    huge, small = run(InferenceBenchmark(replace(TINY_LLAMA, prefill=(), decode_batches=(1 << 24, 1), context=4096)))
    assert huge.status == "oom", huge.reason
    assert small.status == "ok", small.reason


@needs_inference
def test_a_decode_step_gives_the_logits_of_a_forward_over_the_whole_sequence() -> None:
    import torch

    from agent.models import llama

    torch.manual_seed(0)
    model = llama.build(llama.SHAPES["llama-tiny"], torch.float32, "sdpa", torch.device("cpu"))
    ids = torch.randint(0, 1000, (3, 20))
    with torch.no_grad():
        whole = model(input_ids=ids, use_cache=False).logits[:, -1]
        decode = llama.StaticDecode(model, batch=3, context=20)
        decode.fill(ids[:, :-1], ids[:, -1:])
        first, again = decode.forward(), decode.forward()  # the step writes the same position every time
        torch.testing.assert_close(first, whole, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(again, first)
        assert torch.equal(decode.step(), whole.argmax(dim=-1, keepdim=True))


def test_the_largest_model_whose_weights_fit_in_half_the_memory_is_chosen() -> None:
    from agent.models import llama

    gib = 1 << 30
    assert llama.SHAPES["llama-3-8b"].total_params == 8_030_261_248  # Meta's published count
    assert llama.fitting(llama.BY_SIZE, 80 * gib, "bf16").name == "llama-3-8b"  # 16.1 GB of weights
    assert llama.fitting(llama.BY_SIZE, 24 * gib, "bf16").name == "llama-3.2-3b"  # 6.4 GB
    assert llama.fitting(llama.BY_SIZE, 6 * gib, "bf16").name == "llama-3.2-1b"  # 2.5 GB, the smallest
    assert llama.fitting(llama.BY_SIZE, 1 * gib, "bf16").name == "llama-3.2-1b"


@pytest.mark.parametrize("name", ["llama-3-8b", "llama-3.2-3b", "llama-3.2-1b", "llama-tiny"])
def test_llama_parameter_counts_are_those_of_the_model_transformers_builds(name: str) -> None:
    import torch

    from agent.models import families, llama

    shape = llama.SHAPES[name]
    model = llama.build(shape, torch.bfloat16, "eager", torch.device("meta"))  # eager: every release has it
    assert sum(p.numel() for p in model.parameters()) == shape.total_params
    assert families.dense_params(model) == shape.n_params


@needs_inference
def test_a_decode_step_and_a_prefill_never_wait_for_the_device() -> None:
    """What would make the host wait for a GPU (``.item()``, ``bool(tensor)``, data-dependent shapes) dispatches
    one of these operators; a CUDA graph cannot capture a step that does."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from agent.models import llama

    waits = {"_local_scalar_dense", "nonzero", "masked_select", "item", "is_nonzero", "equal"}
    seen: list[str] = []

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            seen.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    model = llama.build(llama.SHAPES["llama-tiny"], torch.bfloat16, "sdpa", torch.device("cpu"))
    decode = llama.StaticDecode(model, batch=2, context=32)
    ids = torch.randint(0, 1000, (2, 16))
    with torch.no_grad():
        decode.step()
        model(input_ids=ids, use_cache=False)
        with Watch():
            decode.step()
            model(input_ids=ids, use_cache=False)
    assert seen and not waits & set(seen), sorted(waits & set(seen))


@pytest.mark.skipif(transformers_at_least("4.56"), reason="this transformers runs the inference family")
def test_inference_is_unsupported_with_the_reason_on_older_transformers() -> None:
    results = run(InferenceBenchmark(TINY_LLAMA))
    assert results and {r.status for r in results} == {"unsupported"}
    assert all((r.reason or "").startswith("transformers ") for r in results), [r.reason for r in results]

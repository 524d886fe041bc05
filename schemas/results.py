"""Benchmark results: one typed model per kind, joined in a union discriminated on ``benchmark``.

Every result carries its params (what was measured), metrics (what came out), timing statistics and a
status. A result that is not ``ok`` says why in ``reason`` and carries no metrics.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator
from typing_extensions import Self

from .base import (
    Count,
    Dim,
    Fraction,
    GpuIndex,
    Positive,
    PositiveSeconds,
    Rate,
    Seconds,
    Share,
    Slug,
    Text,
    Watts,
    WireModel,
)
from .environment import StateSummary

Status = Literal["ok", "oom", "unsupported", "error", "skipped"]
Dtype = Literal["fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2"]
Mode = Literal["fwd", "fwd+bwd"]
TimingMethod = Literal["cuda_event", "cuda_graph", "perf_counter"]
AttentionImplementation = Literal["eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention"]
#: Whose model code: transformers' classes, or the agent's own in plain torch (agent/models/llama_torch.py,
#: agent/benchmarks/bert_torch.py).
InferenceImplementation = Literal["transformers", "torch"]
#: Marks that qualify an ``ok`` result instead of hiding it.
Flag = Literal[
    "high_cv",  # coefficient of variation above 10 %: noisy, read with care
    "above_peak",  # faster than the datasheet allows: a measurement error
    "wrong_result",  # numerics outside tolerance against a higher-precision reference
    "launch_bound",  # host launch overhead, not the GPU, set the pace
    "throttled",  # the GPU reported power or thermal throttling during the case
    "parallel",  # measured while other GPUs of the machine ran too
    "busy",  # measured while another process used the GPU (--when-busy measure)
    "host_bound",  # the host's memory and scheduler set the pace (pageable copies): a figure about the host
    "unsettled",  # the timings still moved when the warm-up's time limit came, or the window's median was unknown
    "starved",  # the measuring process did not get the host it needed (it waited for a CPU): not a figure of the device
    "power_capped",  # the board's power limit set the clock (agent/machine/nvml.py): moves a few % between runs
]


class TimingStats(WireModel):
    """Per-call time statistics; ``calls_per_repeat`` > 1 when one timed repeat replays several calls.

    ``total_s`` is the whole measurement: ``warmup_s`` (warm-up calls and the repeats a settling warm-up left
    out), ``capture_s`` (recording a CUDA graph) and the timed repeats. ``ci_rel`` is how well the median is known:
    the half-width of its distribution-free 95 % confidence interval over the median (None: too few repeats for
    one). ``settled``: whether a warm-up asked to last until the timings settle saw them settle, and a window asked to
    go on until its median is known came to know it (None: neither was asked). ``host_wait``: of the time the
    measuring process's threads were ready to run during the window, the share they waited for a CPU (Linux's
    run-queue wait; None where the host does not say); ``device_idle``: the share of the window's batches, enqueued
    back to back, that the device spent idle between repeats (GPU timers only); ``launch_share``: how much of the
    median repeat the device may have spent waiting on the host inside it (in the repeats it reached before the host
    had launched all of their work, the launching thread's time off its CPU; GPU timers only; runs before 2026-12-06
    hold the host's whole launching time over the device's here, a full launch queue's wait included). They
    say whether the figure is the device's or a busy host's (agent/timing/starvation.py).
    ``power_w``: the board's mean power over the repeats, from its energy counter: ``energy_j`` over
    ``energy_span_s``, the whole updates of the counter the window held (agent/machine/energy.py; None: no counter,
    or a window no update fell in). Every per-watt figure divides by it (``labels.per_watt``).
    """

    method: TimingMethod
    median_s: PositiveSeconds
    mean_s: PositiveSeconds
    min_s: PositiveSeconds
    max_s: PositiveSeconds
    iqr_s: Seconds
    cv: Annotated[float, Field(ge=0.0, le=1e3)]
    repeats: Positive
    warmup: Count
    calls_per_repeat: Positive = 1
    total_s: Seconds
    warmup_s: Seconds | None = None
    capture_s: Seconds | None = None
    ci_rel: Annotated[float, Field(ge=0.0, le=1e3)] | None = None
    settled: bool | None = None
    host_wait: Share | None = None
    device_idle: Share | None = None
    launch_share: Share | None = None
    power_w: Watts | None = None
    energy_j: Annotated[float, Field(ge=0.0, le=1e9, allow_inf_nan=False)] | None = None
    energy_span_s: Seconds | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if not (self.min_s <= self.median_s <= self.max_s and self.min_s <= self.mean_s <= self.max_s):
            raise ValueError("timing must satisfy min_s <= median_s, mean_s <= max_s")
        return self


class _Result(WireModel):
    name: Slug
    gpu_index: GpuIndex | None = None
    status: Status
    reason: Text | None = None
    timing: TimingStats | None = None
    peak_fraction: Fraction | None = None
    flags: tuple[Flag, ...] = Field(default=(), max_length=8)
    state: StateSummary | None = None
    duration_s: Seconds = 0.0  # the case in its measuring process, set-up and checks included
    started_s: Seconds | None = None  # handed over to its measuring process, seconds from the agent's start
    finished_s: Seconds | None = None  # its result back in the agent

    @model_validator(mode="after")
    def _status_consistent(self) -> Self:
        metrics = getattr(self, "metrics", None)
        if self.status == "ok":
            if metrics is None or self.timing is None:
                raise ValueError("a result with status 'ok' needs metrics and timing")
        else:
            if self.reason is None:
                raise ValueError(f"a result with status {self.status!r} needs a reason")
            if metrics is not None:
                raise ValueError(f"a result with status {self.status!r} carries no metrics")
        return self


class MatmulParams(WireModel):
    m: Dim
    n: Dim
    k: Dim
    dtype: Dtype


class MatmulMetrics(WireModel):
    tflops: Rate
    rel_error: Annotated[float, Field(ge=0.0)] | None = None
    tolerance: Annotated[float, Field(gt=0.0)] | None = None


class MatmulResult(_Result):
    benchmark: Literal["matmul"]
    params: MatmulParams
    metrics: MatmulMetrics | None = None


class MamfParams(WireModel):
    """A search over matmul shapes for the maximum achievable FLOPS (stas00's mamf-finder)."""

    dtype: Dtype
    m_range: tuple[Dim, Dim, Dim]
    n_range: tuple[Dim, Dim, Dim]
    k_range: tuple[Dim, Dim, Dim]
    shapes_tried: Positive


class MamfMetrics(WireModel):
    """``tflops``: median of the best shape's 5 fastest calls in bursts after idle gaps, at boost clock
    (mamf-finder's achievable figure); ``sustained_tflops``: the same shape under continuous load."""

    tflops: Rate
    sustained_tflops: Rate | None = None
    m: Dim
    n: Dim
    k: Dim
    median_tflops_over_shapes: Rate | None = None


class MamfResult(_Result):
    benchmark: Literal["mamf"]
    params: MamfParams
    metrics: MamfMetrics | None = None


class BandwidthParams(WireModel):
    """Device-memory traffic; ``bytes_per_call`` counts reads plus writes, as BabelStream does."""

    op: Literal["scale", "copy", "triad"]
    dtype: Dtype
    elements: Positive
    bytes_per_call: Positive
    flops_per_call: Count


class BandwidthMetrics(WireModel):
    gbps: Rate
    tflops: Rate


class BandwidthResult(_Result):
    benchmark: Literal["bandwidth"]
    params: BandwidthParams
    metrics: BandwidthMetrics | None = None


class TransferParams(WireModel):
    direction: Literal["h2d", "d2h"]
    pinned: bool
    bytes: Positive


class TransferMetrics(WireModel):
    gbps: Rate


class TransferResult(_Result):
    benchmark: Literal["transfer"]
    params: TransferParams
    metrics: TransferMetrics | None = None


class LayerParams(WireModel):
    """One transformer block; FLOPs per the transformers-benchmarks formulas (fwd+bwd = 3x fwd)."""

    model: Slug
    block: Literal["bert_layer", "gpt2_block", "t5_encoder_block", "t5_decoder_block"]
    hidden: Dim
    heads: Dim
    ffn: Dim
    batch: Dim
    seq_len: Dim
    dtype: Dtype
    mode: Mode
    attn_implementation: AttentionImplementation
    flops_per_call: Positive
    #: transformers' block class, or the agent's plain-torch BERT layer (the health profile's: no transformers import)
    implementation: Literal["transformers", "torch"] = "transformers"


class LayerMetrics(WireModel):
    tflops: Rate


class LayerResult(_Result):
    benchmark: Literal["layer"]
    params: LayerParams
    metrics: LayerMetrics | None = None


class TrainingParams(WireModel):
    """A whole model's optimizer step; FLOPs per token = 6N + 12*L*H*Q*T (PaLM appendix B)."""

    model: Slug
    task: Literal["mlm", "clm", "seq2seq"]
    batch: Dim
    seq_len: Dim
    precision: Literal["bf16-autocast", "fp16-autocast", "fp32"]
    optimizer: Literal["adamw"]
    n_params: Positive
    flops_per_token: Positive
    batch_search: Literal["fixed", "max_fit"]
    batch_cap: Dim | None = None
    attn_implementation: AttentionImplementation
    world_size: Annotated[int, Field(ge=1, le=1 << 20)] = 1  # > 1: data-parallel (DDP), batch is per rank


class TrainingMetrics(WireModel):
    """Throughput over all ranks; ``scaling_efficiency`` is tokens/s over world_size times one rank's alone."""

    samples_per_s: Rate
    tokens_per_s: Rate
    tflops: Rate
    mfu: Fraction | None = None
    peak_memory_bytes: Count | None = None
    scaling_efficiency: Fraction | None = None


class TrainingResult(_Result):
    benchmark: Literal["training"]
    params: TrainingParams
    metrics: TrainingMetrics | None = None


class InferenceParams(WireModel):
    """A Llama-style decoder (random weights) in one phase; FLOPs and bytes per ``agent/benchmarks/flops.py``.

    ``prefill``: one forward over ``batch`` prompts of ``seq_len`` tokens, logits at every position. ``decode``: one new
    token per sequence, the static KV cache holding ``seq_len`` positions (the step writes the last and attends to
    all); ``bytes_per_call`` is what that step reads: the weights and the whole KV cache. ``n_params`` counts every
    parameter but the embedding table (a lookup, neither read whole nor multiplied), as training's does.
    """

    model: Slug
    phase: Literal["prefill", "decode"]
    batch: Dim
    seq_len: Dim
    dtype: Dtype
    layers: Dim
    hidden: Dim
    heads: Dim
    kv_heads: Dim
    ffn: Dim
    vocab: Dim
    n_params: Positive
    weight_bytes: Positive
    kv_cache_bytes: Count | None = None
    flops_per_call: Positive
    bytes_per_call: Positive | None = None
    attn_implementation: AttentionImplementation
    #: transformers' ``LlamaForCausalLM``, or the agent's lean decoder in plain torch (fused projections and kernels)
    implementation: InferenceImplementation = "transformers"
    #: The lean decoder's small operations: plain torch, or one Triton kernel each (on CUDA, where Triton imports)
    kernels: Literal["torch", "triton"] | None = None


class InferenceMetrics(WireModel):
    """``tokens_per_s``: prefill batch·seq_len/t, decode batch/t. Prefill: ``ttft_s``, how long the batch waits for
    its first token. Decode: ``tpot_s`` and ``tpot_p90_s``, time per output token (median, 90th percentile of the
    repeats), and ``gbps``, bytes_per_call over tpot_s (its fraction of the datasheet bandwidth: ``peak_fraction``).
    """

    tokens_per_s: Rate
    tflops: Rate
    ttft_s: PositiveSeconds | None = None
    tpot_s: PositiveSeconds | None = None
    tpot_p90_s: PositiveSeconds | None = None
    gbps: Rate | None = None
    peak_memory_bytes: Count | None = None


class InferenceResult(_Result):
    benchmark: Literal["inference"]
    params: InferenceParams
    metrics: InferenceMetrics | None = None


class CollectiveParams(WireModel):
    """A collective across ``world_size`` ranks on ``nodes`` machines. ``bytes`` is nccl-tests' size: the whole
    buffer (for all-gather the gathered output, for reduce-scatter the input); busbw follows nccl-tests' formulas."""

    op: Literal["all_reduce", "all_gather", "reduce_scatter"]
    backend: Literal["nccl", "gloo"]
    dtype: Dtype
    bytes: Positive
    world_size: Annotated[int, Field(ge=1, le=1 << 20)]
    nodes: Annotated[int, Field(ge=1, le=1 << 16)] = 1


class CollectiveMetrics(WireModel):
    algbw_gbps: Rate
    busbw_gbps: Rate
    rel_error: Annotated[float, Field(ge=0.0)] | None = None


class CollectiveResult(_Result):
    benchmark: Literal["collective"]
    params: CollectiveParams
    metrics: CollectiveMetrics | None = None


Result = Annotated[
    Union[
        MatmulResult,
        MamfResult,
        BandwidthResult,
        TransferResult,
        LayerResult,
        TrainingResult,
        InferenceResult,
        CollectiveResult,
    ],
    Field(discriminator="benchmark"),
]

#: The result kinds, in the order reports show them.
RESULT_KINDS: tuple[str, ...] = (
    "matmul", "mamf", "bandwidth", "transfer", "layer", "training", "inference", "collective",
)  # fmt: skip

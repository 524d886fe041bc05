"""The suites: which benchmarks run, over which grids, with which timing policy.

``quick`` is CPU-friendly and touches every family with tiny shapes (tests and the CPU demo use it);
``standard`` is the transformers-benchmarks set plus fp8, transfers, training steps, LLM prefill and decode and, on
machines with several GPUs, collectives and data-parallel training; ``full`` adds the search for the maximum
achievable matmul FLOPS and a larger inference grid; ``health`` is the few full-size figures the verdicts use
(``flopfleet-agent check``), in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from schemas.results import AttentionImplementation, InferenceImplementation

from ..benchmarks import REGISTRY, AnyBenchmark, benchmark_class
from ..benchmarks.bandwidth import BandwidthGrid
from ..benchmarks.collective import CollectiveGrid
from ..benchmarks.data_parallel import DataParallelGrid
from ..benchmarks.inference import InferenceGrid
from ..benchmarks.layers import LayerGrid
from ..benchmarks.mamf import MamfGrid
from ..benchmarks.matmul import MatmulGrid
from ..benchmarks.training import TrainingGrid
from ..benchmarks.transfer import TransferGrid
from ..errors import ConfigError
from ..timing import GroupPolicy, TimingPolicy

KiB = 1 << 10
MiB = 1 << 20
DENSE_DTYPES = ("fp32", "tf32", "fp16", "bf16")
#: transformers' Llama (what its users get) and the lean plain-torch one (what the card can do), side by side.
BOTH_LLAMAS: tuple[InferenceImplementation, ...] = ("transformers", "torch")


@dataclass(frozen=True)
class Suite:
    name: str
    description: str
    policy: TimingPolicy
    grids: dict[str, Any] = field(default_factory=dict)

    def benchmarks(self, only: tuple[str, ...] = (), skip: tuple[str, ...] = ()) -> list[AnyBenchmark]:
        """The suite's benchmarks in run order, narrowed by ``only``/``skip`` (names checked against the registry)."""
        for name in (*only, *skip):
            benchmark_class(name)
            if name not in self.grids:
                raise ConfigError(f"benchmark {name!r} is not in suite {self.name!r}; it has: {', '.join(self.grids)}")
        names = [n for n in REGISTRY if n in self.grids and (not only or n in only) and n not in skip]
        return [REGISTRY[n](self.grids[n]) for n in names]

    def with_attention(self, attn_implementation: AttentionImplementation) -> Suite:
        """The same suite with every layer, training and inference grid asking for ``attn_implementation``."""
        grids = {
            name: replace(grid, attn_implementation=attn_implementation)
            if isinstance(grid, (LayerGrid, TrainingGrid, DataParallelGrid, InferenceGrid))
            else grid
            for name, grid in self.grids.items()
        }
        return replace(self, grids=grids)


QUICK = Suite(
    name="quick",
    description="every family once with tiny shapes; seconds on a CPU",
    policy=TimingPolicy(
        warmup_s=0.005,
        min_warmup=1,
        min_repeats=3,
        max_repeats=50,
        min_time_s=0.005,
        max_time_s=0.08,
        target_rel_iqr=0.05,
    ),
    grids={
        "matmul": MatmulGrid(sizes=(128, 256), dtypes=DENSE_DTYPES),
        "matmul_fp8": MatmulGrid(sizes=(256,), dtypes=("fp8_e4m3",)),
        "bandwidth": BandwidthGrid(scale=(1 << 16, 1 << 20), copy=(1 << 20,), triad=(1 << 20,)),
        "transfer": TransferGrid(sizes=(4 * MiB,)),
        "layer_bert": LayerGrid(model="bert-tiny", seq_lens=(32,), batches=(2,), dtypes=("fp32",)),
        "layer_gpt2": LayerGrid(model="gpt2-tiny", seq_lens=(32,), batches=(2,), dtypes=("fp32",)),
        "layer_t5_encoder": LayerGrid(model="t5-tiny", seq_lens=(32,), batches=(2,), dtypes=("fp32",)),
        "layer_t5_decoder": LayerGrid(model="t5-tiny", seq_lens=(32,), batches=(2,), dtypes=("fp32",)),
        "training_bert": TrainingGrid(model="bert-tiny", seq_len=32, batch_cap=4, search=False),
        "training_gpt2": TrainingGrid(model="gpt2-tiny", seq_len=32, batch_cap=4, search=False),
        "inference": InferenceGrid(
            prefill=((1, 32), (2, 64)),
            decode_batches=(1, 4),
            context=64,
            models=("llama-tiny",),
            implementations=BOTH_LLAMAS,
        ),
        "collective": CollectiveGrid(
            sizes=(32 * KiB, MiB), policy=GroupPolicy(warmup=2, repeats=3, repeat_s=0.002, max_calls=20)
        ),
        "training_ddp": DataParallelGrid(
            model="gpt2-tiny", seq_len=32, batch=2, policy=GroupPolicy(warmup=1, repeats=3, repeat_s=1e-3)
        ),
    },
)

_LAYER_DTYPES = ("fp16", "bf16")
#: The standard suite's timing (docs/methodology.md, "Timing"): warm-up until two 8 ms windows of repeats agree
#: (within 1 %, or within their noise; at most 0.3 s), before that at least 0.15 s of continuous load for a sustained
#: rate (matmul, a training step) whose calls take 100 us or more (the power limit's transient on the H200 was over
#: within 0.1 s), then repeats until the median is known to 1 % (at most 0.12 s; a median not known by then goes on
#: to 0.3 s, and is flagged unsettled if it is still not known). Calls of 50 ms or more are windows
#: of their own: after the warm-up, three are timed. Every case shorter than 20 ms is replayed as a CUDA graph unless
#: it cannot be captured (matmul decides for itself).
STANDARD_POLICY = TimingPolicy(
    warmup_s=0.0, min_warmup=2, min_repeats=5, max_repeats=500, min_time_s=0.0, max_time_s=0.12,
    settle_rel=0.01, settle_window_s=0.008, settle_windows=2, max_warmup_s=0.3, sustain_s=0.15,
    sustain_from_call_s=1e-4, target_rel_ci=0.01, graph_below_s=0.02, graph_target_s=0.002, batch=64,
    long_call_s=0.05, brief_call_s=1.6e-5, brief_max_warmup_s=0.1, rest_s=0.04, rest_from_call_s=2e-3,
    unknown_max_time_s=0.3,
)  # fmt: skip
STANDARD = Suite(
    name="standard",
    description="the transformers-benchmarks set (matmul, vector, BERT/GPT-2/T5 layers) plus fp8, "
    "bandwidth, transfers, training steps and LLM prefill and decode",
    policy=STANDARD_POLICY,
    grids={
        "matmul": MatmulGrid(sizes=(128, 512, 2048, 4096, 8192, 16384), dtypes=DENSE_DTYPES, each_call=True),
        "matmul_fp8": MatmulGrid(sizes=(512, 2048, 4096, 8192, 16384), dtypes=("fp8_e4m3",), each_call=True),
        "bandwidth": BandwidthGrid(
            scale=tuple(1 << e for e in range(16, 29, 2)),  # 256 KiB .. 1 GiB, the notebook's sizes and more
            copy=(1 << 24, 1 << 26, 1 << 28),
            triad=(1 << 24, 1 << 26, 1 << 28),
        ),
        "transfer": TransferGrid(sizes=(256 * MiB,)),
        "layer_bert": LayerGrid(
            model="bert-large", seq_lens=(128, 512), batches=(2, 4, 8, 16, 32, 64, 128), dtypes=_LAYER_DTYPES
        ),
        "layer_gpt2": LayerGrid(
            model="gpt2-medium", seq_lens=(512, 1024), batches=(2, 4, 8, 16, 32, 64), dtypes=_LAYER_DTYPES
        ),
        "layer_t5_encoder": LayerGrid(
            model="t5-large", seq_lens=(512,), batches=(2, 4, 8, 16, 32, 64, 128), dtypes=_LAYER_DTYPES
        ),
        "layer_t5_decoder": LayerGrid(
            model="t5-large", seq_lens=(512,), batches=(2, 4, 8, 16, 32, 64, 128), dtypes=_LAYER_DTYPES
        ),
        "training_bert": TrainingGrid(model="bert-large", seq_len=128, batch_cap=256),
        "training_gpt2": TrainingGrid(model="gpt2-medium", seq_len=1024, batch_cap=32),
        "inference": InferenceGrid(
            prefill=((1, 512), (8, 2048)), decode_batches=(1, 32), context=1024, implementations=BOTH_LLAMAS
        ),
        # nccl-tests' range: 32 KiB (latency-bound) .. 8 GiB (bandwidth-bound), x4 apart.
        "collective": CollectiveGrid(sizes=tuple(32 * KiB << (2 * e) for e in range(10))),
        "training_ddp": DataParallelGrid(model="gpt2-medium", seq_len=1024, batch=16),
    },
)

FULL = Suite(
    name="full",
    description="standard plus the search for maximum achievable matmul FLOPS over shapes and a larger LLM "
    "inference grid",
    policy=STANDARD.policy,
    grids={
        **STANDARD.grids,
        "inference": InferenceGrid(
            prefill=((1, 512), (1, 2048), (4, 2048), (8, 2048), (1, 8192)),
            decode_batches=(1, 8, 32, 64),
            context=1024,
            implementations=BOTH_LLAMAS,
        ),
        "mamf": MamfGrid(
            dtypes=("bf16", "fp16", "fp8_e4m3", "tf32"),
            m_range=(4096, 16384, 2048),
            n_range=(4096, 16384, 2048),
            k_range=(4096, 16384, 2048),
            budget_s=45.0,
        ),
    },
)

HEALTH = Suite(
    name="health",
    description="the figures the verdicts use, at full size: sustained bf16 matmul, fp32 matmul at full clock, HBM "
    "bandwidth, pinned host<->device transfers, one BERT-large layer fwd+bwd, all-reduce where there are several GPUs",
    # A longer warm-up than the standard suite's, so the matmul is measured at the clocks the GPU sustains under
    # load (the standard window can start at boost); windows of 0.2-0.4 s keep the whole profile in seconds.
    policy=TimingPolicy(warmup_s=0.3, min_warmup=2, min_repeats=5, max_repeats=200, min_time_s=0.2, max_time_s=0.4),
    grids={
        # bf16 at 8192^3, held at the power limit (the figure people quote), and fp32 at 4096^3, at full clock
        # under it (``HealthFigure`` matmul_fp32_4096: the work rate apart from the power efficiency).
        "matmul": MatmulGrid(sizes=(8192,), dtypes=("bf16",), also=(("fp32", 4096),)),
        "bandwidth": BandwidthGrid(scale=(1 << 28,), copy=(1 << 28,)),  # 1 GiB per array: far past any cache
        "transfer": TransferGrid(sizes=(256 * MiB,), pinned=(True,)),
        # The plain-torch layer (benchmarks/bert_torch.py): the same figure without transformers' 11-13 s import.
        "layer_bert_torch": LayerGrid(
            model="bert-large", seq_lens=(512,), batches=(64,), dtypes=("fp16",), modes=("fwd+bwd",)
        ),
        "collective": CollectiveGrid(sizes=(256 * MiB,), ops=("all_reduce",)),
    },
)

SUITES: dict[str, Suite] = {s.name: s for s in (QUICK, STANDARD, FULL, HEALTH)}


def suite(name: str) -> Suite:
    try:
        return SUITES[name]
    except KeyError:
        raise ConfigError(f"unknown suite {name!r}; known: {', '.join(SUITES)}") from None

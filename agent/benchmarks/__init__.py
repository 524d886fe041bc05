"""The benchmark registry: every benchmark a suite can name, registered explicitly by name."""

from __future__ import annotations

from ..errors import ConfigError
from .bandwidth import BandwidthBenchmark
from .base import AnyBenchmark, Benchmark, Case, Context, GroupBenchmark, Outcome, Span
from .bert_torch import TorchBertLayerBenchmark
from .collective import CollectiveBenchmark
from .data_parallel import Gpt2DataParallelBenchmark
from .inference import InferenceBenchmark
from .layers import BertLayerBenchmark, Gpt2BlockBenchmark, T5DecoderBenchmark, T5EncoderBenchmark
from .mamf import MamfBenchmark
from .matmul import Fp8MatmulBenchmark, MatmulBenchmark
from .training import BertTrainingBenchmark, Gpt2TrainingBenchmark
from .transfer import TransferBenchmark

#: Name -> class, in the order a suite runs them.
REGISTRY: dict[str, type[AnyBenchmark]] = {
    cls.NAME: cls
    for cls in (
        MatmulBenchmark,
        Fp8MatmulBenchmark,
        BandwidthBenchmark,
        TransferBenchmark,
        BertLayerBenchmark,
        TorchBertLayerBenchmark,
        Gpt2BlockBenchmark,
        T5EncoderBenchmark,
        T5DecoderBenchmark,
        BertTrainingBenchmark,
        Gpt2TrainingBenchmark,
        InferenceBenchmark,
        MamfBenchmark,
        CollectiveBenchmark,
        Gpt2DataParallelBenchmark,
    )
}


def benchmark_class(name: str) -> type[AnyBenchmark]:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ConfigError(f"unknown benchmark {name!r}; known: {', '.join(REGISTRY)}") from None


__all__ = [
    "REGISTRY",
    "AnyBenchmark",
    "Benchmark",
    "Case",
    "Context",
    "GroupBenchmark",
    "Outcome",
    "Span",
    "benchmark_class",
]

"""What a view's charts show (``render.charts`` draws them): their data, and the words each chart is titled with,
taken from the figures' own labels (``store.figures``: the words of their rows in the comparison table)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..store.figures import BY_KEY, FIGURES, Figure
from .compare import Comparison, Series

#: The charts a view can ask for, in the report's order.
CHARTS = ("matmul", "peak", "layers", "bandwidth", "training", "decode", "price", "spread")


@dataclass(frozen=True)
class Charts:
    """The data behind a view's charts (``render.charts`` draws them); a chart not asked for is empty."""

    cmp: Comparison
    only: tuple[str, ...]
    matmul: dict[str, list[Series]] = field(default_factory=dict)
    layers: dict[str, list[Series]] = field(default_factory=dict)
    bandwidth: dict[str, list[Series]] = field(default_factory=dict)
    decode: dict[str, list[Series]] = field(default_factory=dict)
    peak: dict[str, dict[str, float]] = field(default_factory=dict)
    spread: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    busbw: dict[str, list[Series]] = field(default_factory=dict)


#: The figure each GPU of a card is shown by in the "same model, different machines" chart.
SPREAD_FIGURE = "matmul_bf16"
#: The figure of the "same model, different machines" chart.
SPREAD = BY_KEY[SPREAD_FIGURE]
#: The figures of the training chart, side by side.
TRAINING = (BY_KEY["train_bert_tokens"], BY_KEY["train_gpt2_tokens"])


def _figure(found: Figure | None, fallback: str) -> str:
    return found.label if found is not None else fallback


def matmul_title(dtype: str) -> str:
    """The table's row for square matmuls of ``dtype`` (``Matmul BF16``); an FP8 format says which."""
    found = next((f for f in FIGURES if f.benchmark == "matmul" and (f.dtype == dtype or (
        f.dtype is None and f.dtype_prefix is not None and dtype.startswith(f.dtype_prefix)))), None)  # fmt: skip
    title = _figure(found, f"matmul {dtype}")
    return f"{title} ({dtype})" if found is not None and found.dtype_prefix else title


def bandwidth_title(op: str) -> str:
    """The table's row for a memory operation (``Memory a*1.2`` for ``scale``)."""
    found = next((f for f in FIGURES if f.benchmark == "bandwidth" and f.value == "gbps" and f.op == op), None)
    return _figure(found, f"memory {op}")


def layer_title(series: str) -> str:
    """The table's row for a layer chart (``bert_layer fwd+bwd seq 512`` → ``BERT layer fwd+bwd, seq 512``)."""
    block, mode, _, rest = [*series.split(" ", 3), "", "", ""][:4]
    seq, _, eager = rest.partition(", ")
    attn = "eager" if eager else "sdpa"
    found = next((f for f in FIGURES if f.benchmark == "layer" and f.block == block and f.mode == mode
                  and f.attn_implementation == attn), None)  # fmt: skip
    return f"{found.label}, seq {seq}" if found is not None else series

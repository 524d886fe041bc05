"""A BERT layer in plain torch, for the health profile: the operations of transformers' ``BertLayer`` (the same
Linear, scaled-dot-product attention, dropout, LayerNorm and GELU calls, in the same order, parameters under the
same names), without importing transformers.

Why: the health profile must be measured in seconds, and transformers' import (its BERT modules pull in
``torch.distributed.tensor``, sympy, ``torch._dynamo``) took 11 to 13 s of the measuring process's start on the H200,
the whole profile's critical path. The figure it gives is the ``bert_fwdbwd`` health figure, so it must agree with
the transformers layer that the standard suite measures: the same outputs for the same weights (a CPU test) and
the same TFLOPS side by side on the H200 (docs/results/h200.md, "Health profile and check").
"""

from __future__ import annotations

from typing import Any

from ..errors import Unsupported
from ..models.families import Shape
from .layers import LayerBenchmark

#: transformers' BertConfig defaults, which models.config keeps for BERT.
DROPOUT = 0.1
LAYER_NORM_EPS = 1e-12
IMPLEMENTATIONS = ("sdpa", "eager")


def torch_bert_layer(shape: Shape, attn_implementation: str) -> Any:
    """A training-mode BERT layer of ``shape`` whose state dict loads from (and into) transformers' BertLayer."""
    import torch
    from torch import nn

    if attn_implementation not in IMPLEMENTATIONS:
        raise Unsupported(f"the plain-torch BERT layer has {' and '.join(IMPLEMENTATIONS)} attention, not "
                          f"{attn_implementation}")  # fmt: skip
    heads, head_size = shape.heads, shape.hidden // shape.heads

    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.query = nn.Linear(shape.hidden, shape.hidden)
            self.key = nn.Linear(shape.hidden, shape.hidden)
            self.value = nn.Linear(shape.hidden, shape.hidden)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            split = (*x.shape[:-1], heads, head_size)
            q, k, v = (p(x).view(split).transpose(1, 2) for p in (self.query, self.key, self.value))
            dropout = DROPOUT if self.training else 0.0
            if attn_implementation == "sdpa":
                # Looked up at the call, so that observe_attention counts it as it does for transformers.
                out = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=dropout,
                                                                        scale=head_size**-0.5)  # fmt: skip
            else:
                weights = torch.matmul(q, k.transpose(2, 3)) * head_size**-0.5
                weights = nn.functional.dropout(nn.functional.softmax(weights, dim=-1), dropout, self.training)
                out = torch.matmul(weights, v)
            return out.transpose(1, 2).contiguous().reshape(*x.shape[:-1], -1).contiguous()

    class Output(nn.Module):
        """Dense, dropout, then LayerNorm over the sum with the block's input (BertSelfOutput, BertOutput)."""

        def __init__(self, width: int) -> None:
            super().__init__()
            self.dense = nn.Linear(width, shape.hidden)
            self.LayerNorm = nn.LayerNorm(shape.hidden, eps=LAYER_NORM_EPS)
            self.dropout = nn.Dropout(DROPOUT)

        def forward(self, x: torch.Tensor, residual: torch.Tensor) -> Any:
            return self.LayerNorm(self.dropout(self.dense(x)) + residual)

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.self = SelfAttention()
            self.output = Output(shape.hidden)

        def forward(self, x: torch.Tensor) -> Any:
            return self.output(self.self(x), x)

    class Intermediate(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dense = nn.Linear(shape.hidden, shape.ffn)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = nn.functional.gelu(self.dense(x))
            return out

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention = Attention()
            self.intermediate = Intermediate()
            self.output = Output(shape.ffn)

        def forward(self, x: torch.Tensor) -> Any:
            attended = self.attention(x)
            return self.output(self.intermediate(attended), attended)

    return Layer()


class TorchBertLayerBenchmark(LayerBenchmark):
    """``layer_bert`` with the plain-torch layer: the same params and figure, no transformers import."""

    NAME = "layer_bert_torch"
    BLOCK = "bert_layer"
    IMPLEMENTATION = "torch"
    DESCRIPTION = "BERT-large layer TFLOPS, fwd and fwd+bwd, built in plain torch (no transformers import)"

    def build(self, shape: Shape, attn_implementation: str) -> Any:
        return torch_bert_layer(shape, attn_implementation)

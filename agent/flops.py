"""FLOP counts, as the transformers-benchmarks notebooks count them, so results line up with the published table."""

from __future__ import annotations


def matmul_flops(m: int, n: int, k: int) -> int:
    """A multiply and an add per term: 2mnk."""
    return 2 * m * n * k


def attention_flops(batch: int, seq: int, hidden: int) -> int:
    """Q, K, V and output projections (8bsh^2) plus the two score matmuls (4bs^2h)."""
    return 8 * batch * seq * hidden * hidden + 4 * batch * seq * seq * hidden


def ffn_flops(batch: int, seq: int, hidden: int, ffn: int) -> int:
    """Two dense layers h->ffn->h: 4bsh*ffn, which is the notebook's 16bsh^2 when ffn = 4h."""
    return 4 * batch * seq * hidden * ffn


def layer_forward_flops(batch: int, seq: int, hidden: int, ffn: int, *, cross_attention: bool = False) -> int:
    """One block's forward: 24bsh^2 + 4bs^2h for ffn = 4h; a decoder block adds cross-attention."""
    attention = attention_flops(batch, seq, hidden) * (2 if cross_attention else 1)
    return ffn_flops(batch, seq, hidden, ffn) + attention


def layer_flops(batch: int, seq: int, hidden: int, ffn: int, *, mode: str, cross_attention: bool = False) -> int:
    """Forward, or forward+backward counted as three forwards (backward is two matmuls per forward one)."""
    forward = layer_forward_flops(batch, seq, hidden, ffn, cross_attention=cross_attention)
    return forward * (3 if mode == "fwd+bwd" else 1)


def training_flops_per_token(n_params: int, layers: int, heads: int, head_dim: int, seq: int) -> int:
    """PaLM's 6N + 12*L*H*Q*T: dense weights forward and backward, plus attention scores."""
    return 6 * n_params + 12 * layers * heads * head_dim * seq

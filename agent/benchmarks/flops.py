"""FLOP counts, as the transformers-benchmarks notebooks count them, so results line up with the published table;
and the bytes an LLM decode step must read, for its memory-bandwidth limit."""

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


def decoder_attention_flops(layers: int, heads: int, head_dim: int, batch: int, queries: int, keys: int) -> int:
    """The two score matmuls (QK^T and AV) of every layer, over every query head: 4 * L * b * q * k * (H * Q).

    Causal attention is counted whole, as PaLM and the notebook count it (a causal kernel computes about half).
    """
    return 4 * layers * batch * queries * keys * heads * head_dim


def prefill_flops(n_params: int, layers: int, heads: int, head_dim: int, batch: int, seq: int) -> int:
    """A forward over ``batch`` prompts of ``seq`` tokens, logits at every position: 2N per token plus attention."""
    return 2 * n_params * batch * seq + decoder_attention_flops(layers, heads, head_dim, batch, seq, seq)


def decode_flops(n_params: int, layers: int, heads: int, head_dim: int, batch: int, context: int) -> int:
    """One new token per sequence attending to ``context`` cached positions: 2N per token plus attention."""
    return 2 * n_params * batch + decoder_attention_flops(layers, heads, head_dim, batch, 1, context)


def kv_cache_bytes(layers: int, kv_heads: int, head_dim: int, batch: int, positions: int, element_bytes: int) -> int:
    """Keys and values of every layer and KV head at every position: 2 * L * b * positions * (K * Q) elements."""
    return 2 * layers * batch * positions * kv_heads * head_dim * element_bytes


def decode_step_bytes(weight_bytes: int, cache_bytes: int) -> int:
    """What one decode step must read from memory at least: every weight once, and the whole KV cache it attends to.

    Writes (one position of the cache, the logits) and the embedding rows looked up are a few MB at most: left out.
    """
    return weight_bytes + cache_bytes

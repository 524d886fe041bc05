"""Triton kernels for the lean Llama's small operations on CUDA (``llama_torch.Ops``): one launch each where plain
torch takes several, since at batch 1 a decode step's time goes to the number of kernels, not their bytes.

Imported only on CUDA (``llama_torch.default_ops``); the CPU path is plain torch. Each kernel rounds where
transformers' Llama rounds, so the two paths compute the same function in bf16 too: RMSNorm normalises in fp32,
rounds, then multiplies by the weight; rotary uses the model-dtype cos and sin tables; SiLU rounds before the
product with up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import triton
import triton.language as tl

if TYPE_CHECKING:
    import torch

    from .llama_torch import KVCache


@triton.jit
def _rms_norm(x_ptr, w_ptr, out_ptr, width, eps, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < width
    x = tl.load(x_ptr + row * width + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / width + eps)
    normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * width + cols, (normed * w).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rotary_into_cache(  # type: ignore[no-untyped-def]
    qkv_ptr,
    cos_ptr,
    sin_ptr,
    q_ptr,
    k_ptr,
    v_ptr,
    tokens,
    start,
    heads,
    kv_heads,
    cache_batch_stride,
    cache_pos_stride,
    HALF: tl.constexpr,
    HEADS: tl.constexpr,
):
    """One program per token and ``HEADS`` of its heads (q's, then k's, then v's): q rotated into q_ptr, k rotated
    and v as it is into the cache at the token's position."""
    token = tl.program_id(0)  # batch * tokens + position in the prompt
    head = tl.program_id(1) * HEADS + tl.arange(0, HEADS)[:, None]
    d = tl.arange(0, HALF)[None, :]
    total = heads + 2 * kv_heads
    b = token // tokens
    pos = start + token % tokens
    valid = head < total
    row = qkv_ptr + (token * total + head) * 2 * HALF
    first = tl.load(row + d, mask=valid, other=0.0)
    second = tl.load(row + HALF + d, mask=valid, other=0.0)
    dtype = first.dtype
    cos = tl.load(cos_ptr + pos * HALF + d).to(tl.float32)
    sin = tl.load(sin_ptr + pos * HALF + d).to(tl.float32)
    x1, x2 = first.to(tl.float32), second.to(tl.float32)
    # transformers rounds each product and the sum to the model's dtype.
    out1 = ((x1 * cos).to(dtype).to(tl.float32) - (x2 * sin).to(dtype).to(tl.float32)).to(dtype)
    out2 = ((x2 * cos).to(dtype).to(tl.float32) + (x1 * sin).to(dtype).to(tl.float32)).to(dtype)
    is_q = head < heads
    is_v = valid & (head >= heads + kv_heads)
    is_k = valid & (head >= heads) & (head < heads + kv_heads)
    q_at = q_ptr + (token * heads + head) * 2 * HALF
    tl.store(q_at + d, out1, mask=is_q)
    tl.store(q_at + HALF + d, out2, mask=is_q)
    cache_at = b * cache_batch_stride + pos * cache_pos_stride
    k_at = k_ptr + cache_at + (head - heads) * 2 * HALF
    tl.store(k_at + d, out1, mask=is_k)
    tl.store(k_at + HALF + d, out2, mask=is_k)
    v_at = v_ptr + cache_at + (head - heads - kv_heads) * 2 * HALF
    tl.store(v_at + d, first, mask=is_v)
    tl.store(v_at + HALF + d, second, mask=is_v)


@triton.jit
def _silu_mul(gate_up_ptr, out_ptr, width, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def]
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < width
    gate = tl.load(gate_up_ptr + row * 2 * width + cols, mask=mask, other=0.0)
    up = tl.load(gate_up_ptr + row * 2 * width + width + cols, mask=mask, other=0.0)
    g = gate.to(tl.float32)
    silu = (g / (1.0 + tl.exp(-g))).to(gate.dtype).to(tl.float32)
    tl.store(out_ptr + row * width + cols, (silu * up.to(tl.float32)).to(gate.dtype), mask=mask)


#: Heads one rotary program takes (of q, k and v together): a decode step's 48 of Llama-3-8B are three programs.
ROTARY_HEADS = 16


class TritonOps:
    """``llama_torch.Ops`` as one Triton kernel per operation."""

    name = "triton"

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        import torch

        width = x.shape[-1]
        rows = x.numel() // width
        out = torch.empty_like(x)
        block = triton.next_power_of_2(width)
        _rms_norm[(rows,)](x, weight, out, width, eps, BLOCK=block, num_warps=min(16, max(1, block // 256)))
        return out

    def rotary_into_cache(
        self, qkv: torch.Tensor, cache: KVCache, layer: int, start: int, heads: int, kv_heads: int
    ) -> torch.Tensor:
        import torch

        batch, tokens, width = qkv.shape
        head_dim = width // (heads + 2 * kv_heads)
        q = torch.empty(batch, tokens, heads, head_dim, dtype=qkv.dtype, device=qkv.device)
        keys, values = cache.keys[layer], cache.values[layer]  # (batch, position, KV head, head_dim), contiguous
        grid = (batch * tokens, triton.cdiv(heads + 2 * kv_heads, ROTARY_HEADS))
        _rotary_into_cache[grid](qkv, cache.cos, cache.sin, q, keys, values, tokens, start, heads, kv_heads,
                                 keys.stride(0), keys.stride(1), HALF=head_dim // 2, HEADS=ROTARY_HEADS,
                                 num_warps=2)  # fmt: skip
        return q

    def silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        import torch

        width = gate_up.shape[-1] // 2
        rows = gate_up.numel() // (2 * width)
        out = torch.empty(*gate_up.shape[:-1], width, dtype=gate_up.dtype, device=gate_up.device)
        block = 1024
        _silu_mul[(rows, triton.cdiv(width, block))](gate_up, out, width, BLOCK=block, num_warps=4)
        return out

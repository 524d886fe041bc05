"""Triton kernels for the lean Llama's small operations on CUDA (``llama_torch.Ops``): one launch each where plain
torch takes several, since at batch 1 a decode step's time goes to the number of kernels, not their bytes.

At one row (batch-1 decode) the projections are matrix-vector products bound by reading the weights, and cuBLAS's
kernels for them bring a separate split-K reduction each and cannot take the RMSNorm before them or the SiLU · up
before the down projection. ``_gemv`` does: each program streams ``BLOCK_N`` rows of the weight once, with the
input's prologue (RMSNorm, or SiLU · up) computed on the fly from the L2-resident vector and the residual added in
its epilogue, so a layer is five kernels besides attention: QKV (norm fused), rotary into the cache, the output
projection (residual fused), gate-up (norm fused), down (SiLU · up and the residual fused).

Imported only on CUDA (``llama_torch.default_ops``); the CPU path is plain torch. Each kernel rounds where
transformers' Llama rounds, so the two paths compute the same function in bf16 too: RMSNorm normalises in fp32,
rounds, then multiplies by the weight; rotary uses the model-dtype cos and sin tables; SiLU rounds before the
product with up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import triton
import triton.language as tl

from .llama_ops import TorchOps

if TYPE_CHECKING:
    import torch

    from .kv_cache import KVCache


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


#: _gemv's prologues: the input as it is, RMSNorm of it times a weight, SiLU of its first half times its second half.
PLAIN, RMS_NORM, SILU_MUL = 0, 1, 2


@triton.jit
def _vector(ptr, at, k, EVEN: tl.constexpr):  # type: ignore[no-untyped-def]
    if EVEN:  # noqa: SIM108 (a statement Triton compiles as it is; its ternary support varies by version)
        v = tl.load(ptr + at)
    else:
        v = tl.load(ptr + at, mask=at < k, other=0.0)
    return v


@triton.jit
def _gemv(  # type: ignore[no-untyped-def]
    x_ptr,
    w_ptr,
    out_ptr,
    norm_ptr,
    n,
    eps,
    k: tl.constexpr,
    PROLOGUE: tl.constexpr,
    RESIDUAL: tl.constexpr,
    EVEN: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """out[:n] (+)= w[n, k] @ prologue(x): one program per ``BLOCK_N`` rows of ``w``, each row read once. ``k`` is
    a constant (a model has two: hidden and ffn), so the loop over it is unrolled as the compiler sees fit; ``EVEN``:
    n and k are multiples of the blocks, so no load needs a mask."""
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_K)
    rstd = 1.0
    if PROLOGUE == 1:  # RMSNorm's statistic over the whole vector (k values, from L2), before any row uses it
        squares = tl.zeros([BLOCK_K], dtype=tl.float32)
        for k0 in range(0, k, BLOCK_K):
            x = _vector(x_ptr, k0 + cols, k, EVEN).to(tl.float32)
            squares += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(squares, axis=0) / k + eps)
    acc = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    for k0 in range(0, k, BLOCK_K):
        at = k0 + cols
        if PROLOGUE == 2:  # x holds gate then up, k each; SiLU rounds before the product, as transformers' does
            gate = _vector(x_ptr, at, k, EVEN)
            g = gate.to(tl.float32)
            silu = (g / (1.0 + tl.exp(-g))).to(gate.dtype).to(tl.float32)
            up = _vector(x_ptr + k, at, k, EVEN).to(tl.float32)
            x = (silu * up).to(gate.dtype).to(tl.float32)
        else:
            raw = _vector(x_ptr, at, k, EVEN)
            x = raw.to(tl.float32)
            if PROLOGUE == 1:  # normalised in fp32, rounded, times the weight, rounded: transformers' RMSNorm
                weight = _vector(norm_ptr, at, k, EVEN).to(tl.float32)
                x = ((x * rstd).to(raw.dtype).to(tl.float32) * weight).to(raw.dtype).to(tl.float32)
        tile = w_ptr + rows[:, None] * k + at[None, :]
        if EVEN:  # the weights are read once: evict them first, keep the vector and the KV cache in L2
            w = tl.load(tile, eviction_policy="evict_first")
        else:
            w = tl.load(tile, mask=(rows[:, None] < n) & (at[None, :] < k), other=0.0, eviction_policy="evict_first")
        acc += w.to(tl.float32) * x[None, :]
    y = tl.sum(acc, axis=1)
    if RESIDUAL:
        y += tl.load(out_ptr + rows, mask=rows < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + rows, y.to(out_ptr.dtype.element_ty), mask=rows < n)


@dataclass(frozen=True)
class GemvConfig:
    """How ``_gemv`` tiles a weight: rows per program, columns per step, warps per program."""

    block_n: int = 4
    block_k: int = 2048
    warps: int = 8


#: Chosen on the H200 (benchmarks/gemv_sweep.py, docs/results/h200.md "The lean decode path"); any config computes the
#: same product, so another card only loses speed with it, never correctness.
GEMV = GemvConfig(block_n=4, block_k=2048, warps=8)


#: Heads one rotary program takes (of q, k and v together): a decode step's 48 of Llama-3-8B are three programs.
ROTARY_HEADS = 16


class TritonOps(TorchOps):
    """``llama_torch.Ops`` as one Triton kernel per operation; at one row the projections are ``_gemv`` with the
    operation before them fused, at more rows (or ``gemv`` None) cuBLAS's matmuls after the small kernels."""

    name = "triton"

    def __init__(self, gemv: GemvConfig | None = GEMV) -> None:
        self.gemv = gemv

    def _one_row(self, x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor | None = None) -> bool:
        """Whether ``_gemv`` takes this product: one row, contiguous operands, offsets within 32 bits."""
        return (self.gemv is not None and x.numel() == x.shape[-1] and x.is_contiguous() and weight.is_contiguous()
                and (out is None or out.is_contiguous()) and weight.numel() < 2**31)  # fmt: skip

    def project(
        self, x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, norm: torch.Tensor | None, eps: float,
        prologue: int, residual: bool,
    ) -> None:  # fmt: skip
        """``out`` (+)= ``weight`` @ prologue(``x``) through ``_gemv``, whatever the row count (callers check it)."""
        assert self.gemv is not None
        n, k = weight.shape
        c = self.gemv
        _gemv[(triton.cdiv(n, c.block_n),)](x, weight, out, norm if norm is not None else x, n, eps, k=k,
                                            PROLOGUE=prologue, RESIDUAL=residual,
                                            EVEN=k % c.block_k == 0 and n % c.block_n == 0,
                                            BLOCK_N=c.block_n, BLOCK_K=c.block_k, num_warps=c.warps)  # fmt: skip

    def norm_linear(self, x: torch.Tensor, norm: torch.Tensor, eps: float, weight: torch.Tensor) -> torch.Tensor:
        import torch

        if not self._one_row(x, weight):
            return super().norm_linear(x, norm, eps, weight)
        out = torch.empty(*x.shape[:-1], weight.shape[0], dtype=x.dtype, device=x.device)
        self.project(x, weight, out, norm, eps, RMS_NORM, residual=False)
        return out

    def linear_add_(self, out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> None:
        if not self._one_row(x, weight, out):
            super().linear_add_(out, x, weight)
            return
        self.project(x, weight, out, None, 0.0, PLAIN, residual=True)

    def silu_mul_linear_add_(self, out: torch.Tensor, gate_up: torch.Tensor, weight: torch.Tensor) -> None:
        if not self._one_row(gate_up, weight, out):
            super().silu_mul_linear_add_(out, gate_up, weight)
            return
        self.project(gate_up, weight, out, None, 0.0, SILU_MUL, residual=True)

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

"""The lean Llama's operations but attention, behind one seam (``Ops``): ``TorchOps`` in plain torch (the CPU, and
any device), and ``llama_kernels.TritonOps`` on CUDA, which builds on it. A module of its own so that the Triton
kernels can extend the torch ops without importing the model that uses them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

    from .kv_cache import KVCache


class Ops(Protocol):
    """A layer's operations but attention (torch's SDPA in every implementation): the small ones, and the
    projections with what comes before them (RMSNorm, SiLU · up) and after them (the residual), so that an
    implementation can fuse them."""

    name: str

    def norm_linear(self, x: torch.Tensor, norm: torch.Tensor, eps: float, weight: torch.Tensor) -> torch.Tensor:
        """RMSNorm of ``x`` (times ``norm``) times ``weight`` transposed."""
        ...

    def linear_add_(self, out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> None:
        """``out += x @ weight.T``, in place."""
        ...

    def silu_mul_linear_add_(self, out: torch.Tensor, gate_up: torch.Tensor, weight: torch.Tensor) -> None:
        """``out += silu_mul(gate_up) @ weight.T``, in place."""
        ...

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor: ...

    def rotary_into_cache(
        self, qkv: torch.Tensor, cache: KVCache, layer: int, start: int, heads: int, kv_heads: int
    ) -> torch.Tensor:
        """q rotated, as (batch, tokens, heads, head_dim); k rotated and v stored at ``start`` onwards."""
        ...

    def silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        """SiLU of the first half of the last dimension times the second half."""
        ...


class TorchOps:
    """The small operations in plain torch, rounded where transformers rounds (its bf16 cos and sin tables)."""

    name = "torch"

    def norm_linear(self, x: torch.Tensor, norm: torch.Tensor, eps: float, weight: torch.Tensor) -> torch.Tensor:
        import torch

        return torch.mm(self.rms_norm(x, norm, eps), weight.t())

    def linear_add_(self, out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> None:
        # The residual added by the matmul, in place: an out-of-place addmm first copies its input, which on the H200
        # was a device-to-device memcpy per projection (64 per Llama-3-8B step).
        out.addmm_(x, weight.t())

    def silu_mul_linear_add_(self, out: torch.Tensor, gate_up: torch.Tensor, weight: torch.Tensor) -> None:
        out.addmm_(self.silu_mul(gate_up), weight.t())

    def rms_norm(self, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        import torch

        fused = getattr(torch.nn.functional, "rms_norm", None)  # torch >= 2.4
        if fused is not None:
            out: torch.Tensor = fused(x, (x.shape[-1],), weight, eps)
            return out
        wide = x.float()
        normed = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)
        return weight * normed.to(x.dtype)

    def rotary_into_cache(
        self, qkv: torch.Tensor, cache: KVCache, layer: int, start: int, heads: int, kv_heads: int
    ) -> torch.Tensor:
        import torch

        batch, tokens, _ = qkv.shape
        q, k, v = qkv.view(batch, tokens, heads + 2 * kv_heads, -1).split([heads, kv_heads, kv_heads], dim=2)
        cos = cache.cos[start : start + tokens, None, :]
        sin = cache.sin[start : start + tokens, None, :]

        def rotate(x: torch.Tensor) -> torch.Tensor:
            first, second = x.chunk(2, dim=-1)
            return torch.cat((first * cos - second * sin, second * cos + first * sin), dim=-1)

        cache.keys[layer, :batch, start : start + tokens] = rotate(k)
        cache.values[layer, :batch, start : start + tokens] = v
        return rotate(q)

    def silu_mul(self, gate_up: torch.Tensor) -> torch.Tensor:
        import torch

        gate, up = gate_up.chunk(2, dim=-1)
        out: torch.Tensor = torch.nn.functional.silu(gate) * up
        return out

"""The lean Llama's static KV cache: its own module, so that the ops seam and the kernels name it without importing
the model that uses them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

    from .llama import LlamaShape


@dataclass
class KVCache:
    """Keys and values of every layer at ``length`` positions, laid out as (layer, batch, position, KV head,
    head_dim): flash attention's own layout, so a position's keys are one contiguous write and SDPA reads the
    cache without a copy. ``cos`` and ``sin`` are the rotary tables for those positions, in the model's dtype."""

    keys: torch.Tensor
    values: torch.Tensor
    cos: torch.Tensor
    sin: torch.Tensor

    @property
    def length(self) -> int:
        return int(self.keys.shape[2])


def kv_cache(shape: LlamaShape, batch: int, length: int, dtype: torch.dtype, device: torch.device) -> KVCache:
    """An empty static cache of ``length`` positions for ``batch`` sequences, with its rotary tables."""
    import torch

    size = (shape.layers, batch, length, shape.kv_heads, shape.head_dim)
    inv_freq = 1.0 / shape.rope_theta ** (torch.arange(0, shape.head_dim, 2, dtype=torch.float32) / shape.head_dim)
    angles = torch.outer(torch.arange(length, dtype=torch.float32), inv_freq).to(device)
    return KVCache(
        keys=torch.empty(size, dtype=dtype, device=device),
        values=torch.empty(size, dtype=dtype, device=device),
        cos=angles.cos().to(dtype),
        sin=angles.sin().to(dtype),
    )

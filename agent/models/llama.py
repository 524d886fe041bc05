"""Llama-style decoders built from configs (random weights, nothing downloaded) and their decode step at a fixed
context length, written so that a CUDA graph can replay it.

Two things in transformers 5.x stand in the way of a replayable step. ``StaticCache`` keeps each layer's write
position on the device and advances it at every update, so replaying one captured step would write further and
further along (and past the end); ``StaticDecode`` pins it: every step writes the cache's last position and
attends to all of them. And for a static cache transformers builds an attention mask at every decode step (and,
while a CUDA graph is captured, where it would otherwise skip one), which keeps SDPA off its flash kernel and, in
5.17, copies the KV cache once per query head (``repeat_kv``). ``sdpa_no_mask`` is torch's SDPA with grouped-query
heads and no mask, registered through transformers' ``AttentionInterface`` (models without a mask function get
none): right for how this module calls the model, a prompt from position 0 or one token at the cache's last
position.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported

if TYPE_CHECKING:
    import torch

#: What a measuring child imports before the first case (transformers and the Llama modelling code).
WARM = ("transformers", "transformers.models.llama.modeling_llama")
#: The name ``sdpa_no_mask`` is registered under; results record it as ``sdpa``, the kernel it calls.
ATTENTION = "flopfleet_sdpa"
ELEMENT_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(frozen=True)
class LlamaShape:
    """The dimensions of a Llama-style decoder: grouped-query attention, SwiGLU MLP, RMSNorm, no biases."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    tied: bool  # the LM head shares the embedding table
    max_positions: int
    rope_theta: float = 500000.0  # Llama 3's rotary base (rope scaling, as 3.2's, left out: it costs nothing more)
    norm_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def n_params(self) -> int:
        """Parameters every token multiplies and every decode step reads: all but the embedding table (a lookup of a
        few rows), the LM head included (tied or not: it is a matmul)."""
        attention = 2 * self.hidden * self.heads * self.head_dim + 2 * self.hidden * self.kv_heads * self.head_dim
        layer = attention + 3 * self.hidden * self.ffn + 2 * self.hidden  # q, k, v, o; gate, up, down; two norms
        return self.layers * layer + self.hidden + self.vocab * self.hidden  # final norm, LM head

    @property
    def total_params(self) -> int:
        return self.n_params + (0 if self.tied else self.embedding_params)

    def weight_bytes(self, dtype: str) -> int:
        """Bytes of the weights a forward reads once (``n_params``)."""
        return self.n_params * ELEMENT_BYTES[dtype]

    def memory_bytes(self, dtype: str) -> int:
        """Bytes of every parameter, the embedding table included: what the model takes on the device."""
        return self.total_params * ELEMENT_BYTES[dtype]


#: Meta's published configurations (Llama 3 8B; Llama 3.2 3B and 1B, whose LM head is the embedding table), and a
#: tiny one for the CPU and the tests. Largest first.
SHAPES: dict[str, LlamaShape] = {
    s.name: s
    for s in (
        LlamaShape("llama-3-8b", 4096, 32, 32, 8, 14336, 128256, tied=False, max_positions=8192),
        LlamaShape("llama-3.2-3b", 3072, 28, 24, 8, 8192, 128256, tied=True, max_positions=131072),
        LlamaShape("llama-3.2-1b", 2048, 16, 32, 8, 8192, 128256, tied=True, max_positions=131072),
        LlamaShape("llama-tiny", 64, 2, 4, 2, 256, 1000, tied=False, max_positions=4096),
    )
}
#: The models a device may get, largest first (``fitting``).
BY_SIZE = ("llama-3-8b", "llama-3.2-3b", "llama-3.2-1b")


def fitting(models: tuple[str, ...], memory_bytes: int, dtype: str) -> LlamaShape:
    """The first of ``models`` whose parameters take at most half of ``memory_bytes`` (the other half is for KV
    caches and activations); the last one where none does."""
    shapes = [SHAPES[m] for m in models]
    return next((s for s in shapes if 2 * s.memory_bytes(dtype) <= memory_bytes), shapes[-1])


def build(shape: LlamaShape, dtype: torch.dtype, attn_implementation: str, device: torch.device) -> Any:
    """``LlamaForCausalLM`` from a config, random weights in ``dtype`` on ``device``, for inference only.
    ``sdpa`` is ``sdpa_no_mask``; other implementations are transformers' own."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    config = LlamaConfig(
        hidden_size=shape.hidden,
        intermediate_size=shape.ffn,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        vocab_size=shape.vocab,
        max_position_embeddings=shape.max_positions,
        rope_theta=shape.rope_theta,
        rms_norm_eps=shape.norm_eps,
        tie_word_embeddings=shape.tied,
        attn_implementation=register_attention() if attn_implementation == "sdpa" else attn_implementation,
    )
    with torch.device(device):
        # Made in ``dtype`` directly: built in fp32 and then cast, an 8B model would need 48 GB for a moment.
        try:
            model = LlamaForCausalLM._from_config(config, dtype=dtype)
        except TypeError:  # transformers before 4.56 names it torch_dtype
            model = LlamaForCausalLM._from_config(config, torch_dtype=dtype)
    return model.requires_grad_(False).eval()


def recorded_attention(ran: str) -> str:
    """What a result records for the attention that ran: ``sdpa_no_mask`` calls torch's SDPA."""
    return "sdpa" if ran == ATTENTION else ran


@functools.cache
def register_attention() -> str:
    import transformers

    interface = getattr(transformers, "AttentionInterface", None)
    if interface is None:
        raise Unsupported(f"transformers {transformers.__version__} has no AttentionInterface to register the "
                          "mask-free SDPA with; --attn eager measures its own attention")  # fmt: skip
    interface.register(ATTENTION, sdpa_no_mask)
    return ATTENTION


def native_gqa() -> bool:
    """torch >= 2.5 lets SDPA's kernels read grouped KV heads in place (``enable_gqa``)."""
    import torch

    return tuple(int(part) for part in str(torch.__version__).split("+")[0].split(".")[:2]) >= (2, 5)


def sdpa_no_mask(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention without a mask. Several queries are a prompt starting at position 0: causal over the prompt's own
    keys (the first of a static cache). One query is a token at the cache's last position: every key is its past."""
    import torch

    queries = query.shape[2]
    if queries > 1:
        key, value = key[:, :, :queries], value[:, :, :queries]
    groups = query.shape[1] // key.shape[1]
    extra: dict[str, Any] = {}
    if groups > 1 and native_gqa():
        extra["enable_gqa"] = True
    elif groups > 1:
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, dropout_p=0.0, scale=scaling, is_causal=queries > 1, **extra
    )
    return out.transpose(1, 2).contiguous(), None


def cache_argument(model: Any) -> str:
    """The forward's name for the KV cache: ``cache`` from transformers 5.24, ``past_key_values`` before."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


class StaticDecode:
    """One greedy decode step of ``batch`` sequences at ``context`` positions, the same at every call.

    The static cache holds ``context`` positions, filled with random keys and values (as a prompt would have left
    them; zeros would draw less power) or by a real prompt (``fill``); each step writes position ``context - 1``,
    attends to all of them and puts the argmax token back as the next input, as a generation loop does. Nothing runs
    on the host between steps but the call itself, so a CUDA graph of it replays the whole step.

    Where the write position goes: transformers 5.x keeps it in each cache layer (``cumulative_length``, advanced at
    every update), which this pins to one buffer reset at the start of each step; 4.56-4.57 take ``cache_position``
    from the caller, which is passed as a fixed tensor.
    """

    def __init__(self, model: Any, batch: int, context: int) -> None:
        import torch
        import transformers

        version = transformers.__version__
        static_cache = getattr(transformers, "StaticCache", None)
        if static_cache is None:
            raise Unsupported(f"transformers {version} has no StaticCache")
        config = model.config
        device = model.lm_head.weight.device
        try:
            self.cache = static_cache(config=config, max_cache_len=context)
        except TypeError as exc:  # before 4.56: StaticCache(config, max_batch_size, max_cache_len, device, dtype)
            raise Unsupported(f"transformers {version}: StaticCache takes other arguments ({exc}); this benchmark "
                              "drives the one of 4.56 and later") from exc  # fmt: skip
        layers = getattr(self.cache, "layers", None)
        if not layers or not hasattr(self.cache, "early_initialization"):
            raise Unsupported(f"transformers {version}: StaticCache has no layers to set up ahead")
        head_dim = config.hidden_size // config.num_attention_heads
        self.cache.early_initialization(
            batch_size=batch, num_heads=config.num_key_value_heads, head_dim=head_dim,
            dtype=model.lm_head.weight.dtype, device=device,
        )  # fmt: skip
        for layer in layers:
            layer.keys.normal_()
            layer.values.normal_()
        self.slot = context - 1
        self.model = model
        self.tokens = torch.randint(0, config.vocab_size, (batch, 1), device=device)
        self.position_ids = torch.full((batch, 1), self.slot, dtype=torch.long, device=device)
        self.kwargs: dict[str, Any] = {cache_argument(model): self.cache, "use_cache": True}
        self.positions: torch.Tensor | None = None
        if "cache_position" in inspect.signature(model.forward).parameters:
            self.kwargs["cache_position"] = torch.full((1,), self.slot, dtype=torch.long, device=device)
        elif all(isinstance(getattr(layer, "cumulative_length", None), torch.Tensor) for layer in layers):
            # One buffer for every layer's write position: resetting it is one small kernel per step.
            self.positions = torch.zeros(len(layers), dtype=torch.long, device=device)
            for i, layer in enumerate(layers):
                layer.cumulative_length = self.positions[i]
        else:
            raise Unsupported(f"transformers {version}: StaticCache layers keep their write position where this "
                              "benchmark cannot pin it (neither cache_position nor cumulative_length)")  # fmt: skip

    def _at(self, position: int) -> None:
        if self.positions is not None:
            self.positions.fill_(position)

    def fill(self, prompt: torch.Tensor, token: torch.Tensor) -> None:
        """The cache as a real ``prompt`` of ``context - 1`` tokens per sequence leaves it; ``token`` comes next."""
        import torch

        self._at(0)
        kwargs = dict(self.kwargs)
        if "cache_position" in kwargs:
            kwargs["cache_position"] = torch.arange(prompt.shape[1], device=prompt.device)
        self.model(input_ids=prompt, **kwargs)
        self.tokens.copy_(token)

    def forward(self) -> torch.Tensor:
        """The step's logits for the next token, without taking it."""
        self._at(self.slot)
        logits: torch.Tensor = self.model(input_ids=self.tokens, position_ids=self.position_ids, **self.kwargs).logits
        return logits[:, -1]

    def step(self) -> torch.Tensor:
        self.tokens.copy_(self.forward().argmax(dim=-1, keepdim=True))
        return self.tokens

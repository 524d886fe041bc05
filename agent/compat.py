"""What differs between the torch and transformers releases the agent supports, kept in this one module.

Supported: torch >= 2.2 and transformers >= 4.40 (the ``agent`` extra), tested on the oldest pair by
``make test-oldest``. Each difference is found by the feature itself (a class attribute, a parameter, a registry),
not by a version number, so a release in between takes whichever path it has.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .errors import Unsupported

if TYPE_CHECKING:
    import torch

#: The class attributes saying a family's models have an attention implementation (transformers 4.x, 5.x names).
_SUPPORT_FLAGS = {
    "sdpa": ("_supports_sdpa",),
    "flash_attention_2": ("_supports_flash_attn_2", "_supports_flash_attn"),
    "flash_attention_3": ("_supports_flash_attn_3", "_supports_flash_attn"),
    "flex_attention": ("_supports_flex_attn",),
}
_FAMILY_LABELS = {"bert": "BERT", "gpt2": "GPT-2", "t5": "T5"}


def _pretrained_class(family: str) -> Any:
    if family == "bert":
        from transformers.models.bert.modeling_bert import BertPreTrainedModel

        return BertPreTrainedModel
    if family == "gpt2":
        from transformers.models.gpt2.modeling_gpt2 import GPT2PreTrainedModel

        return GPT2PreTrainedModel
    from transformers.models.t5.modeling_t5 import T5PreTrainedModel

    return T5PreTrainedModel


def _attention_registry() -> Any:
    """transformers' table of attention functions (4.48 and later), or None where modules pick classes instead."""
    try:
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    except ImportError:
        return None
    return ALL_ATTENTION_FUNCTIONS


def attention_implementation(family: str, requested: str) -> str:
    """The implementation to configure for ``family``: the one asked for where this transformers has it.

    sdpa, the default, falls back to eager where the family has no sdpa (BERT before 4.41, GPT-2 before 4.42, T5
    in 4.x and 5.0), and the result records eager (``observe_attention``); any other missing implementation is
    ``Unsupported``, since it was asked for by name.
    """
    import transformers

    if requested == "eager":
        return requested
    flags = _SUPPORT_FLAGS.get(requested, ())
    if any(getattr(_pretrained_class(family), flag, False) for flag in flags):
        if requested.startswith("flash_attention") and _attention_registry() is None:
            _require_flash_attn(requested)
        return requested
    if requested == "sdpa":
        return "eager"
    label = _FAMILY_LABELS.get(family, family)
    raise Unsupported(f"transformers {transformers.__version__} has no {requested} attention for {label}")


def _require_flash_attn(requested: str) -> None:
    """Before the registry, a block built alone meets a missing flash_attn only mid-forward, as a NameError."""
    from transformers.utils import is_flash_attn_2_available

    if not is_flash_attn_2_available():
        raise ImportError(f"{requested} needs the flash_attn package with a CUDA GPU; it is not usable here")


@contextmanager
def observe_attention(requested: str) -> Iterator[Callable[[], str]]:
    """Which attention ran: counts the calls of the requested implementation and reports 'eager' if there were none.

    sdpa is counted at ``torch.nn.functional.scaled_dot_product_attention``, which every transformers release
    calls for it (through the registry or an ``...SdpaAttention`` class); other implementations through the
    registry, and before it by the class the config chose (``attention_implementation`` checked it exists).
    """
    if requested == "eager":
        yield lambda: "eager"
        return
    calls = 0

    def counting(inner: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal calls
            calls += 1
            return inner(*args, **kwargs)

        return counted

    if requested == "sdpa":
        import torch.nn.functional

        inner = torch.nn.functional.scaled_dot_product_attention
        torch.nn.functional.scaled_dot_product_attention = counting(inner)
        try:
            yield lambda: requested if calls else "eager"
        finally:
            torch.nn.functional.scaled_dot_product_attention = inner
        return
    registry = _attention_registry()
    if registry is None or requested not in registry:
        yield lambda: requested if registry is None else "eager"
        return
    wrapped = registry[requested]
    had_override = requested in getattr(registry, "_local_mapping", {})
    registry[requested] = counting(wrapped)
    try:
        yield lambda: requested if calls else "eager"
    finally:
        if had_override:
            registry[requested] = wrapped
        else:
            del registry[requested]


def _accepts(fn: Callable[..., Any], name: str) -> bool:
    return name in inspect.signature(fn).parameters


def block_kwargs(block_class: Callable[..., Any]) -> dict[str, Any]:
    """Constructor arguments a standalone block takes: its layer index where it has one (not T5 or BERT in 4.40)."""
    return {"layer_idx": 0} if _accepts(block_class, "layer_idx") else {}


def forward_kwargs(block: torch.nn.Module, seq_len: int, device: torch.device) -> dict[str, Any]:
    """What a model's stack passes a block besides the hidden states: positions, where the block reads them.

    T5 attention from transformers 4.46 to 5.0 takes its query length from ``cache_position`` when no cache is
    given (a block called without it fails with "'NoneType' object is not subscriptable").
    """
    import torch

    if _accepts(block.forward, "cache_position"):
        return {"cache_position": torch.arange(seq_len, device=device)}
    return {}


def first_tensor(output: Any) -> torch.Tensor:
    """transformers 5 blocks return a tensor, T5 blocks and 4.x blocks a tuple led by the hidden states."""
    tensor: torch.Tensor = output[0] if isinstance(output, (tuple, list)) else output
    return tensor


def scaled_mm(a: torch.Tensor, b: torch.Tensor, scale: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """``torch._scaled_mm`` with per-tensor scales; torch before 2.5 also returns the output's amax."""
    import torch

    out = torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=out_dtype)
    product: torch.Tensor = out[0] if isinstance(out, tuple) else out
    return product


def process_group_kwargs(device: torch.device) -> dict[str, Any]:
    """Binds a GPU rank's communicator to its device at once where torch can (``device_id``, torch 2.3 and later)."""
    import torch.distributed as dist

    return {"device_id": device} if _accepts(dist.init_process_group, "device_id") else {}

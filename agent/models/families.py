"""Transformer shapes and builders: layers and whole models from configs, random weights, no downloads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import compat

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class Shape:
    """The dimensions a FLOP formula needs, and the config that builds them."""

    name: str
    family: str  # bert | gpt2 | t5
    hidden: int
    heads: int
    ffn: int
    layers: int
    vocab: int
    max_positions: int


SHAPES: dict[str, Shape] = {
    s.name: s
    for s in (
        Shape("bert-large", "bert", 1024, 16, 4096, 24, 30522, 512),
        Shape("gpt2-medium", "gpt2", 1024, 16, 4096, 24, 50257, 1024),
        Shape("t5-large", "t5", 1024, 16, 4096, 24, 32128, 512),
        # Tiny shapes for CPU tests and the quick suite: hidden 64, 2 heads.
        Shape("bert-tiny", "bert", 64, 2, 256, 2, 1000, 512),
        Shape("gpt2-tiny", "gpt2", 64, 2, 256, 2, 1000, 128),
        Shape("t5-tiny", "t5", 64, 2, 256, 2, 1000, 512),
    )
}


#: What building each family's models imports (seconds on a GPU host: 12 s for BERT's modules, measured on the
#: H200): a child imports only its run's families, so the health profile does not wait for GPT-2's and T5's.
WARM_BY_FAMILY = {
    family: ("transformers", f"transformers.models.{family}.modeling_{family}") for family in ("bert", "gpt2", "t5")
}


def config(shape: Shape, attn_implementation: str, *, decoder: bool = False) -> Any:
    """A transformers config with the attention implementation set explicitly (5.x falls back to eager).

    The one set is the one asked for where this transformers has it for the family (``compat``).
    """
    from transformers import BertConfig, GPT2Config, T5Config
    from transformers.utils import logging as hf_logging

    # Which attention ran is observed and recorded (observe_attention); transformers' chatter adds nothing.
    hf_logging.set_verbosity_error()
    attn_implementation = compat.attention_implementation(shape.family, attn_implementation)

    if shape.family == "bert":
        return BertConfig(
            hidden_size=shape.hidden,
            num_attention_heads=shape.heads,
            intermediate_size=shape.ffn,
            num_hidden_layers=shape.layers,
            vocab_size=shape.vocab,
            max_position_embeddings=shape.max_positions,
            attn_implementation=attn_implementation,
        )
    if shape.family == "gpt2":
        return GPT2Config(
            bos_token_id=shape.vocab - 1,
            eos_token_id=shape.vocab - 1,
            n_embd=shape.hidden,
            n_head=shape.heads,
            n_inner=shape.ffn,
            n_layer=shape.layers,
            vocab_size=shape.vocab,
            n_positions=shape.max_positions,
            attn_implementation=attn_implementation,
        )
    return T5Config(
        d_model=shape.hidden,
        d_kv=shape.hidden // shape.heads,
        d_ff=shape.ffn,
        num_heads=shape.heads,
        num_layers=shape.layers,
        vocab_size=shape.vocab,
        use_cache=False,
        is_decoder=decoder,
        is_encoder_decoder=False,
        attn_implementation=attn_implementation,
    )


def block(shape: Shape, kind: str, attn_implementation: str) -> torch.nn.Module:
    """One standalone block, as the transformers-benchmarks notebook builds it."""
    block_class: Any
    if kind == "bert_layer":
        from transformers.models.bert.modeling_bert import BertLayer

        block_class = BertLayer
    elif kind == "gpt2_block":
        from transformers.models.gpt2.modeling_gpt2 import GPT2Block

        block_class = GPT2Block
    else:
        from transformers.models.t5.modeling_t5 import T5Block

        block_class = T5Block
    built = config(shape, attn_implementation, decoder=kind == "t5_decoder_block")
    module: torch.nn.Module = block_class(built, **compat.block_kwargs(block_class))
    return module


def language_model(shape: Shape, attn_implementation: str) -> torch.nn.Module:
    """The whole model a training step runs: BERT with an MLM head, GPT-2 with an LM head."""
    if shape.family == "bert":
        from transformers import BertForMaskedLM

        model: torch.nn.Module = BertForMaskedLM(config(shape, attn_implementation))
    elif shape.family == "gpt2":
        from transformers import GPT2LMHeadModel

        model = GPT2LMHeadModel(config(shape, attn_implementation))
    else:
        raise ValueError(f"no training model for {shape.name}")
    return model


def dense_params(model: torch.nn.Module) -> int:
    """Parameters that cost 6 FLOPs per token: all but embedding lookups, except a tied LM head (a matmul)."""
    import torch

    output_embeddings: Any = getattr(model, "get_output_embeddings", None)
    head = output_embeddings() if output_embeddings is not None else None
    keep = {id(head.weight)} if head is not None else set()
    skip = {
        id(p)
        for module in model.modules()
        if isinstance(module, torch.nn.Embedding)
        for p in module.parameters()
        if id(p) not in keep
    }
    return sum(p.numel() for p in model.parameters() if id(p) not in skip)


#: Which attention ran (the version-dependent part lives in ``compat``); kept here for the model families' callers.
observe_attention = compat.observe_attention

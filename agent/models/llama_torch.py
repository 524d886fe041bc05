"""A Llama decoder in plain torch beside transformers' ``LlamaForCausalLM``: the same function of the same weights,
written for decode at the memory-bandwidth limit.

Why: transformers' layer code launches about 1,591 kernels per Llama-3-8B decode step (norms, rotary, casts and
adds one by one), and at batch 1 the step is bound by their number, not by the 15 GB of weights it reads
(docs/results/h200.md, "LLM inference"). Here a layer is a handful of kernels: one RMSNorm, one fused QKV matmul,
rotary on q and k written into the static KV cache with v, SDPA over the grouped KV heads in place (no
``repeat_kv``), the output projection with the residual added by the matmul (``addmm_``), a second RMSNorm, one
fused gate-up matmul, SiLU times up, the down projection adding the residual. Everything but attention comes from
an ``Ops`` seam (``llama_ops``): ``TorchOps`` (plain torch: the CPU, and any device) or, on CUDA,
``llama_kernels.TritonOps`` (one Triton kernel per small operation, and at batch 1 each projection one matrix-vector
kernel with the RMSNorm or SiLU · up before it and the residual after it fused in: five kernels a layer besides
attention).

Parameters load from (and their layout is derived from) transformers' state dict (``load_transformers``), so the
path is checked against transformers on the same weights; random weights are drawn as transformers draws them.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

from ..errors import Unsupported
from .kv_cache import KVCache, kv_cache
from .llama import LlamaShape, native_gqa
from .llama_ops import Ops, TorchOps

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)
IMPLEMENTATIONS = ("sdpa", "eager")
#: transformers' initializer_range: the spread of its random weights.
INIT_STD = 0.02


class LeanLlama:
    """Llama-3-style decoder: parameters in fused layouts, a forward over a static KV cache from a start position."""

    def __init__(
        self,
        shape: LlamaShape,
        dtype: torch.dtype,
        device: torch.device,
        *,
        ops: Ops | None = None,
        attn_implementation: str = "sdpa",
    ) -> None:
        import torch

        if attn_implementation not in IMPLEMENTATIONS:
            raise Unsupported(f"the plain-torch Llama has {' and '.join(IMPLEMENTATIONS)} attention, not "
                              f"{attn_implementation}")  # fmt: skip
        self.shape, self.dtype, self.device = shape, dtype, device
        self.ops: Ops = ops or TorchOps()
        self.attn_implementation = attn_implementation
        h, d, f = shape.hidden, shape.head_dim, shape.ffn
        qkv = (shape.heads + 2 * shape.kv_heads) * d

        def weight(*size: int) -> torch.Tensor:
            return torch.empty(size, dtype=dtype, device=device).normal_(0.0, INIT_STD)

        def ones() -> torch.Tensor:
            return torch.ones(h, dtype=dtype, device=device)

        self.embed = weight(shape.vocab, h)
        self.layers = [
            {"attn_norm": ones(), "qkv": weight(qkv, h), "o": weight(h, shape.heads * d), "mlp_norm": ones(),
             "gate_up": weight(2 * f, h), "down": weight(h, f)}
            for _ in range(shape.layers)
        ]  # fmt: skip
        self.norm = ones()
        self.lm_head = self.embed if shape.tied else weight(shape.vocab, h)

    def parameters(self) -> list[torch.Tensor]:
        """Every distinct tensor of weights (a tied LM head once)."""
        own = [self.embed, *(t for layer in self.layers for t in layer.values()), self.norm]
        return own if self.shape.tied else [*own, self.lm_head]

    def load_transformers(self, state: dict[str, torch.Tensor]) -> None:
        """Take the weights of transformers' ``LlamaForCausalLM`` (its state dict: a checkpoint's names), fusing q, k
        and v, and gate and up, into one matrix each."""
        import torch

        def get(name: str) -> torch.Tensor:
            return state[name].to(device=self.device, dtype=self.dtype)

        with torch.no_grad():
            self.embed.copy_(get("model.embed_tokens.weight"))
            for i, layer in enumerate(self.layers):
                p = f"model.layers.{i}."
                layer["attn_norm"].copy_(get(p + "input_layernorm.weight"))
                layer["qkv"].copy_(torch.cat([get(p + f"self_attn.{n}_proj.weight") for n in "qkv"]))
                layer["o"].copy_(get(p + "self_attn.o_proj.weight"))
                layer["mlp_norm"].copy_(get(p + "post_attention_layernorm.weight"))
                layer["gate_up"].copy_(torch.cat([get(p + f"mlp.{n}_proj.weight") for n in ("gate", "up")]))
                layer["down"].copy_(get(p + "mlp.down_proj.weight"))
            self.norm.copy_(get("model.norm.weight"))
            if not self.shape.tied:
                self.lm_head.copy_(get("lm_head.weight"))

    def cache(self, batch: int, length: int) -> KVCache:
        return kv_cache(self.shape, batch, length, self.dtype, self.device)

    def forward(self, tokens: torch.Tensor, cache: KVCache, start: int) -> torch.Tensor:
        """Logits at every position of ``tokens`` (batch, n), which sit at ``start`` onwards: a prompt from position
        0, or one token per sequence anywhere (attending to the cache up to and including its own position)."""
        import torch

        s, ops = self.shape, self.ops
        batch, n = tokens.shape
        if n > 1 and start != 0:
            raise ValueError("several tokens at once start at position 0 (a prompt); later ones come one at a time")
        if start + n > cache.length:
            raise ValueError(f"positions up to {start + n} do not fit a cache of {cache.length}")
        x = torch.nn.functional.embedding(tokens, self.embed).view(batch * n, s.hidden)
        for i, layer in enumerate(self.layers):
            qkv = ops.norm_linear(x, layer["attn_norm"], s.norm_eps, layer["qkv"]).view(batch, n, -1)
            q = ops.rotary_into_cache(qkv, cache, i, start, s.heads, s.kv_heads)
            ops.linear_add_(x, self._attend(q, cache, i, batch, start + n), layer["o"])
            gate_up = ops.norm_linear(x, layer["mlp_norm"], s.norm_eps, layer["gate_up"])
            ops.silu_mul_linear_add_(x, gate_up, layer["down"])
        logits = ops.norm_linear(x, self.norm, s.norm_eps, self.lm_head)
        return logits.view(batch, n, s.vocab)

    def _attend(self, q: torch.Tensor, cache: KVCache, layer: int, batch: int, end: int) -> torch.Tensor:
        """q (batch, n, heads, d) over the cache's first ``end`` positions; (batch * n, heads * d) out. Several
        queries are a prompt from position 0: causal."""
        import torch

        n = q.shape[1]
        query = q.transpose(1, 2)
        keys = cache.keys[layer, :batch, :end].transpose(1, 2)
        values = cache.values[layer, :batch, :end].transpose(1, 2)
        groups = self.shape.heads // self.shape.kv_heads
        scale = self.shape.head_dim**-0.5
        if self.attn_implementation == "eager":
            out = _eager_attention(query, keys, values, groups, scale)
        else:
            extra: dict[str, Any] = {}
            if groups > 1 and native_gqa():
                extra["enable_gqa"] = True
            elif groups > 1:
                keys, values = keys.repeat_interleave(groups, dim=1), values.repeat_interleave(groups, dim=1)
            # Looked up at the call, so that observe_attention counts it as it does for transformers.
            out = torch.nn.functional.scaled_dot_product_attention(query, keys, values, is_causal=n > 1, scale=scale,
                                                                    **extra)  # fmt: skip
        return out.transpose(1, 2).reshape(batch * n, -1)


def _eager_attention(
    query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, groups: int, scale: float
) -> torch.Tensor:
    """Softmax of the scores in fp32, as transformers' eager attention; each KV head serves its group of query heads
    by broadcasting, not by a copy."""
    import torch

    batch, heads, n, d = query.shape
    grouped = query.reshape(batch, heads // groups, groups, n, d)
    scores = torch.matmul(grouped, keys.unsqueeze(2).transpose(-1, -2)) * scale
    if n > 1:
        scores = scores + torch.full((n, n), float("-inf"), device=query.device).triu(1)
    weights = torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(weights, values.unsqueeze(2)).reshape(batch, heads, n, d)


def default_ops(shape: LlamaShape, dtype: torch.dtype, device: torch.device) -> Ops:
    """The Triton kernels on CUDA where Triton imports and they compute what the torch ops compute at this shape (a
    kernel that fails to build, or builds wrong, is never measured: the path falls back to torch ops, and says so in
    the results' ``kernels``); plain torch everywhere else."""
    if device.type != "cuda":
        return TorchOps()
    try:
        from .llama_kernels import TritonOps

        triton_ops: Ops = TritonOps()
        wrong = differences(triton_ops, TorchOps(), shape, dtype, device)
    except Exception as exc:  # Triton missing, or a kernel its compiler rejects on this machine
        log.warning("the lean Llama uses torch ops: its Triton kernels failed (%s: %s)", type(exc).__name__, exc)
        return TorchOps()
    if wrong:
        log.warning("the lean Llama uses torch ops: its Triton kernels differ from them in %s", ", ".join(wrong))
        return TorchOps()
    return triton_ops


def differences(ops: Ops, reference: Ops, shape: LlamaShape, dtype: torch.dtype, device: torch.device) -> list[str]:
    """The operations where ``ops`` and ``reference`` disagree beyond ``dtype``'s rounding, on random inputs of the
    model's widths (a prompt of a few tokens, then one token further on)."""
    import torch

    tol = 1e-5 if dtype == torch.float32 else 2e-2
    h, d, f = shape.hidden, shape.head_dim, shape.ffn

    def far(a: torch.Tensor, b: torch.Tensor) -> bool:
        return not bool(((a.float() - b.float()).norm() <= tol * b.float().norm()).item())

    wrong = []
    x, w = torch.randn(3, h, device=device, dtype=dtype), torch.randn(h, device=device, dtype=dtype)
    if far(ops.rms_norm(x, w, shape.norm_eps), reference.rms_norm(x, w, shape.norm_eps)):
        wrong.append("rms_norm")
    gate_up = torch.randn(3, 2 * f, device=device, dtype=dtype)
    if far(ops.silu_mul(gate_up), reference.silu_mul(gate_up)):
        wrong.append("silu_mul")
    # The projections at one row (batch-1 decode, where they may be fused) and at three, at the model's widths, with
    # 64 and 40 output rows (a multiple of every tile, and of none) standing for the weight's.
    for rows, outputs in ((1, 64), (1, 40), (3, 40)):
        one, gated = x[:rows].contiguous(), gate_up[:rows].contiguous()
        weight = torch.randn(outputs, h, device=device, dtype=dtype)
        down = torch.randn(outputs, f, device=device, dtype=dtype)
        where = f"at {rows} row(s) x {outputs}"
        if far(ops.norm_linear(one, w, shape.norm_eps, weight), reference.norm_linear(one, w, shape.norm_eps, weight)):
            wrong.append(f"norm_linear {where}")
        residual = torch.randn(rows, outputs, device=device, dtype=dtype)
        mine, theirs = residual.clone(), residual.clone()
        ops.linear_add_(mine, one, weight)
        reference.linear_add_(theirs, one, weight)
        if far(mine, theirs):
            wrong.append(f"linear_add_ {where}")
        mine, theirs = residual.clone(), residual.clone()
        ops.silu_mul_linear_add_(mine, gated, down)
        reference.silu_mul_linear_add_(theirs, gated, down)
        if far(mine, theirs):
            wrong.append(f"silu_mul_linear_add_ {where}")
    caches = [kv_cache(dataclasses.replace(shape, layers=1), 2, 8, dtype, device) for _ in range(2)]
    for start, tokens in ((0, 3), (5, 1)):
        qkv = torch.randn(2, tokens, (shape.heads + 2 * shape.kv_heads) * d, device=device, dtype=dtype)
        mine, theirs = (o.rotary_into_cache(qkv, c, 0, start, shape.heads, shape.kv_heads)
                        for o, c in zip((ops, reference), caches, strict=True))  # fmt: skip
        end = start + tokens
        pairs = [(mine, theirs)] + [(getattr(caches[0], n)[0, :, start:end], getattr(caches[1], n)[0, :, start:end])
                                    for n in ("keys", "values")]  # fmt: skip
        if any(far(a, b) for a, b in pairs):
            wrong.append(f"rotary_into_cache at {start}")
    return wrong


class LeanDecode:
    """``llama.StaticDecode`` for the lean model: one greedy step of ``batch`` sequences at ``context`` positions,
    the same at every call (it writes the cache's last position and attends to all of them), so that a CUDA graph of
    it replays the whole step. The cache starts with random keys and values, or a real prompt's (``fill``)."""

    def __init__(self, model: LeanLlama, batch: int, context: int) -> None:
        import torch

        self.model = model
        self.cache = model.cache(batch, context)
        self.cache.keys.normal_()
        self.cache.values.normal_()
        self.slot = context - 1
        self.tokens = torch.randint(0, model.shape.vocab, (batch, 1), device=model.device)

    def fill(self, prompt: torch.Tensor, token: torch.Tensor) -> None:
        """The cache as a real ``prompt`` of ``context - 1`` tokens per sequence leaves it; ``token`` comes next."""
        self.model.forward(prompt, self.cache, 0)
        self.tokens.copy_(token)

    def forward(self) -> torch.Tensor:
        """The step's logits for the next token, without taking it."""
        return self.model.forward(self.tokens, self.cache, self.slot)[:, -1]

    def step(self) -> torch.Tensor:
        import torch

        return torch.argmax(self.forward(), dim=-1, keepdim=True, out=self.tokens)

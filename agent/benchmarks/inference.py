"""LLM inference: prefill and decode of a Llama-style decoder (random weights), against what the card could do.

Two implementations of the same model, each result saying which (``implementation``): transformers'
``LlamaForCausalLM``, what its users get, and the lean plain-torch decoder of ``llama_torch`` (fused projections,
a few kernels per layer: on CUDA Triton's, where it imports), what the card can do.

Prefill (a batch of prompts, logits at every position) is compute-bound: TFLOPS with 2N per token plus attention.
Decode (one token per sequence, static KV cache) is bound by memory: each step must read every weight and the whole
KV cache, and those bytes over the step's time are compared with the datasheet bandwidth (``peak_fraction``).
The device gets the largest model whose weights fit in half its memory (``llama.fitting``). Decode steps are
replayed as CUDA graphs by the timer (``llama.StaticDecode`` and ``llama_torch.LeanDecode`` make a step replayable),
so the host's pace of launching kernels is not measured; where capture fails the result says ``launch_bound``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from schemas import Flag, InferenceMetrics, InferenceParams
from schemas.results import AttentionImplementation, InferenceImplementation

from ..devices.target import Target
from ..errors import Unsupported
from ..models import families, llama, llama_torch
from .base import Benchmark, Case, Context, Outcome
from .flops import decode_flops, decode_step_bytes, kv_cache_bytes, prefill_flops

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class InferenceGrid:
    prefill: tuple[tuple[int, int], ...] = ()  # (batch, prompt tokens)
    decode_batches: tuple[int, ...] = ()
    context: int = 1024  # decode: the positions the static KV cache holds and each step attends to
    models: tuple[str, ...] = llama.BY_SIZE  # the first whose weights fit in half the device's memory
    dtypes: tuple[str, ...] = ("bf16", "fp16")  # the first the device supports
    attn_implementation: AttentionImplementation = "sdpa"
    #: Each runs every cell, in this order (one model on the device at a time).
    implementations: tuple[InferenceImplementation, ...] = ("transformers",)

    def __post_init__(self) -> None:
        unknown = [m for m in self.models if m not in llama.SHAPES] + [
            d for d in self.dtypes if d not in llama.ELEMENT_BYTES
        ]
        unknown += [i for i in self.implementations if i not in IMPLEMENTATIONS]
        if unknown or not self.models or not self.dtypes or not self.implementations:
            raise ValueError(f"inference grid: unknown {unknown}; models from {sorted(llama.SHAPES)}, dtypes from "
                             f"{sorted(llama.ELEMENT_BYTES)}, implementations from {IMPLEMENTATIONS}")  # fmt: skip


IMPLEMENTATIONS: tuple[InferenceImplementation, ...] = ("transformers", "torch")


#: A prefill of this many tokens or more keeps the GPU busy far longer than the host takes to launch it (an 8 x 2048
#: prefill of Llama-3-8B: 0.4-0.5 s against tens of ms of launches on the H200), so a graph would only add its capture
#: (transformers' 8 x 2048 cell took 3.6 s graphed, 2.1 s not); shorter ones are left to the timer, which graphs them
#: where the host is slow (1 x 512 runs twice as fast graphed).
LONG_PREFILL_TOKENS = 8192


def graphable(p: InferenceParams) -> bool:
    return p.phase == "decode" or p.batch * p.seq_len < LONG_PREFILL_TOKENS


class InferenceBenchmark(Benchmark[InferenceGrid]):
    NAME = "inference"
    KIND = "inference"
    WARM = llama.WARM
    DESCRIPTION = (
        "Llama-3-8B-shaped decoder (smaller where memory is short): prefill TFLOPS, decode tokens/s and its "
        "fraction of the memory bandwidth"
    )
    Grid = InferenceGrid

    def __init__(self, grid: InferenceGrid) -> None:
        super().__init__(grid)
        self._built: tuple[tuple[str, ...], Any] | None = None

    def cases(self, target: Target) -> list[Case]:
        g = self.grid
        dtype = next((d for d in g.dtypes if target.supports(d)), g.dtypes[0])
        shape = llama.fitting(g.models, target.total_memory, dtype)
        cells = [("prefill", b, s) for b, s in g.prefill] + [("decode", b, g.context) for b in g.decode_batches]
        cases = []
        for implementation in g.implementations:
            for phase, batch, seq in cells:
                params = self._params(shape, dtype, phase, batch, seq, implementation)
                what = f"s={seq}" if phase == "prefill" else f"ctx={seq}"
                whose = " (plain torch)" if implementation == "torch" else ""
                cases.append(Case(label=f"{shape.name} {phase} b={batch} {what}{whose}", params=params))
        return cases

    def warm_for(self, case: Case) -> tuple[str, ...]:
        """The lean path is plain torch (and Triton): transformers' modules are for transformers' model alone."""
        implementation = getattr(case.params, "implementation", "transformers")
        return () if implementation == "torch" else self.WARM

    def _params(
        self, shape: llama.LlamaShape, dtype: str, phase: str, batch: int, seq: int, implementation: str
    ) -> InferenceParams:
        dims = (shape.n_params, shape.layers, shape.heads, shape.head_dim, batch, seq)
        weights = shape.weight_bytes(dtype)
        cache = None
        if phase == "decode":
            cache = kv_cache_bytes(shape.layers, shape.kv_heads, shape.head_dim, batch, seq, llama.ELEMENT_BYTES[dtype])
        return InferenceParams(
            model=shape.name,
            phase=phase,  # type: ignore[arg-type]
            batch=batch,
            seq_len=seq,
            dtype=dtype,  # type: ignore[arg-type]
            layers=shape.layers,
            hidden=shape.hidden,
            heads=shape.heads,
            kv_heads=shape.kv_heads,
            ffn=shape.ffn,
            vocab=shape.vocab,
            n_params=shape.n_params,
            weight_bytes=weights,
            kv_cache_bytes=cache,
            flops_per_call=prefill_flops(*dims) if phase == "prefill" else decode_flops(*dims),
            bytes_per_call=decode_step_bytes(weights, cache) if cache is not None else None,
            attn_implementation=self.grid.attn_implementation,
            implementation=implementation,  # type: ignore[arg-type]
        )

    def _model(self, p: InferenceParams, ctx: Context) -> Any:
        """Build the model once per implementation, shape, dtype and device; later cases reuse it."""
        key = (p.implementation, p.model, p.dtype, p.attn_implementation, ctx.target.label)
        if self._built is None or self._built[0] != key:
            self._built = None
            ctx.free_memory()
            shape, dtype, device = llama.SHAPES[p.model], ctx.target.torch_dtype(p.dtype), ctx.target.torch_device()
            if p.implementation == "torch":
                ops = llama_torch.default_ops(shape, dtype, device)
                model: Any = llama_torch.LeanLlama(shape, dtype, device, ops=ops,
                                                   attn_implementation=p.attn_implementation)  # fmt: skip
            else:
                model = llama.build(shape, dtype, p.attn_implementation, device)
            self._built = (key, model)
        return self._built[1]

    def run(self, case: Case, ctx: Context) -> Outcome:
        import torch

        p = case.params
        assert isinstance(p, InferenceParams)
        reason = ctx.target.unsupported_reason(p.dtype)
        if reason:
            raise Unsupported(reason)
        shape = llama.SHAPES[p.model]
        if p.seq_len > shape.max_positions:
            raise ValueError(f"seq_len {p.seq_len} exceeds {shape.name}'s {shape.max_positions} positions")
        model = self._model(p, ctx)
        lean = p.implementation == "torch"
        requested = llama.ATTENTION if p.attn_implementation == "sdpa" and not lean else p.attn_implementation
        with torch.no_grad():
            if p.phase == "prefill":
                ids = torch.randint(0, shape.vocab, (p.batch, p.seq_len), device=ctx.target.torch_device())
                call = _lean_prefill(model, ids) if lean else _prefill(model, ids)
            else:
                decode = llama_torch.LeanDecode(model, p.batch, p.seq_len) if lean else llama.StaticDecode(
                    model, p.batch, p.seq_len)  # fmt: skip
                call = decode.step
            try:
                ctx.target.reset_peak_memory()
                with families.observe_attention(requested) as ran:
                    timed = ctx.measure(call, graphable=graphable(p))
                peak_memory = ctx.target.peak_memory_bytes()
            finally:
                del call
                if p.phase == "decode":  # its KV cache and the graph's memory go back at once, for the next case
                    del decode
                    ctx.target.empty_cache()
        seconds = timed.stats.median_s
        tflops = p.flops_per_call / seconds / 1e12
        if p.phase == "prefill":
            metrics = InferenceMetrics(tokens_per_s=p.batch * p.seq_len / seconds, tflops=tflops, ttft_s=seconds,
                                       peak_memory_bytes=peak_memory)  # fmt: skip
        else:
            assert p.bytes_per_call is not None
            metrics = InferenceMetrics(
                tokens_per_s=p.batch / seconds,
                tflops=tflops,
                tpot_s=seconds,
                tpot_p90_s=max(timed.percentile(90), seconds),
                gbps=p.bytes_per_call / seconds / 1e9,
                peak_memory_bytes=peak_memory,
            )
        update: dict[str, Any] = {"attn_implementation": llama.recorded_attention(ran())}
        if lean:
            update["kernels"] = model.ops.name
        refined = p.model_copy(update=update)
        flags: tuple[Flag, ...] = ("launch_bound",) if timed.launch_bound else ()
        return Outcome(metrics=metrics, timing=timed.stats, params=refined, flags=flags)

    def close(self) -> None:
        self._built = None


def _prefill(model: Any, ids: torch.Tensor) -> Callable[[], object]:
    def call() -> object:
        return model(input_ids=ids, use_cache=False).logits

    return call


def _lean_prefill(model: llama_torch.LeanLlama, ids: torch.Tensor) -> Callable[[], object]:
    """The prompts' logits at every position; their keys and values go to a cache of the prompts' length."""
    cache = model.cache(*ids.shape)

    def call() -> object:
        return model.forward(ids, cache, 0)

    return call

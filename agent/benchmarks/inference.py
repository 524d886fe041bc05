"""LLM inference: prefill and decode of a Llama-style decoder (random weights), against what the card could do.

Prefill (a batch of prompts, logits at every position) is compute-bound: TFLOPS with 2N per token plus attention.
Decode (one token per sequence, static KV cache) is bound by memory: each step must read every weight and the whole
KV cache, and those bytes over the step's time are compared with the datasheet bandwidth (``peak_fraction``).
The device gets the largest model whose weights fit in half its memory (``llama.fitting``). Decode steps are
replayed as CUDA graphs by the timer (``llama.StaticDecode`` makes a step replayable), so the host's pace of
launching kernels is not measured; where capture fails the result says ``launch_bound``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from schemas import Flag, InferenceMetrics, InferenceParams
from schemas.results import AttentionImplementation

from .. import llama, models
from ..errors import Unsupported
from ..flops import decode_flops, decode_step_bytes, kv_cache_bytes, prefill_flops
from ..target import Target
from ..timing import TimingPolicy
from .base import Benchmark, Case, Context, Outcome


@dataclass(frozen=True)
class InferenceGrid:
    prefill: tuple[tuple[int, int], ...] = ()  # (batch, prompt tokens)
    decode_batches: tuple[int, ...] = ()
    context: int = 1024  # decode: the positions the static KV cache holds and each step attends to
    models: tuple[str, ...] = llama.BY_SIZE  # the first whose weights fit in half the device's memory
    dtypes: tuple[str, ...] = ("bf16", "fp16")  # the first the device supports
    attn_implementation: AttentionImplementation = "sdpa"

    def __post_init__(self) -> None:
        unknown = [m for m in self.models if m not in llama.SHAPES] + [
            d for d in self.dtypes if d not in llama.ELEMENT_BYTES
        ]
        if unknown or not self.models or not self.dtypes:
            raise ValueError(f"inference grid: unknown {unknown}; models from {sorted(llama.SHAPES)}, dtypes from "
                             f"{sorted(llama.ELEMENT_BYTES)}")  # fmt: skip


def long_calls(policy: TimingPolicy) -> TimingPolicy:
    """A prefill of thousands of tokens takes tenths of a second: one warm-up call and three repeats suffice."""
    return replace(policy, min_warmup=1, min_repeats=min(policy.min_repeats, 3), batch=min(policy.batch, 3))


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
        self._built: tuple[tuple[str, str, str, str], Any] | None = None

    def cases(self, target: Target) -> list[Case]:
        g = self.grid
        dtype = next((d for d in g.dtypes if target.supports(d)), g.dtypes[0])
        shape = llama.fitting(g.models, target.total_memory, dtype)
        cells = [("prefill", b, s) for b, s in g.prefill] + [("decode", b, g.context) for b in g.decode_batches]
        cases = []
        for phase, batch, seq in cells:
            params = self._params(shape, dtype, phase, batch, seq)
            what = f"s={seq}" if phase == "prefill" else f"ctx={seq}"
            cases.append(Case(label=f"{shape.name} {phase} b={batch} {what}", params=params))
        return cases

    def _params(self, shape: llama.LlamaShape, dtype: str, phase: str, batch: int, seq: int) -> InferenceParams:
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
        )

    def _model(self, p: InferenceParams, ctx: Context) -> Any:
        """Build the model once per shape, dtype and device; later cases reuse it."""
        key = (p.model, p.dtype, p.attn_implementation, ctx.target.label)
        if self._built is None or self._built[0] != key:
            self._built = None
            ctx.free_memory()
            model = llama.build(llama.SHAPES[p.model], ctx.target.torch_dtype(p.dtype), p.attn_implementation,
                                ctx.target.torch_device())  # fmt: skip
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
        requested = llama.ATTENTION if p.attn_implementation == "sdpa" else p.attn_implementation
        with torch.no_grad():
            if p.phase == "prefill":
                ids = torch.randint(0, shape.vocab, (p.batch, p.seq_len), device=ctx.target.torch_device())

                def call() -> object:
                    return model(input_ids=ids, use_cache=False).logits

                policy = long_calls(ctx.policy)
            else:
                decode = llama.StaticDecode(model, p.batch, p.seq_len)
                call, policy = decode.step, ctx.policy
            try:
                ctx.target.reset_peak_memory()
                with models.observe_attention(requested) as ran:
                    timed = ctx.measure(call, policy=policy)
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
        refined = p.model_copy(update={"attn_implementation": llama.recorded_attention(ran())})
        flags: tuple[Flag, ...] = ("launch_bound",) if timed.launch_bound else ()
        return Outcome(metrics=metrics, timing=timed.stats, params=refined, flags=flags)

    def close(self) -> None:
        self._built = None

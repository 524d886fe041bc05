"""A whole model's training step (forward, backward, AdamW step) at the largest batch that fits.

Reports samples/s, tokens/s, achieved TFLOPS with PaLM's 6N + 12LHQT FLOPs per token, MFU against the card's
datasheet peak for the precision used, and peak memory. The batch search walks down from a cap, catching
out-of-memory, so a small card finds its batch without crashing the suite.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from schemas import TrainingMetrics, TrainingParams
from schemas.results import AttentionImplementation

from .. import compat
from ..devices.physics import peak_tflops
from ..devices.target import Target
from ..errors import is_oom
from ..models import families
from .base import Benchmark, Case, Context, Outcome
from .flops import training_flops_per_token

TASKS = {"bert": "mlm", "gpt2": "clm"}


@dataclass(frozen=True)
class TrainingGrid:
    model: str
    seq_len: int
    batch_cap: int
    search: bool = True  # False: run exactly batch_cap
    attn_implementation: AttentionImplementation = "sdpa"


def dense_params(shape: families.Shape) -> int:
    """``families.dense_params`` of the family's language model, from its shape alone: planning a run must not import
    transformers in the agent's process (11 s on the H200, during which no case could start). Each block has four
    attention projections and two MLP matrices with biases, two layer norms (4h^2 + 2hf + 9h + f); the tied LM head
    counts once (V h); BERT adds its embedding norm, the MLM head's transform and norm, and the output bias."""
    h, f = shape.hidden, shape.ffn
    blocks = shape.layers * (4 * h * h + 2 * h * f + 9 * h + f)
    if shape.family == "bert":
        return shape.vocab * h + 2 * h + blocks + (h * h + h + 2 * h) + shape.vocab
    if shape.family == "gpt2":
        return shape.vocab * h + blocks + 2 * h
    raise ValueError(f"no training model for {shape.name}")


def precision_for(target: Target) -> str:
    """bf16 autocast where the device has fast bf16, else plain fp32."""
    return "bf16-autocast" if target.autocast_dtype() == "bf16" else "fp32"


class _TrainingBenchmark(Benchmark[TrainingGrid]):
    KIND = "training"
    Grid = TrainingGrid

    def cases(self, target: Target) -> list[Case]:
        shape = families.SHAPES[self.grid.model]
        n_params = dense_params(shape)
        params = TrainingParams(
            model=shape.name,
            task=TASKS[shape.family],  # type: ignore[arg-type]
            batch=self.grid.batch_cap,
            seq_len=self.grid.seq_len,
            precision=precision_for(target),  # type: ignore[arg-type]
            optimizer="adamw",
            n_params=n_params,
            flops_per_token=training_flops_per_token(
                n_params, shape.layers, shape.heads, shape.hidden // shape.heads, self.grid.seq_len
            ),
            batch_search="max_fit" if self.grid.search else "fixed",
            batch_cap=self.grid.batch_cap if self.grid.search else None,
            attn_implementation=self.grid.attn_implementation,
        )
        label = f"{shape.name} seq={self.grid.seq_len} batch{'<=' if self.grid.search else '='}{self.grid.batch_cap}"
        return [Case(label=label, params=params)]

    def run(self, case: Case, ctx: Context) -> Outcome:
        import torch

        params = case.params
        assert isinstance(params, TrainingParams)
        shape = families.SHAPES[params.model]
        if params.seq_len > shape.max_positions and shape.family != "t5":
            raise ValueError(f"seq_len {params.seq_len} exceeds {shape.name}'s {shape.max_positions} positions")
        device = ctx.target.torch_device()
        ctx.free_memory()
        with device:
            model = families.language_model(shape, params.attn_implementation)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=ctx.target.is_gpu)
        autocast = params.precision == "bf16-autocast"
        try:
            # The step that found the batch also says which attention ran, and is the first warm-up step.
            with compat.observe_attention(params.attn_implementation) as ran:
                batch, step = self._fit(model, optimizer, params, ctx, autocast)
            ctx.target.reset_peak_memory()
            policy = replace(ctx.policy.for_sustained(), min_warmup=1)
            timed = ctx.measure(step, flush=False, graphable=False, policy=policy)
            peak_memory = ctx.target.peak_memory_bytes()
        finally:
            del optimizer, model
            ctx.free_memory()
        seconds = timed.stats.median_s
        tokens_per_s = batch * params.seq_len / seconds
        tflops = tokens_per_s * params.flops_per_token / 1e12
        peak = peak_tflops(ctx.target, "bf16" if autocast else "fp32")
        metrics = TrainingMetrics(
            samples_per_s=batch / seconds,
            tokens_per_s=tokens_per_s,
            tflops=tflops,
            mfu=tflops / peak if peak else None,
            peak_memory_bytes=peak_memory,
        )
        refined = params.model_copy(update={"batch": batch, "attn_implementation": ran()})
        return Outcome(metrics=metrics, timing=timed.stats, params=refined)

    def _fit(
        self, model: Any, optimizer: Any, params: TrainingParams, ctx: Context, autocast: bool
    ) -> tuple[int, Callable[[], None]]:
        """The largest batch (halving from the cap) whose whole step runs, and that step."""
        batch = params.batch
        while True:
            step = self._step(model, optimizer, params, ctx, batch, autocast)
            try:
                step()
                return batch, step
            except Exception as exc:
                if not is_oom(exc) or params.batch_search == "fixed" or batch == 1:
                    raise
            # Outside the except block, so the traceback no longer pins the failed step's tensors.
            del step
            optimizer.zero_grad(set_to_none=True)
            optimizer.state.clear()
            ctx.free_memory()
            batch //= 2

    def _step(
        self, model: Any, optimizer: Any, params: TrainingParams, ctx: Context, batch: int, autocast: bool
    ) -> Callable[[], None]:
        import torch

        device = ctx.target.torch_device()
        vocab = families.SHAPES[params.model].vocab
        ids = torch.randint(0, vocab, (batch, params.seq_len), device=device)
        return training_step(model, optimizer, ids, autocast)


def training_step(model: Any, optimizer: Any, ids: Any, autocast: bool) -> Callable[[], None]:
    """One optimizer step of a language model on ``ids`` (labels = inputs), bf16 autocast where asked.

    The same step serves the single-device benchmark and each rank of the data-parallel one (``model`` is then
    the DDP wrapper), so the two are compared on identical work.
    """
    import torch

    def step() -> None:
        with torch.autocast(device_type=ids.device.type, dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


class BertTrainingBenchmark(_TrainingBenchmark):
    NAME = "training_bert"
    WARM = families.WARM_BY_FAMILY["bert"]
    DESCRIPTION = "BERT-large masked-LM training step (AdamW, bf16 autocast): samples/s, tokens/s, MFU"


class Gpt2TrainingBenchmark(_TrainingBenchmark):
    NAME = "training_gpt2"
    WARM = families.WARM_BY_FAMILY["gpt2"]
    DESCRIPTION = "GPT-2-medium causal-LM training step (AdamW, bf16 autocast): samples/s, tokens/s, MFU"

"""Transformer block TFLOPS, forward and forward+backward, as the transformers-benchmarks notebook measures them.

Blocks are in training mode (dropout on, autograd recording), as in the notebook, so fwd is the forward pass
of a training step and fwd+bwd is counted as three forwards. The attention implementation is set explicitly
and the one that actually ran is recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from schemas import Flag, LayerMetrics, LayerParams
from schemas.results import AttentionImplementation

from .. import compat
from ..devices.target import Target
from ..errors import Unsupported
from ..models import families
from .base import Benchmark, Case, Context, Outcome
from .flops import layer_flops


@dataclass(frozen=True)
class LayerGrid:
    model: str
    seq_lens: tuple[int, ...]
    batches: tuple[int, ...]
    dtypes: tuple[str, ...] = ("fp16",)
    modes: tuple[str, ...] = ("fwd", "fwd+bwd")
    attn_implementation: AttentionImplementation = "sdpa"


class LayerBenchmark(Benchmark[LayerGrid]):
    """One transformer block per case; subclasses name the block and how it is built (``build``)."""

    KIND = "layer"
    BLOCK: str
    #: Whose code the block is: transformers' class, or agent/benchmarks/bert_torch.py's plain-torch BERT layer.
    IMPLEMENTATION: ClassVar[Literal["transformers", "torch"]] = "transformers"
    Grid = LayerGrid

    def cases(self, target: Target) -> list[Case]:
        shape = families.SHAPES[self.grid.model]
        cases = []
        for dtype in self.grid.dtypes:
            for seq in self.grid.seq_lens:
                for batch in self.grid.batches:
                    for mode in self.grid.modes:
                        flops = layer_flops(batch, seq, shape.hidden, shape.ffn, mode=mode, cross_attention=self._cross)
                        params = LayerParams(
                            model=shape.name,
                            block=self.BLOCK,  # type: ignore[arg-type]
                            hidden=shape.hidden,
                            heads=shape.heads,
                            ffn=shape.ffn,
                            batch=batch,
                            seq_len=seq,
                            dtype=dtype,  # type: ignore[arg-type]
                            mode=mode,  # type: ignore[arg-type]
                            attn_implementation=self.grid.attn_implementation,
                            flops_per_call=flops,
                            implementation=self.IMPLEMENTATION,
                        )
                        cases.append(Case(label=f"{dtype} {mode} b={batch} s={seq}", params=params))
        return cases

    @property
    def _cross(self) -> bool:
        return self.BLOCK == "t5_decoder_block"

    def __init__(self, grid: LayerGrid) -> None:
        super().__init__(grid)
        self._built: tuple[tuple[str, str, str], Any] | None = None
        self._hollow: tuple[tuple[str, str, str], Any] | None = None

    def _module(self, params: LayerParams, ctx: Context) -> Any:
        """Build the block once per dtype and device; later cases reuse it."""
        key = (params.dtype, params.attn_implementation, ctx.target.label)
        self._hollow = None  # measuring now: the rehearsals are over
        if self._built is None or self._built[0] != key:
            self._built = None
            ctx.free_memory()
            shape = families.SHAPES[params.model]
            with ctx.target.torch_device():  # made and initialised where it runs: a CPU init took 0.3 s a block
                layer = self.build(shape, params.attn_implementation)
            layer = layer.to(device=ctx.target.torch_device(), dtype=ctx.target.torch_dtype(params.dtype))
            layer.train()
            self._built = (key, layer)
        return self._built[1]

    def build(self, shape: families.Shape, attn_implementation: str) -> Any:
        """The block, untrained, in fp32 on the current device (transformers' class for it)."""
        return families.block(shape, self.BLOCK, attn_implementation)

    def call_for(self, params: LayerParams, ctx: Context) -> Callable[[], object]:
        """The case's call on a fresh random input: a forward, or a forward and backward."""
        import torch

        reason = ctx.target.unsupported_reason(params.dtype)
        if reason:
            raise Unsupported(reason)
        layer = self._module(params, ctx)
        device, dtype = ctx.target.torch_device(), ctx.target.torch_dtype(params.dtype)
        x = torch.randn(params.batch, params.seq_len, params.hidden, device=device, dtype=dtype)
        kwargs = compat.forward_kwargs(layer, params.seq_len, device)
        if self._cross:
            kwargs["encoder_hidden_states"] = x

        def forward() -> torch.Tensor:
            return compat.first_tensor(layer(x, **kwargs))

        def forward_backward() -> None:
            forward().sum().backward()

        return forward if params.mode == "fwd" else forward_backward

    def _hollow_module(self, params: LayerParams, ctx: Context) -> Any:
        """The block with its memory allocated and never written (built on the meta device): nothing is launched to
        make it, where ``_module`` initialises its weights on the device."""
        import torch

        key = (params.dtype, params.attn_implementation, ctx.target.label)
        if self._hollow is None or self._hollow[0] != key:
            self._hollow = None
            with torch.device("meta"):
                layer = self.build(families.SHAPES[params.model], params.attn_implementation)
            layer = layer.to(dtype=ctx.target.torch_dtype(params.dtype)).to_empty(device=ctx.target.torch_device())
            self._hollow = (key, layer.train())
        return self._hollow[1]

    def rehearse(self, case: Case, ctx: Context) -> None:
        """The cell's first call captured and dropped, on a hollow block and input: the host builds what the new
        shape needs (cuDNN's attention graphs, 70-100 ms of the host's time a cell on the H200, against 2.5-4 ms
        of the GPU's), and nothing runs on the device, not even an initialisation, so that what another process
        measures meanwhile is not time-sliced (a block initialised beside a 1.6 ms bf16 product moved it by 25 %)."""
        import torch

        params = case.params
        assert isinstance(params, LayerParams)
        reason = ctx.target.unsupported_reason(params.dtype)
        if reason:
            raise Unsupported(reason)
        layer = self._hollow_module(params, ctx)
        device = ctx.target.torch_device()
        x = torch.empty(params.batch, params.seq_len, params.hidden, device=device,
                        dtype=ctx.target.torch_dtype(params.dtype))  # fmt: skip

        def first_call() -> None:
            kwargs = compat.forward_kwargs(layer, params.seq_len, device)  # captured too: its masks, positions
            if self._cross:
                kwargs["encoder_hidden_states"] = x
            out = compat.first_tensor(layer(x, **kwargs))
            if params.mode != "fwd":
                out.sum().backward()

        try:
            ctx.rehearse(first_call)
        finally:
            layer.zero_grad(set_to_none=True)  # gradients made in the capture belong to its dropped memory pool

    def run(self, case: Case, ctx: Context) -> Outcome:
        params = case.params
        assert isinstance(params, LayerParams)
        call = self.call_for(params, ctx)
        with compat.observe_attention(params.attn_implementation) as ran:
            timed = ctx.measure(call)
        attention = ran()
        metrics = LayerMetrics(tflops=params.flops_per_call / timed.stats.median_s / 1e12)
        refined = params.model_copy(update={"attn_implementation": attention})
        flags: tuple[Flag, ...] = ("launch_bound",) if timed.launch_bound else ()
        return Outcome(metrics=metrics, timing=timed.stats, params=refined, flags=flags)

    def close(self) -> None:
        self._built = None
        self._hollow = None


class BertLayerBenchmark(LayerBenchmark):
    NAME = "layer_bert"
    BLOCK = "bert_layer"
    WARM = families.WARM_BY_FAMILY["bert"]
    DESCRIPTION = "BERT-large layer TFLOPS, fwd and fwd+bwd, over batch and sequence length"


class Gpt2BlockBenchmark(LayerBenchmark):
    NAME = "layer_gpt2"
    BLOCK = "gpt2_block"
    WARM = families.WARM_BY_FAMILY["gpt2"]
    DESCRIPTION = "GPT-2-medium block TFLOPS, fwd and fwd+bwd, over batch and sequence length"


class T5EncoderBenchmark(LayerBenchmark):
    NAME = "layer_t5_encoder"
    BLOCK = "t5_encoder_block"
    WARM = families.WARM_BY_FAMILY["t5"]
    DESCRIPTION = "T5-large encoder block TFLOPS, fwd and fwd+bwd"


class T5DecoderBenchmark(LayerBenchmark):
    NAME = "layer_t5_decoder"
    BLOCK = "t5_decoder_block"
    WARM = families.WARM_BY_FAMILY["t5"]
    DESCRIPTION = "T5-large decoder block (with cross-attention) TFLOPS, fwd and fwd+bwd"

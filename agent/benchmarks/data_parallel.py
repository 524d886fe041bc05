"""Data-parallel (DDP) training step of the suite's GPT-2-medium on every GPU, against the same step on one.

Scaling efficiency = tokens/s on N GPUs / (N x tokens/s on one GPU), with the same per-GPU batch: 1.0 means
the gradient all-reduce was entirely hidden behind the backward pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from schemas import TrainingMetrics, TrainingParams
from schemas.results import AttentionImplementation

from ..distributed.launch import Group, worker_kind
from ..distributed.nodes import Nodes
from ..models import families
from ..timing import GroupPolicy
from . import data_parallel_rank
from .base import Case, GroupBenchmark, Outcome, Span
from .collective import machine_group, too_few
from .flops import training_flops_per_token
from .training import TASKS, dense_params, precision_for


@dataclass(frozen=True)
class DataParallelGrid:
    model: str
    seq_len: int
    batch: int  # per GPU (per process)
    cpu_procs: int = 2
    attn_implementation: AttentionImplementation = "sdpa"
    policy: GroupPolicy = field(default_factory=lambda: GroupPolicy(warmup=3, repeats=10, repeat_s=1e-3))


class Gpt2DataParallelBenchmark(GroupBenchmark[DataParallelGrid]):
    NAME = "training_ddp"
    KIND = "training"
    WORKER = worker_kind(data_parallel_rank.run_case)
    DESCRIPTION = "GPT-2-medium DDP training step on all GPUs vs one: tokens/s, scaling efficiency"
    Grid = DataParallelGrid

    def plan(self, span: Span) -> list[Case]:
        grid = self.grid
        shape = families.SHAPES[grid.model]
        n_params = dense_params(shape)  # from the shape: planning imports no transformers
        whole = machine_group(span, grid.cpu_procs)
        one = Group(whole.backend, whole.devices[:1], Nodes(), whole.kind)
        base = TrainingParams(
            model=shape.name,
            task=TASKS[shape.family],  # type: ignore[arg-type]
            batch=grid.batch,
            seq_len=grid.seq_len,
            precision=precision_for(span.targets[0]),  # type: ignore[arg-type]
            optimizer="adamw",
            n_params=n_params,
            flops_per_token=training_flops_per_token(
                n_params, shape.layers, shape.heads, shape.hidden // shape.heads, grid.seq_len
            ),
            batch_search="fixed",
            attn_implementation=grid.attn_implementation,
        )
        unsupported = too_few(whole, "data-parallel training")
        label = f"{shape.name} seq={grid.seq_len} batch={grid.batch}/GPU"
        if unsupported is not None:
            return [Case(label=f"{label} x{whole.world_size}", params=base, spec=unsupported)]
        return [
            Case(label=f"{label} x1", params=base, spec=one),
            Case(
                label=f"{label} x{whole.world_size}",
                params=base.model_copy(update={"world_size": whole.world_size}),
                spec=whole,
            ),
        ]

    def policy(self) -> GroupPolicy:
        return self.grid.policy

    def refine(self, cases: list[Case], outcomes: list[Outcome | None]) -> list[Outcome | None]:
        single = next((o for o in outcomes if o is not None and _world(o) == 1), None)
        if single is None:
            return outcomes
        assert isinstance(single.metrics, TrainingMetrics)
        refined: list[Outcome | None] = []
        for outcome in outcomes:
            if outcome is None or outcome is single or not isinstance(outcome.params, TrainingParams):
                refined.append(outcome)
                continue
            metrics = outcome.metrics
            assert isinstance(metrics, TrainingMetrics)
            ideal = single.metrics.tokens_per_s * outcome.params.world_size
            scaled = metrics.model_copy(update={"scaling_efficiency": metrics.tokens_per_s / ideal})
            refined.append(replace(outcome, metrics=scaled))
        return refined


def _world(outcome: Outcome) -> int | None:
    return outcome.params.world_size if isinstance(outcome.params, TrainingParams) else None

"""One rank of a ``training_ddp`` case: a data-parallel (DDP) training step of the suite's language models.

Each rank runs the same step as ``training`` (forward, backward, AdamW, bf16 autocast on GPUs) on its own
batch of ``batch`` sequences; DDP all-reduces the gradients in buckets while the backward pass runs, so the
step time includes whatever communication the backward pass could not hide.
"""

from __future__ import annotations

from typing import Any

from schemas import TrainingMetrics, TrainingParams

from .. import compat
from ..devices.physics import peak_tflops
from ..distributed.launch import Task
from ..distributed.rank import Rank
from ..models import families
from ..timing import measure_group
from .training import training_step


def run_case(case: dict[str, Any], task: Task, rank: Rank) -> dict[str, Any]:
    import torch
    from torch.nn.parallel import DistributedDataParallel

    params = TrainingParams.model_validate(case)
    shape = families.SHAPES[params.model]
    target, device = rank.target, rank.device
    torch.manual_seed(0)  # the same initial weights on every rank, as DDP expects (it also broadcasts rank 0's)
    with device:
        model = families.language_model(shape, params.attn_implementation)
    model.train()
    ddp = DistributedDataParallel(model, device_ids=[device.index] if target.is_gpu else None)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-4, fused=target.is_gpu)
    autocast = params.precision == "bf16-autocast"
    ids = torch.randint(0, shape.vocab, (params.batch, params.seq_len), device=device)
    step = training_step(ddp, optimizer, ids, autocast)

    with compat.observe_attention(params.attn_implementation) as ran:
        step()
    target.reset_peak_memory()
    stats = measure_group(step, task.policy, clock=target.clock(), align=rank.align, slowest=rank.slowest)
    own_peak = target.peak_memory_bytes()
    peak_memory = rank.slowest([float(own_peak or 0)])[0]
    world = rank.world_size
    samples_per_s = params.batch * world / stats.median_s
    tokens_per_s = samples_per_s * params.seq_len
    tflops = tokens_per_s * params.flops_per_token / 1e12
    peak = peak_tflops(target, "bf16" if autocast else "fp32")
    metrics = TrainingMetrics(
        samples_per_s=samples_per_s,
        tokens_per_s=tokens_per_s,
        tflops=tflops,
        mfu=tflops / (peak * world) if peak else None,
        peak_memory_bytes=int(peak_memory) if own_peak is not None else None,
    )
    refined = params.model_copy(update={"world_size": world, "attn_implementation": ran()})
    return {
        "params": refined.model_dump(mode="json"),
        "metrics": metrics.model_dump(mode="json"),
        "timing": stats.model_dump(mode="json"),
        "flags": [],
    }

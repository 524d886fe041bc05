"""The lean Llama on CUDA (``make test-gpu``): with its Triton kernels it computes what transformers' model computes
on the same weights over a multi-step greedy decode, a captured step replays the eager one, and the benchmark
times it as graph replays and says which kernels it used."""

from __future__ import annotations

import pytest

from agent.benchmarks.inference import InferenceBenchmark, InferenceGrid
from agent.devices.target import cuda_targets
from agent.machine.monitor import Monitor
from agent.models import llama, llama_torch
from agent.run.runner import run_cases
from agent.timing import TimingPolicy
from benchmarks.inference_profile import capture

pytestmark = pytest.mark.gpu
SHAPE = llama.SHAPES["llama-tiny"]


def _device():  # type: ignore[no-untyped-def]
    return cuda_targets((0,))[0].torch_device()


def _pair(dtype):  # type: ignore[no-untyped-def]
    import torch

    torch.manual_seed(0)
    theirs = llama.build(SHAPE, dtype, "sdpa", _device())
    mine = llama_torch.LeanLlama(SHAPE, dtype, _device(), ops=llama_torch.default_ops(SHAPE, dtype, _device()))
    mine.load_transformers(theirs.state_dict())
    return theirs, mine


@pytest.mark.parametrize("batch", [3, 1])  # at batch 1 each projection is one fused matrix-vector kernel
@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_the_triton_path_decodes_what_transformers_decodes(dtype_name: str, batch: int) -> None:
    import torch

    dtype = getattr(torch, dtype_name)
    theirs, mine = _pair(dtype)
    assert mine.ops.name == "triton"
    # fp32: the same tokens and logits to rounding; bf16: the logits within bf16's error of transformers' own.
    tol = 1e-4 if dtype == torch.float32 else 3e-2
    ids = torch.randint(0, SHAPE.vocab, (batch, 24), device=_device())
    with torch.no_grad():
        cache = mine.cache(batch, 24 + 6)
        ours = mine.forward(ids, cache, 0)[:, -1]
        seq = ids
        for step in range(6):
            ref = theirs(input_ids=seq, use_cache=False).logits[:, -1]
            if step:
                ours = mine.forward(seq[:, -1:], cache, seq.shape[1] - 1)[:, -1]
            assert float((ours.float() - ref.float()).norm() / ref.float().norm()) < tol, step
            if dtype == torch.float32:
                assert torch.equal(ours.argmax(-1), ref.argmax(-1)), step
            seq = torch.cat([seq, ref.argmax(-1, keepdim=True)], dim=1)


def test_a_captured_lean_step_gives_the_logits_of_a_forward_over_the_whole_sequence() -> None:
    import torch

    device = _device()
    _, mine = _pair(torch.float32)
    ids = torch.randint(0, SHAPE.vocab, (2, 40), device=device)
    with torch.no_grad():
        whole = mine.forward(ids, mine.cache(2, 40), 0)[:, -1].clone()
        decode = llama_torch.LeanDecode(mine, batch=2, context=40)
        decode.fill(ids[:, :-1], ids[:, -1:])
        graph, captured = capture(decode.forward, device, warm=2)
        for _ in range(3):  # every replay writes the same position: the same logits each time
            graph.replay()
            torch.cuda.synchronize(device)
            torch.testing.assert_close(captured, whole, rtol=1e-4, atol=1e-4)


def test_the_lean_path_is_timed_as_graph_replays_and_says_its_kernels() -> None:
    grid = InferenceGrid(prefill=((2, 64),), decode_batches=(1, 4), context=128, models=("llama-tiny",),
                         implementations=("transformers", "torch"))  # fmt: skip
    results = run_cases([InferenceBenchmark(grid)], [cuda_targets((0,))[0]], [], TimingPolicy(), Monitor(None, {}))
    assert [r.status for r in results] == ["ok"] * 6, [r.reason for r in results]
    lean = [r for r in results if r.params.implementation == "torch"]  # type: ignore[union-attr]
    assert len(lean) == 3 and {r.params.kernels for r in lean} == {"triton"}  # type: ignore[union-attr]
    for r in lean:
        assert r.params.attn_implementation == "sdpa", r.params  # type: ignore[union-attr]
        assert "launch_bound" not in r.flags and "above_peak" not in r.flags, r.flags
    decodes = [r for r in lean if r.params.phase == "decode"]  # type: ignore[union-attr]
    assert [r.timing.method for r in decodes] == ["cuda_graph"] * 2  # type: ignore[union-attr]


def test_the_fused_projections_compute_the_unfused_ones_at_llama_3_8b_widths() -> None:
    """Every fused kernel at the widths the benchmark runs (tiles without masks), then two layers of that shape
    decoding at batch 1: the fused step's logits are the unfused step's, and its greedy tokens too."""
    import dataclasses

    import torch

    from agent.models.llama_kernels import TritonOps

    device = _device()
    shape = dataclasses.replace(llama.SHAPES["llama-3-8b"], layers=2)
    for dtype in (torch.float32, torch.bfloat16):
        assert not llama_torch.differences(TritonOps(), llama_torch.TorchOps(), shape, dtype, device), dtype
    torch.manual_seed(0)
    model = llama_torch.LeanLlama(shape, torch.bfloat16, device, ops=TritonOps(gemv=None))
    ids = torch.randint(0, shape.vocab, (1, 12), device=device)
    logits = {}
    with torch.no_grad():
        for name, ops in (("unfused", TritonOps(gemv=None)), ("fused", TritonOps())):
            model.ops = ops
            cache = model.cache(1, 16)
            steps = [model.forward(ids, cache, 0)[:, -1]]
            steps += [model.forward(ids[:, p : p + 1], cache, 12 + p)[:, -1] for p in range(3)]
            logits[name] = torch.stack(steps).float()
    unfused, fused = logits["unfused"], logits["fused"]
    assert float((fused - unfused).norm() / unfused.norm()) < 2e-2
    assert torch.equal(fused.argmax(-1), unfused.argmax(-1))

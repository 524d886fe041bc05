"""LLM inference on CUDA (``make test-gpu``): a decode step captured in a CUDA graph replays the eager step, and the
runner times decode as graph replays (never as the host's pace)."""

from __future__ import annotations

import pytest

from agent.benchmarks.inference import InferenceBenchmark, InferenceGrid
from agent.devices.target import cuda_targets
from agent.machine.monitor import Monitor
from agent.models import llama
from agent.run.runner import run_cases
from agent.timing import TimingPolicy

pytestmark = pytest.mark.gpu


def _target():  # type: ignore[no-untyped-def]
    return cuda_targets((0,))[0]


def test_a_captured_decode_step_gives_the_logits_of_a_forward_over_the_whole_sequence() -> None:
    import torch

    device = _target().torch_device()
    torch.manual_seed(0)
    model = llama.build(llama.SHAPES["llama-tiny"], torch.float32, "sdpa", device)
    ids = torch.randint(0, 1000, (3, 40), device=device)
    with torch.no_grad():
        whole = model(input_ids=ids, use_cache=False).logits[:, -1]
        decode = llama.StaticDecode(model, batch=3, context=40)
        decode.fill(ids[:, :-1], ids[:, -1:])
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for _ in range(2):
                decode.forward()
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = decode.forward()
        for _ in range(3):  # every replay writes the same position: the same logits each time
            graph.replay()
            torch.cuda.synchronize(device)
            torch.testing.assert_close(captured, whole, rtol=1e-3, atol=1e-3)


def test_decode_is_timed_as_graph_replays_on_cuda() -> None:
    grid = InferenceGrid(prefill=((2, 64),), decode_batches=(1, 4), context=128, models=("llama-tiny",))
    results = run_cases([InferenceBenchmark(grid)], [_target()], [], TimingPolicy(), Monitor(None, {}))
    assert [r.status for r in results] == ["ok"] * 3, [r.reason for r in results]
    for r in results:
        assert r.params.attn_implementation == "sdpa" and r.params.dtype == "bf16"  # type: ignore[union-attr]
        assert "launch_bound" not in r.flags and "above_peak" not in r.flags, r.flags
    decodes = [r for r in results if r.params.phase == "decode"]  # type: ignore[union-attr]
    assert [r.timing.method for r in decodes] == ["cuda_graph"] * 2  # type: ignore[union-attr]

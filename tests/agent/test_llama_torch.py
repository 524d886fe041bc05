"""The lean plain-torch Llama is transformers' ``LlamaForCausalLM`` without its layer code: loaded with the same
random weights it gives the same logits and greedy tokens over a multi-step decode through its KV cache, and the
inference family measures it beside transformers' model, each result saying whose code it is. On CUDA its small
operations are Triton kernels (tests/gpu/test_inference_lean.py; here, where Triton is installed, through Triton's
interpreter)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from agent.benchmarks.inference import InferenceBenchmark, InferenceGrid
from agent.errors import Unsupported
from agent.models import llama, llama_torch
from tests.conftest import ROOT, needs_inference, needs_triton

SHAPE = llama.SHAPES["llama-tiny"]
CPU = "cpu"


def _pair(shape: llama.LlamaShape, attn: str, dtype_name: str = "float32"):  # type: ignore[no-untyped-def]
    import torch

    torch.manual_seed(0)
    dtype = getattr(torch, dtype_name)
    theirs = llama.build(shape, dtype, attn, torch.device(CPU))
    mine = llama_torch.LeanLlama(shape, dtype, torch.device(CPU), attn_implementation=attn)
    mine.load_transformers(theirs.state_dict())
    return theirs, mine


@needs_inference
@pytest.mark.parametrize(
    ("attn", "tied"), [("sdpa", False), ("eager", False), ("sdpa", True)], ids=["sdpa", "eager", "tied-sdpa"]
)
def test_a_multi_step_greedy_decode_gives_transformers_logits_and_tokens(attn: str, tied: bool) -> None:
    import torch

    shape = dataclasses.replace(SHAPE, tied=tied)
    theirs, mine = _pair(shape, attn)
    ids = torch.randint(0, shape.vocab, (3, 12))
    steps = 6
    with torch.no_grad():
        cache = mine.cache(3, 12 + steps)
        prompt_logits = mine.forward(ids, cache, 0)
        torch.testing.assert_close(prompt_logits, theirs(input_ids=ids, use_cache=False).logits, rtol=1e-5,
                                   atol=1e-5)  # fmt: skip
        mine_seq = theirs_seq = ids
        ours = prompt_logits[:, -1]
        seen = []
        for step in range(steps):
            if step:  # one token at a time through the cache, at its own position
                ours = mine.forward(mine_seq[:, -1:], cache, mine_seq.shape[1] - 1)[:, -1]
            ref = theirs(input_ids=theirs_seq, use_cache=False).logits[:, -1]  # the whole sequence, no cache
            torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5)
            seen.append(ours)
            mine_seq = torch.cat([mine_seq, ours.argmax(-1, keepdim=True)], dim=1)
            theirs_seq = torch.cat([theirs_seq, ref.argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(mine_seq, theirs_seq)  # every greedy token, each path going on from its own
    assert not torch.allclose(seen[-1], seen[-2])  # each step saw a longer context: the test was not vacuous


@needs_inference
def test_bf16_logits_stay_within_bf16s_rounding_of_transformers() -> None:
    import torch

    theirs, mine = _pair(SHAPE, "sdpa", "bfloat16")
    ids = torch.randint(0, SHAPE.vocab, (2, 16))
    with torch.no_grad():
        ours = mine.forward(ids, mine.cache(2, 16), 0).float()
        ref = theirs(input_ids=ids, use_cache=False).logits.float()
    assert float((ours - ref).norm() / ref.norm()) < 1e-2


@needs_inference
def test_the_benchmarks_step_writes_one_slot_and_gives_the_whole_sequences_logits() -> None:
    import torch

    _, mine = _pair(SHAPE, "sdpa")
    ids = torch.randint(0, SHAPE.vocab, (3, 20))
    with torch.no_grad():
        whole = mine.forward(ids, mine.cache(3, 20), 0)[:, -1]
        decode = llama_torch.LeanDecode(mine, batch=3, context=20)
        decode.fill(ids[:, :-1], ids[:, -1:])
        first, again = decode.forward(), decode.forward()  # the step writes the same position every time
        torch.testing.assert_close(first, whole, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(again, whole, rtol=1e-5, atol=1e-5)
        assert torch.equal(decode.step(), whole.argmax(dim=-1, keepdim=True))


def test_what_it_cannot_do_is_said_by_name() -> None:
    import torch

    with pytest.raises(Unsupported, match="flash_attention_2"):
        llama_torch.LeanLlama(SHAPE, torch.float32, torch.device(CPU), attn_implementation="flash_attention_2")
    mine = llama_torch.LeanLlama(SHAPE, torch.float32, torch.device(CPU))
    cache = mine.cache(1, 8)
    with pytest.raises(ValueError, match="start at position 0"):
        mine.forward(torch.zeros(1, 2, dtype=torch.long), cache, 3)
    with pytest.raises(ValueError, match="do not fit a cache of 8"):
        mine.forward(torch.zeros(1, 1, dtype=torch.long), cache, 8)


@needs_inference
def test_the_family_measures_both_paths_with_the_same_work_and_says_whose() -> None:
    from agent.devices.target import cpu_target
    from agent.harness.suites import QUICK
    from agent.machine.monitor import Monitor
    from agent.run.runner import run_cases

    grid = InferenceGrid(prefill=((2, 16),), decode_batches=(2,), context=32, models=("llama-tiny",),
                         implementations=("transformers", "torch"))  # fmt: skip
    results = run_cases([InferenceBenchmark(grid)], [cpu_target()], [], QUICK.policy, Monitor(None, {}))
    assert [r.status for r in results] == ["ok"] * 4, [r.reason for r in results]
    theirs, mine = results[:2], results[2:]
    for t, m in zip(theirs, mine, strict=True):
        assert t.params.implementation == "transformers" and t.params.kernels is None  # type: ignore[union-attr]
        assert m.params.implementation == "torch" and m.params.kernels == "torch"  # type: ignore[union-attr]
        assert m.params.attn_implementation == "sdpa"  # type: ignore[union-attr]
        # The same FLOPs and bytes: what the two are compared on.
        same = {"implementation", "kernels"}
        assert m.params.model_dump(exclude=same) == t.params.model_dump(exclude=same)
        assert m.metrics.tokens_per_s > 0  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="implementations from"):
        InferenceGrid(implementations=("vllm",))  # type: ignore[arg-type]


@needs_triton
def test_the_triton_kernels_compute_the_torch_ops_in_tritons_interpreter() -> None:
    code = """
import torch
from agent.models import llama, llama_torch
from agent.models.llama_kernels import TritonOps
torch.manual_seed(0)
shape = llama.SHAPES["llama-tiny"]
for dtype in (torch.float32, torch.bfloat16):
    a = llama_torch.LeanLlama(shape, dtype, torch.device("cpu"))
    b = llama_torch.LeanLlama(shape, dtype, torch.device("cpu"), ops=TritonOps())
    for mine, theirs in zip(b.parameters(), a.parameters()):
        mine.copy_(theirs)
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    # Batch 2, then batch 1, where each projection is one fused matrix-vector kernel: a prompt, then steps (three at
    # batch 2; one at batch 1, whose fused kernels take the interpreter 5-9 s a step).
    for batch, steps in ((2, (9, 10, 11)), (1, (9,))):
        length = 9 + len(steps)  # the caches filled to their end, so that they compare whole
        ids = torch.randint(0, shape.vocab, (batch, length))
        ca, cb = a.cache(batch, length), b.cache(batch, length)
        pairs = [(a.forward(ids[:, :9], ca, 0), b.forward(ids[:, :9], cb, 0))]
        pairs += [(a.forward(ids[:, p : p + 1], ca, p), b.forward(ids[:, p : p + 1], cb, p)) for p in steps]
        for x, y in pairs:
            assert float((x.float() - y.float()).norm() / x.float().norm()) < tol, (dtype, batch)
        assert float((ca.keys - cb.keys).abs().max()) < tol * 10, (dtype, batch)
        assert float((ca.values - cb.values).abs().max()) < tol * 10, (dtype, batch)
        if dtype == torch.float32:
            assert torch.equal(pairs[-1][0].argmax(-1), pairs[-1][1].argmax(-1))
    assert not llama_torch.differences(TritonOps(), llama_torch.TorchOps(), shape, dtype, torch.device("cpu"))
print("ok")
"""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@needs_triton
def test_the_triton_kernels_build_for_hopper_without_a_gpu() -> None:
    """Triton's compiler rejects what its interpreter runs (a global in an annotation did, on the H200): each kernel
    is compiled for sm_90 here, through PTX to a binary, as it would be on the card."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from agent.models import llama_kernels as k

    pointers = {"*bf16": ("x_ptr", "w_ptr", "out_ptr", "qkv_ptr", "cos_ptr", "sin_ptr", "q_ptr", "k_ptr", "v_ptr",
                          "gate_up_ptr", "norm_ptr")}  # fmt: skip
    c = k.GEMV
    tiles = {"BLOCK_N": c.block_n, "BLOCK_K": c.block_k}
    gemvs = [(k._gemv, {"k": width, "PROLOGUE": prologue, "RESIDUAL": residual, "EVEN": True, **tiles})
             for width, prologue, residual in ((4096, k.RMS_NORM, False), (4096, k.PLAIN, True),
                                               (14336, k.SILU_MUL, True))]  # fmt: skip
    gemvs.append((k._gemv, {"k": 100, "PROLOGUE": k.RMS_NORM, "RESIDUAL": False, "EVEN": False, **tiles}))
    for kernel, constants in ((k._rms_norm, {"BLOCK": 4096}), (k._rotary_into_cache, {"HALF": 64, "HEADS": 16}),
                              (k._silu_mul, {"BLOCK": 1024}), *gemvs):  # fmt: skip
        names = kernel.arg_names
        signature = {n: "constexpr" if n in constants else "*bf16" if n in pointers["*bf16"] else "fp32" if n == "eps"
                     else "i32" for n in names}  # fmt: skip
        compiled = triton.compile(ASTSource(fn=kernel, signature=signature, constexprs=constants),
                                  target=GPUTarget("cuda", 90, 32))  # fmt: skip
        assert compiled.asm["cubin"], kernel.__name__

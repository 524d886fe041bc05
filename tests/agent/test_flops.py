"""FLOP formulas against values computed by hand."""

from __future__ import annotations

from agent.benchmarks.flops import (
    decode_flops,
    decode_step_bytes,
    kv_cache_bytes,
    layer_flops,
    layer_forward_flops,
    matmul_flops,
    prefill_flops,
    training_flops_per_token,
)
from agent.models.llama import SHAPES


def test_matmul_is_two_mnk() -> None:
    assert matmul_flops(2, 3, 4) == 48
    assert matmul_flops(8192, 8192, 8192) == 2 * 8192**3


def test_bert_large_layer_forward() -> None:
    # 24*b*s*h^2 + 4*b*s^2*h at b=1, s=128, h=1024: 3,221,225,472 + 67,108,864
    assert layer_forward_flops(1, 128, 1024, 4096) == 3_288_334_336


def test_forward_backward_is_three_forwards() -> None:
    assert layer_flops(1, 128, 1024, 4096, mode="fwd+bwd") == 9_865_003_008
    assert layer_flops(1, 128, 1024, 4096, mode="fwd") == 3_288_334_336


def test_decoder_adds_cross_attention() -> None:
    # 16bsh^2 (ffn) + 2 * (8bsh^2 + 4bs^2h): 4,294,967,296 + 134,217,728
    assert layer_forward_flops(1, 128, 1024, 4096, cross_attention=True) == 4_429_185_024


def test_notebook_formula_holds_for_other_shapes() -> None:
    b, s, h = 8, 512, 64
    assert layer_forward_flops(b, s, h, 4 * h) == 24 * b * s * h * h + 4 * b * s * s * h


def test_training_flops_per_token_is_palm_formula() -> None:
    # 6N + 12*L*H*Q*T with N=1000, L=2, H=4, Q=16, T=32: 6000 + 49,152
    assert training_flops_per_token(1000, 2, 4, 16, 32) == 55_152


def test_llama_3_8b_parameters_per_token() -> None:
    # 32 layers of q, o 4096x4096, k, v 4096x1024, gate, up, down 4096x14336, two norms: 218,112,000 each;
    # final norm 4096, LM head 128,256 x 4096 = 525,336,576; the embedding table (525,336,576 more) is a lookup.
    shape = SHAPES["llama-3-8b"]
    assert shape.n_params == 32 * 218_112_000 + 4096 + 525_336_576 == 7_504_924_672
    assert shape.weight_bytes("bf16") == 15_009_849_344


def test_prefill_is_two_n_per_token_plus_attention() -> None:
    # 2 * N * b * s + 4 * L * b * s^2 * (H * Q) at N=1000, L=2, H=4, Q=16, b=3, s=8: 48,000 + 98,304
    assert prefill_flops(1000, 2, 4, 16, 3, 8) == 146_304


def test_decode_is_two_n_per_token_plus_attention_over_the_context() -> None:
    # 2 * N * b + 4 * L * b * 1 * ctx * (H * Q) at N=1000, L=2, H=4, Q=16, b=3, ctx=8: 6,000 + 12,288
    assert decode_flops(1000, 2, 4, 16, 3, 8) == 18_288


def test_a_decode_step_reads_the_weights_and_the_whole_kv_cache() -> None:
    # Llama-3-8B at batch 1 and 1024 positions: K and V x 32 layers x 8 KV heads x 128 x 1024 x 2 bytes = 128 MiB.
    cache = kv_cache_bytes(32, 8, 128, 1, 1024, 2)
    assert cache == 134_217_728
    assert kv_cache_bytes(32, 8, 128, 32, 1024, 2) == 32 * cache
    assert decode_step_bytes(15_009_849_344, cache) == 15_144_067_072

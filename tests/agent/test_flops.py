"""FLOP formulas against values computed by hand."""

from __future__ import annotations

from agent.flops import layer_flops, layer_forward_flops, matmul_flops, training_flops_per_token


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

"""The lean Llama's batch-1 projections (agent/models/llama_kernels.py ``_gemv``) over tile configurations, against
cuBLAS, then the whole decode step with the best of them: which ``GemvConfig`` the lean path ships with, measured.

    python3 benchmarks/gemv_sweep.py --out DIR          # on the GPU; JSON in DIR/gemv-sweep.json, a table last

1. Each projection of a Llama-3-8B layer and its LM head at one row (QKV and gate-up and the LM head with the RMSNorm
   fused before them, the output projection with the residual after it, down with SiLU · up before it and the
   residual after it), timed by triton's do_bench (L2 flushed before every call, CUDA events, median): GB/s of
   weights read, for every configuration and for cuBLAS's ``torch.mm`` (the unfused operation alone);
2. the decode step at batch 1 and 1,024 positions (Llama-3-8B, random weights, a CUDA graph replayed) with cuBLAS's
   projections (``TritonOps(gemv=None)``: the small kernels apart) and with the fused kernels of the best
   configurations, each step checked against the unfused one's logits; GB/s against the same process's best copy.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent.benchmarks.flops import decode_step_bytes, kv_cache_bytes
from agent.models import llama, llama_torch
from benchmarks.inference_profile import capture

CONFIGS = [(4, 1024, 4), (8, 512, 4), (8, 1024, 4), (8, 1024, 8), (16, 512, 4), (16, 1024, 8), (32, 512, 8),
           (4, 2048, 8), (2, 2048, 4), (2, 2048, 8), (4, 2048, 4), (4, 4096, 8), (2, 4096, 8), (4, 4096, 16),
           (8, 2048, 8), (8, 2048, 16)]  # fmt: skip
CONTEXT = 1024


def projections(shape: llama.LlamaShape) -> list[tuple[str, int, int, int, bool]]:
    """(name, n, k, prologue, residual) of each product a batch-1 step makes."""
    from agent.models import llama_kernels as k

    qkv = (shape.heads + 2 * shape.kv_heads) * shape.head_dim
    return [("qkv", qkv, shape.hidden, k.RMS_NORM, False), ("o", shape.hidden, shape.heads * shape.head_dim,
            k.PLAIN, True), ("gate_up", 2 * shape.ffn, shape.hidden, k.RMS_NORM, False),
            ("down", shape.hidden, shape.ffn, k.SILU_MUL, True), ("lm_head", shape.vocab, shape.hidden, k.RMS_NORM,
            False)]  # fmt: skip


def sweep(shape: llama.LlamaShape, device: Any, report: dict[str, Any]) -> None:
    rows = report.setdefault("projections", [])
    for name, n, width, prologue, residual in projections(shape):
        row = projection(device, name, n, width, prologue, residual)
        rows.append(row)
        print(f"{name:8} n={n:6} k={width:5} cuBLAS {row['cublas_gbps']:6,.0f} GB/s | "
              + " ".join(f"{c} {v:,.0f}" if isinstance(v, float) else f"{c} FAIL" for c, v in row["configs"].items()),
              flush=True)  # fmt: skip


def projection(device: Any, name: str, n: int, width: int, prologue: int, residual: bool) -> dict[str, Any]:
    """One product's GB/s through cuBLAS and through ``_gemv`` under every configuration."""
    import torch
    import triton.testing

    from agent.models import llama_kernels as k

    weight = torch.randn(n, width, device=device, dtype=torch.bfloat16)
    x = torch.randn(1, 2 * width if prologue == k.SILU_MUL else width, device=device, dtype=torch.bfloat16)
    norm = torch.randn(width, device=device, dtype=torch.bfloat16)
    out = torch.randn(1, n, device=device, dtype=torch.bfloat16)
    plain = x[:, :width].contiguous()
    cublas = triton.testing.do_bench(lambda: torch.mm(plain, weight.t()), return_mode="median")
    row: dict[str, Any] = {"name": name, "n": n, "k": width, "bytes": weight.numel() * 2,
                           "cublas_gbps": weight.numel() * 2 / cublas / 1e6, "configs": {}}  # fmt: skip
    for block_n, block_k, warps in CONFIGS:
        ops = k.TritonOps(k.GemvConfig(block_n, block_k, warps))
        label = f"{block_n}x{block_k}/{warps}"
        try:
            ms = triton.testing.do_bench(lambda ops=ops: ops.project(x, weight, out, norm, 1e-5, prologue, residual),
                                         return_mode="median")  # fmt: skip
            row["configs"][label] = weight.numel() * 2 / ms / 1e6
        except Exception as exc:  # a configuration the compiler or the card refuses
            row["configs"][label] = f"{type(exc).__name__}: {str(exc)[:120]}"
    return row


def copy_gbps(device: Any) -> float:
    """The best copy of 64 MiB, 256 MiB and 1 GiB of fp32 (reads plus writes): the agent's ``bw_copy`` figure."""
    import torch
    import triton.testing

    best = 0.0
    for n in (1 << 24, 1 << 26, 1 << 28):
        dst, src = torch.empty(n, device=device), torch.randn(n, device=device)
        best = max(best, 8 * n / triton.testing.do_bench(lambda d=dst, s=src: d.copy_(s), return_mode="median") / 1e6)
    return best


def step_ms(decode: llama_torch.LeanDecode, device: Any, replays: int = 60) -> float:
    """Median milliseconds of a captured step's replays (CUDA events around each)."""
    import torch

    graph, _ = capture(decode.step, device)
    for _ in range(5):
        graph.replay()
    samples = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def steps(shape: llama.LlamaShape, device: Any, report: dict[str, Any], top: list[str]) -> None:
    import torch

    from agent.models import llama_kernels as k

    torch.manual_seed(0)
    model = llama_torch.LeanLlama(shape, torch.bfloat16, device)
    cache = kv_cache_bytes(shape.layers, shape.kv_heads, shape.head_dim, 1, CONTEXT, 2)
    step_bytes = decode_step_bytes(shape.weight_bytes("bf16"), cache)
    copy = report["copy_gbps"]
    variants: list[tuple[str, k.GemvConfig | None]] = [("cuBLAS projections", None)]
    variants += [(c, k.GemvConfig(*map(int, c.replace("/", "x").split("x")))) for c in top]
    variants.append(("shipped " + str(k.GEMV), k.GEMV))
    reference = None
    for name, config in variants:
        model.ops = k.TritonOps(config)
        with torch.no_grad():
            torch.manual_seed(1)  # the same cache and token for every variant: their logits are comparable
            decode = llama_torch.LeanDecode(model, 1, CONTEXT)
            logits = decode.forward().float()
            reference = logits if reference is None else reference
            rel = float((logits - reference).norm() / reference.norm())
            ms = step_ms(decode, device)
        gbps = step_bytes / ms / 1e6
        row = {"variant": name, "ms": ms, "tokens_per_s": 1e3 / ms, "gbps": gbps, "of_copy": gbps / copy,
               "rel_logits_vs_cublas": rel}  # fmt: skip
        report.setdefault("steps", []).append(row)
        print(f"step {name:28} {ms:6.3f} ms {1e3 / ms:6.1f} tokens/s {gbps:7,.0f} GB/s {gbps / copy:6.1%} of copy; "
              f"logits vs cuBLAS {rel:.1e}", flush=True)  # fmt: skip
        del decode
        torch.cuda.empty_cache()


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--model", default="llama-3-8b", choices=sorted(llama.SHAPES))
    parser.add_argument("--top", type=int, default=3, help="configurations whose whole step is timed")
    parser.add_argument("--configs", default="", help="only these, as BLOCK_NxBLOCK_K/WARPS,... (default: all)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda", 0)
    shape = llama.SHAPES[args.model]
    if args.configs:
        CONFIGS[:] = [tuple(map(int, c.replace("/", "x").split("x"))) for c in args.configs.split(",")]  # type: ignore[misc]
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(device), "torch": torch.__version__,
                              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}  # fmt: skip
    out = args.out / "gemv-sweep.json"
    t0 = time.perf_counter()
    sweep(shape, device, report)
    report["copy_gbps"] = copy_gbps(device)
    print(f"copy {report['copy_gbps']:,.0f} GB/s; sweep {time.perf_counter() - t0:.0f} s", flush=True)
    out.write_text(json.dumps(report, indent=1))
    # The configurations with the least total time over one step's products (each weight's bytes at its GB/s).
    totals: dict[str, float] = {}
    layers = shape.layers
    for row in report["projections"]:
        times = 1 if row["name"] == "lm_head" else layers
        for c, v in row["configs"].items():
            totals[c] = totals.get(c, 0.0) + (times * row["bytes"] / v / 1e6 if isinstance(v, float) else 1e9)
    report["step_products_ms"] = dict(sorted(totals.items(), key=lambda kv: kv[1]))
    cublas_ms = sum((1 if r["name"] == "lm_head" else layers) * r["bytes"] / r["cublas_gbps"] / 1e6
                    for r in report["projections"])  # fmt: skip
    report["step_products_ms_cublas"] = cublas_ms
    print("products of a step, ms: cuBLAS " + f"{cublas_ms:.3f}; "
          + "; ".join(f"{c} {v:.3f}" for c, v in report["step_products_ms"].items()), flush=True)  # fmt: skip
    steps(shape, device, report, list(report["step_products_ms"])[: args.top])
    report["wall_s"] = time.perf_counter() - t0
    out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a decode step's time goes: the inference benchmark's decode step (``llama.StaticDecode``, built as the
benchmark builds it) captured in a CUDA graph, replayed under the profiler, its kernels grouped into matmuls,
attention and the rest (norms, rotary embedding, activations, residual adds, cache writes: small kernels whose
time does not depend on the bytes). On a machine without CUDA it counts the operators one step dispatches, each of
which is at least one kernel on a GPU.

    python3 benchmarks/inference_profile.py --model llama-3-8b --batch 1 --context 1024      # on the GPU
    python3 benchmarks/inference_profile.py --model llama-3-8b --batch 1 --compile           # the same, fused
    python3 benchmarks/inference_profile.py --model llama-tiny --layers 32                   # operator count, CPU

``--compile`` runs the same step through ``torch.compile`` (inductor fuses the small kernels) before capturing it:
not what the benchmark measures, but how much of the gap to the bandwidth limit the small kernels are. On the CPU
it checks that the compiled step gives the eager step's logits.

Prints one Markdown table and a line per finding; nothing is written.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import sys
from typing import Any

from agent.benchmarks.flops import decode_step_bytes, kv_cache_bytes
from agent.models import llama
from schemas import match_spec

MATMUL = ("gemm", "gemv", "xmma", "cutlass", "cublas", "splitk", "matmul")
ATTENTION = ("flash", "fmha", "attention", "sdpa")
#: Operators that only describe a tensor differently: no kernel.
VIEWS = {"view", "_unsafe_view", "transpose", "t", "slice", "unsqueeze", "expand", "reshape", "select", "as_strided",
         "detach", "alias", "permute", "squeeze", "split", "unbind", "empty", "empty_strided"}  # fmt: skip


def category(name: str) -> str:
    lowered = name.lower()
    if any(word in lowered for word in ATTENTION):
        return "attention"
    if any(word in lowered for word in MATMUL) or lowered in ("mm", "addmm", "bmm"):
        return "matmul"
    return "other"


def _shape(args: argparse.Namespace) -> llama.LlamaShape:
    shape = llama.SHAPES[args.model]
    return dataclasses.replace(shape, layers=args.layers) if args.layers else shape


def count_operators(args: argparse.Namespace) -> list[str]:
    """The operators one decode step dispatches on the CPU, by category (views left out)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    counts: collections.Counter[str] = collections.Counter()
    names: collections.Counter[str] = collections.Counter()

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, a: Any = (), kw: Any = None) -> Any:
            name = func.overloadpacket.__name__
            if name not in VIEWS:
                counts[category(name)] += 1
                names[name] += 1
            return func(*a, **(kw or {}))

    shape = _shape(args)
    model = llama.build(shape, torch.bfloat16, "sdpa", torch.device("cpu"))
    decode = llama.StaticDecode(model, args.batch, args.context)
    with torch.no_grad():
        decode.step()
        with Count():
            decode.step()
    total = sum(counts.values())
    return [
        f"{shape.name} with {shape.layers} layers, batch {args.batch}, {args.context} positions: {total} operators "
        f"per decode step ({counts['matmul']} matmuls, {counts['attention']} attention, {counts['other']} other)",
        "by name: " + ", ".join(f"{n} {c}" for n, c in names.most_common()),
    ]


def compiled_matches(args: argparse.Namespace) -> list[str]:
    """On the CPU: the compiled step's logits against the eager step's (``--compile``'s smoke test)."""
    import torch

    shape = _shape(args)
    model = llama.build(shape, torch.float32, "sdpa", torch.device("cpu"))
    decode = llama.StaticDecode(model, args.batch, args.context)
    with torch.no_grad():
        eager = decode.forward().clone()
        fused = torch.compile(decode.forward)()
    diff = float((fused - eager).abs().max())
    return [f"{shape.name}, {shape.layers} layers: compiled step's logits within {diff:.2e} of the eager step's"]


def capture(fn: Any, device: Any, warm: int = 3) -> tuple[Any, Any]:
    """``fn`` called ``warm`` times on a side stream (allocations, lazy loading), then captured: the CUDA graph of one
    call, and that call's output (which each replay rewrites)."""
    import torch

    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warm):
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        out = fn()
    return graph, out


def profile(args: argparse.Namespace) -> list[str]:
    """One step captured as a CUDA graph, ``--replays`` replays timed with events and traced by the profiler."""
    import torch
    from torch.profiler import ProfilerActivity

    device = torch.device("cuda", 0)
    shape = _shape(args)
    model = llama.build(shape, torch.bfloat16, "sdpa", device)
    decode = llama.StaticDecode(model, args.batch, args.context)
    step = torch.compile(decode.step) if args.compile else decode.step
    with torch.no_grad():
        graph, _ = capture(step, device)
        for _ in range(5):
            graph.replay()
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.replays):
            graph.replay()
        end.record()
        end.synchronize()
        step_s = start.elapsed_time(end) / 1e3 / args.replays
        with torch.profiler.profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.replays):
                graph.replay()
            torch.cuda.synchronize(device)
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    time_us: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for e in kernels:
        cat = category(e.name)
        time_us[cat] += getattr(e, "device_time", None) or e.cuda_time
        count[cat] += 1
    weights = shape.weight_bytes("bf16")
    cache = kv_cache_bytes(shape.layers, shape.kv_heads, shape.head_dim, args.batch, args.context, 2)
    step_bytes = decode_step_bytes(weights, cache)
    spec = match_spec(torch.cuda.get_device_name(device))
    peak = spec.bandwidth_gbps if spec else None
    lines = [
        f"## {shape.name} decode{' (torch.compile)' if args.compile else ''}, batch {args.batch}, {args.context} "
        f"positions, on {torch.cuda.get_device_name(device)}",
        "",
        f"step (graph replay, mean of {args.replays}): {step_s * 1e3:.3f} ms; {step_bytes / step_s / 1e9:,.0f} GB/s"
        + (f", {step_bytes / step_s / 1e9 / peak:.1%} of {peak:,.0f} GB/s" if peak else ""),
        "",
        "| kernels | per step | GPU ms per step | of the kernels' time |",
        "|---|---:|---:|---:|",
    ]
    total_us = sum(time_us.values()) or 1.0
    for cat in ("matmul", "attention", "other"):
        per_step_ms = time_us[cat] / args.replays / 1e3
        lines.append(f"| {cat} | {count[cat] / args.replays:.0f} | {per_step_ms:.3f} | {time_us[cat] / total_us:.1%} |")
    matmul_s = time_us["matmul"] / args.replays / 1e6
    if matmul_s:
        rate = weights / matmul_s / 1e9
        lines += ["", f"matmuls read the weights ({weights / 1e9:.2f} GB) at {rate:,.0f} GB/s"
                  + (f" ({rate / peak:.1%} of the datasheet)" if peak else "")]  # fmt: skip
    top = collections.Counter({e.name: 0.0 for e in kernels})
    for e in kernels:
        top[e.name] += getattr(e, "device_time", None) or e.cuda_time
    lines += ["", "slowest kernels (ms per step): " + "; ".join(
        f"{name[:70]} {us / args.replays / 1e3:.3f}" for name, us in top.most_common(8))]  # fmt: skip
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="llama-3-8b", choices=sorted(llama.SHAPES))
    parser.add_argument("--layers", type=int, default=0, help="override the model's layer count (0: keep it)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--context", type=int, default=1024)
    parser.add_argument("--replays", type=int, default=20)
    parser.add_argument("--compile", action="store_true", help="fuse the step with torch.compile first")
    args = parser.parse_args(argv)
    import torch

    if torch.cuda.is_available():
        lines = profile(args)
    else:
        lines = compiled_matches(args) if args.compile else count_operators(args)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

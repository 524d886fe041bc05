"""The transformers-benchmarks notebook method, for side-by-side comparison with flopfleet in the same lease.

It times exactly as micro_bench.ipynb does: ``torch.utils.benchmark.Timer(stmt).blocked_autorange(
min_run_time).median`` on one input, no L2 flush, blocks in training mode, the layer's FLOPs by the notebook's
formulas. Blocks are built by flopfleet's own builders, with the attention implementation set explicitly
(the notebook leaves it unset, which transformers 5 resolves to eager).

    python benchmarks/notebook_method.py --cells large --attn eager,sdpa --out notebook.json
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import torch
from torch.utils import benchmark

from agent.benchmarks.flops import layer_flops
from agent.models import families

#: (block, model, seq_lens, batches) as in the notebook.
LAYERS = (
    ("bert_layer", "bert-large", (128, 512), (2, 4, 8, 16, 32, 64, 128)),
    ("gpt2_block", "gpt2-medium", (512, 1024), (2, 4, 8, 16, 32, 64)),
    ("t5_encoder_block", "t5-large", (512,), (2, 4, 8, 16, 32, 64, 128)),
    ("t5_decoder_block", "t5-large", (512,), (2, 4, 8, 16, 32, 64, 128)),
)
MATMUL_SIZES = (128, 512, 2048, 4096, 8192, 16384)


def walltime(stmt: str, env: dict[str, Any], duration: float) -> float:
    return float(benchmark.Timer(stmt=stmt, globals=env).blocked_autorange(min_run_time=duration).median)


def matmul(duration: float, sizes: tuple[int, ...]) -> list[dict[str, Any]]:
    rows = []
    for dtype_name, dtype, tf32 in (("fp32", torch.float32, False), ("tf32", torch.float32, True),
                                    ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)):  # fmt: skip
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for n in sizes:
            a = torch.randn(n, n, dtype=dtype).cuda()
            b = torch.randn(n, n, dtype=dtype).cuda()
            t = walltime("a @ b", {"a": a, "b": b}, duration)
            rows.append({"dtype": dtype_name, "n": n, "tflops": 2 * n**3 / t / 1e12, "seconds": t})
            del a, b
    torch.backends.cuda.matmul.allow_tf32 = False
    return rows


def layers(duration: float, attn: str, large_only: bool) -> list[dict[str, Any]]:
    rows = []
    for block, model, seqs, batches in LAYERS:
        shape = families.SHAPES[model]
        layer = families.block(shape, block, attn).half().cuda()
        cross = block == "t5_decoder_block"
        chosen = batches[-2:] if large_only else batches
        for seq in seqs:
            for batch in chosen:
                x = torch.randn(batch, seq, shape.hidden).half().cuda()
                kwargs = "encoder_hidden_states=X" if cross else ""
                env = {"layer": layer, "X": x, "first": families.first_tensor}
                for mode, stmt in (("fwd", f"layer(X, {kwargs})"),
                                   ("fwd+bwd", f"first(layer(X, {kwargs})).sum().backward()")):  # fmt: skip
                    t = walltime(stmt, env, duration)
                    flops = layer_flops(batch, seq, shape.hidden, shape.ffn, mode=mode, cross_attention=cross)
                    rows.append({"block": block, "mode": mode, "batch": batch, "seq_len": seq, "attn": attn,
                                 "tflops": flops / t / 1e12, "seconds": t})  # fmt: skip
                del x
        del layer
        torch.cuda.empty_cache()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", choices=("large", "all"), default="large", help="layers: two largest batches")
    parser.add_argument("--attn", default="eager", help="comma-separated attention implementations")
    parser.add_argument("--min-run-time", type=float, default=1.0, help="seconds per cell (notebook: 3)")
    parser.add_argument("--matmul-sizes", default=",".join(map(str, MATMUL_SIZES)), help="comma-separated; '' skips")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    began = time.perf_counter()
    result: dict[str, Any] = {
        "method": "torch.utils.benchmark blocked_autorange(min_run_time).median, as micro_bench.ipynb",
        "min_run_time": args.min_run_time,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name(),
        "matmul": matmul(args.min_run_time, tuple(int(n) for n in args.matmul_sizes.split(",") if n)),
        "layers": [
            row for attn in args.attn.split(",") for row in layers(args.min_run_time, attn, args.cells == "large")
        ],
    }
    result["seconds"] = time.perf_counter() - began
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1)
    print(f"notebook method: {len(result['matmul'])} matmul and {len(result['layers'])} layer cells "
          f"in {result['seconds']:.0f} s -> {args.out}")  # fmt: skip


if __name__ == "__main__":
    main()

"""Where a standard layer cell's time goes before its timed repeats: the first call at a new shape against the next
ones, per block and cell, on the GPU (issue 24: the layers' cells spent 70-100 ms each before their first timed
repeat on the H200, far more than their settling windows).

    python3 benchmarks/layer_first_calls.py --out DIR      # DIR/layer-first-calls.json; a summary last

Each cell of the standard grid's BERT, GPT-2 and T5 encoder blocks, in the suite's order: the host time of the
first call (synchronised), the second and the third, and which SDPA kernels the first call ran (torch.profiler's
kernel names, attention only).
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

from agent import compat, models
from agent.suites import STANDARD


def cells(name: str) -> list[tuple[str, int, int, str]]:
    grid = STANDARD.grids[name]
    return [(d, s, b, m) for d in grid.dtypes for s in grid.seq_lens for b in grid.batches for m in grid.modes]


def main() -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--blocks", default="layer_bert,layer_gpt2,layer_t5_encoder")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda", 0)
    kinds = {"layer_bert": "bert_layer", "layer_gpt2": "gpt2_block", "layer_t5_encoder": "t5_encoder_block"}
    rows: list[dict[str, Any]] = []
    for name in args.blocks.split(","):
        grid = STANDARD.grids[name]
        shape = models.SHAPES[grid.model]
        built: dict[str, Any] = {}
        for dtype, seq, batch, mode in cells(name):
            if dtype not in built:
                built.clear()
                with device:
                    layer = models.block(shape, kinds[name], "sdpa")
                built[dtype] = layer.to(device=device, dtype=getattr(torch, {"fp16": "float16"}.get(dtype, "bfloat16")))
                built[dtype].train()
            layer = built[dtype]
            x = torch.randn(batch, seq, shape.hidden, device=device, dtype=next(layer.parameters()).dtype)
            kwargs = compat.forward_kwargs(layer, seq, device)

            def call(layer: Any = layer, x: Any = x, kwargs: Any = kwargs, mode: str = mode) -> None:
                out = compat.first_tensor(layer(x, **kwargs))
                if mode != "fwd":
                    out.sum().backward()

            times = []
            for _ in range(3):
                torch.cuda.synchronize(device)
                t0 = time.perf_counter()
                call()
                torch.cuda.synchronize(device)
                times.append(time.perf_counter() - t0)
            ms = [t * 1e3 for t in times]
            rows.append({"block": name, "dtype": dtype, "seq": seq, "batch": batch, "mode": mode, "first_ms": ms[0],
                         "second_ms": ms[1], "third_ms": ms[2]})  # fmt: skip
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize(device)
        attention = sorted({e.name[:80] for e in prof.events() if "attn" in e.name.lower() or "fmha" in e.name.lower()
                            or "flash" in e.name.lower() or "cudnn" in e.name.lower()})  # fmt: skip
        print(f"{name}: attention kernels of its last cell: {attention}", flush=True)
    for name in args.blocks.split(","):
        mine = [r for r in rows if r["block"] == name]
        first = [r["first_ms"] for r in mine]
        later = [r["third_ms"] for r in mine]
        print(f"{name}: {len(mine)} cells; first call median {statistics.median(first):.1f} ms (sum {sum(first):.0f}),"
              f" third call median {statistics.median(later):.1f} ms (sum {sum(later):.0f})", flush=True)  # fmt: skip
    (args.out / "layer-first-calls.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

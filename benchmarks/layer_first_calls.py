"""Where a standard layer cell's time goes before its timed repeats: the first call at a new shape against the next
ones, per block and cell, on the GPU (issue 24: the layers' cells spent 70-100 ms each before their first timed
repeat on the H200, far more than their settling windows).

    python3 benchmarks/layer_first_calls.py --out DIR      # DIR/layer-first-calls.json; a summary last
    python3 benchmarks/layer_first_calls.py --out DIR --backend flash,efficient --name flash   # ...-flash.json
    TORCH_CUDNN_SDPA_AVOID_RECOMPILE=1 python3 benchmarks/layer_first_calls.py --out DIR --name avoid-recompile

Each cell of the standard grid's BERT, GPT-2 and T5 encoder blocks, in the suite's order: the host time of the
first call (synchronised), the second and the third, and which SDPA kernels the first call ran (torch.profiler's
kernel names, attention only). ``--backend`` holds SDPA to one of torch's backends (the default lets torch choose);
``--profile K`` prints where the host time of each block's K-th cell's first call went (torch.profiler, CPU ops by
self time).
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

from agent import compat
from agent.harness.suites import STANDARD
from agent.models import families


def cells(name: str) -> list[tuple[str, int, int, str]]:
    grid = STANDARD.grids[name]
    return [(d, s, b, m) for d in grid.dtypes for s in grid.seq_lens for b in grid.batches for m in grid.modes]


def main() -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--blocks", default="layer_bert,layer_gpt2,layer_t5_encoder")
    parser.add_argument(
        "--backend", default="default", help="default, or the SDPA backends allowed (cudnn,flash,efficient,math)"
    )
    parser.add_argument("--name", default="", help="a suffix for the output file")
    parser.add_argument("--profile", type=int, default=0, help="profile the first call of each block's K-th cell")
    args = parser.parse_args()
    if args.backend != "default":
        from torch.nn.attention import SDPBackend, sdpa_kernel

        known = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
                 "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}  # fmt: skip
        held = sdpa_kernel([known[b] for b in args.backend.split(",")])
        held.__enter__()  # for the whole process: kept referenced, or its collection would restore torch's choice
    args.out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda", 0)
    kinds = {"layer_bert": "bert_layer", "layer_gpt2": "gpt2_block", "layer_t5_encoder": "t5_encoder_block"}
    rows: list[dict[str, Any]] = []
    for name in args.blocks.split(","):
        grid = STANDARD.grids[name]
        shape = families.SHAPES[grid.model]
        built: dict[str, Any] = {}
        for index, (dtype, seq, batch, mode) in enumerate(cells(name)):
            if dtype not in built:
                built.clear()
                with device:
                    layer = families.block(shape, kinds[name], "sdpa")
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
            for attempt in range(3):
                torch.cuda.synchronize(device)
                profiled = attempt == 0 and index == args.profile > 0
                prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if profiled else None
                t0 = time.perf_counter()
                if prof is not None:
                    with prof:
                        call()
                        torch.cuda.synchronize(device)
                else:
                    call()
                    torch.cuda.synchronize(device)
                times.append(time.perf_counter() - t0)
                if prof is not None:
                    print(
                        f"{name} {dtype} seq={seq} batch={batch} {mode}: first call {times[-1] * 1e3:.1f} ms, "
                        "host time by op:",
                        flush=True,
                    )
                    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12), flush=True)
            ms = [t * 1e3 for t in times]
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            steady = []
            for _ in range(10):  # back to back: the GPU's time per call once the host has built everything
                start.record()
                call()
                end.record()
                end.synchronize()
                steady.append(start.elapsed_time(end))
            rows.append({"block": name, "dtype": dtype, "seq": seq, "batch": batch, "mode": mode, "first_ms": ms[0],
                         "second_ms": ms[1], "third_ms": ms[2],
                         "steady_ms": statistics.median(steady)})  # fmt: skip
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
        steady = [r["steady_ms"] for r in mine]
        print(f"{name}: {len(mine)} cells; first call median {statistics.median(first):.1f} ms (sum {sum(first):.0f}),"
              f" third call median {statistics.median(later):.1f} ms (sum {sum(later):.0f}),"
              f" steady sum {sum(steady):.1f} ms", flush=True)  # fmt: skip
    (args.out / f"layer-first-calls{'-' + args.name if args.name else ''}.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

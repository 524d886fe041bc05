"""How a heavy layer cell's first timed windows depend on what ran just before it (issue 24): after a heavy load, the
GPU idle for a rest of R ms, then the cell's first repeats, as a settling warm-up times them.

    python3 benchmarks/rest_before_cell.py --out DIR          # DIR/rest-before-cell.json; a table last

With its first calls prepared ahead (rehearsal), a layer cell follows the previous one without the 70-100 ms pause
its first call used to make, and the standard suite's heavy cells moved by 3-4 % between runs (their SM clock 1725
against 1965 MHz). This measures, for BERT-large blocks at batch 128 and 512 tokens (fp16, fwd and fwd+bwd, one
CUDA-graph replay a call): 0.4 s of the cell's own load, a rest of R ms, then 8 calls each timed by CUDA events; the
median of the first 4 (the 2 windows of 8 ms a settling warm-up compares) for each R, over 4 trials in shuffled
order; and the same cell after 0.15 s more of load instead of a rest (the sustained regime).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agent import compat
from agent.models import families


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rests-ms", default="0,5,10,20,40,80,160,1000")
    parser.add_argument("--trials", type=int, default=4)
    args = parser.parse_args()
    import pynvml
    import torch

    args.out.mkdir(parents=True, exist_ok=True)
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    device = torch.device("cuda", 0)
    shape = families.SHAPES["bert-large"]
    with device:
        layer = families.block(shape, "bert_layer", "sdpa").to(device=device, dtype=torch.float16).train()
    x = torch.randn(128, 512, shape.hidden, device=device, dtype=torch.float16)
    kwargs = compat.forward_kwargs(layer, 512, device)
    graphs: dict[str, Any] = {}
    for mode in ("fwd", "fwd+bwd"):

        def call(mode: str = mode) -> None:
            out = compat.first_tensor(layer(x, **kwargs))
            if mode != "fwd":
                out.sum().backward()

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                call()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
        graphs[mode] = graph

    def load(graph: Any, seconds: float) -> None:
        began = time.perf_counter()
        while time.perf_counter() - began < seconds:
            for _ in range(8):
                graph.replay()
            torch.cuda.synchronize()

    def timed(graph: Any, calls: int = 8) -> list[float]:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
        for start, end in events:
            start.record()
            graph.replay()
            end.record()
        events[-1][1].synchronize()
        return [s.elapsed_time(e) for s, e in events]

    rests = [float(r) / 1e3 for r in args.rests_ms.split(",")]
    plan = [(mode, rest) for mode in graphs for rest in [*rests, -0.15] for _ in range(args.trials)]
    random.Random(0).shuffle(plan)
    rows = []
    for mode, rest in plan:
        graph = graphs[mode]
        load(graph, 0.4)
        if rest >= 0:
            time.sleep(rest)
        else:
            load(graph, -rest)  # sustained: 0.15 s more of the same load, no rest
        clock = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        times = timed(graph)
        rows.append({"mode": mode, "rest_s": rest, "first4_ms": statistics.median(times[:4]),
                     "next4_ms": statistics.median(times[4:]), "sm_mhz_before": clock})  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)
    (args.out / "rest-before-cell.json").write_text(json.dumps(rows, indent=1))
    print("mode     rest        first 4 calls (ms): mean  spread   next 4: mean   SM MHz before")
    for mode in graphs:
        for rest in [*rests, -0.15]:
            mine = [r for r in rows if r["mode"] == mode and r["rest_s"] == rest]
            first = [r["first4_ms"] for r in mine]
            label = "0.15 s more load" if rest < 0 else f"{rest * 1e3:g} ms"
            print(f"{mode:8s} {label:16s} {statistics.fmean(first):7.3f} {100 * (max(first) / min(first) - 1):6.2f} % "
                  f"{statistics.fmean(r['next4_ms'] for r in mine):8.3f}   "
                  f"{statistics.median(r['sm_mhz_before'] for r in mine):6.0f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

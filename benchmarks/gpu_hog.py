"""A competing process on one GPU: bf16 matmuls for ``duty`` of every ``period_s``, idle for the rest.

The only way flopfleet slows a lent GPU down for a test (its power limit, clocks and MIG mode are never touched):
``python benchmarks/gpu_hog.py --duty 0.3`` until killed. The agent's measurements then share the GPU with it.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--duty", type=float, required=True, help="Fraction of each period spent computing (0-1].")
    parser.add_argument("--period-s", type=float, default=0.05)
    parser.add_argument("--n", type=int, default=4096, help="Matmul size: short kernels, so the duty cycle holds.")
    parser.add_argument("--device", default="cuda:0")
    args = parser.parse_args()
    if not 0 < args.duty <= 1:
        parser.error("--duty must be in (0, 1]")
    import torch

    a = torch.randn(args.n, args.n, device=args.device, dtype=torch.bfloat16)
    b = torch.randn(args.n, args.n, device=args.device, dtype=torch.bfloat16)
    busy = args.duty * args.period_s
    print("hog ready", flush=True)
    while True:
        start = time.perf_counter()
        while time.perf_counter() - start < busy:
            torch.matmul(a, b)
            torch.cuda.synchronize(args.device)
        idle = args.period_s - (time.perf_counter() - start)
        if idle > 0:
            time.sleep(idle)


if __name__ == "__main__":
    main()

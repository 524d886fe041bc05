"""Pinned host<->device bandwidth every half second for a minute or more: how long a lent host's h2d dips last.

Pinned h2d read 15-32 % low for minutes on 3 of 16 lent H100 hosts while d2h stayed at 55 GB/s, and a check during a
dip is `slow` on h2d, confirmed by its re-measurement a second later (docs/results/h100.md, "Pinned h2d dips"). Whether
a re-measurement after a pause would tell a dip from a slow host depends on how long dips last: this prints each
sample (the median of 5 copies of 64 MiB each way, timed by events) and, per direction, the samples under 90 % of the
best and the longest run of them in seconds.

    python benchmarks/h2d_watch.py [--seconds 90] [--out watch.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

SIZE = 64 << 20
COPIES = 5
DIP = 0.90


def copy_gbs(dst: Any, src: Any, copies: int = COPIES) -> float:
    """The median GB/s of ``copies`` copies of ``src`` into ``dst`` (pinned host memory and a GPU tensor, either way),
    each timed by an event pair; also what benchmarks/h2d_numa.py and the gpu check test time."""
    import torch

    times = []
    for _ in range(copies):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src, non_blocking=True)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return src.numel() * src.element_size() / sorted(times)[copies // 2] / 1e9


def longest_dip(samples: list[tuple[float, float]], best: float) -> float:
    """The longest span in seconds of consecutive samples (time, GB/s) under ``DIP`` of ``best``."""
    longest, began = 0.0, None
    for t, gbs in samples:
        if gbs < DIP * best:
            began = t if began is None else began
            longest = max(longest, t - began)
        else:
            began = None
    return longest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--every", type=float, default=0.5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    import torch

    host = torch.full((SIZE,), 7, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(SIZE, dtype=torch.uint8, device="cuda")
    copy_gbs(dev, host), copy_gbs(host, dev)  # warm up
    rows: dict[str, list[tuple[float, float]]] = {"h2d": [], "d2h": []}
    t0 = time.monotonic()
    while (now := time.monotonic() - t0) < args.seconds:
        rows["h2d"].append((now, copy_gbs(dev, host)))
        rows["d2h"].append((now, copy_gbs(host, dev)))
        print(f"{now:6.1f} s  h2d {rows['h2d'][-1][1]:6.2f}  d2h {rows['d2h'][-1][1]:6.2f} GB/s", flush=True)
        time.sleep(max(0.0, args.every - (time.monotonic() - t0 - now)))
    for name, samples in rows.items():
        values = [g for _, g in samples]
        best = max(values)
        low = sum(g < DIP * best for g in values)
        print(f"{name}: {len(values)} samples, best {best:.2f}, median {sorted(values)[len(values) // 2]:.2f}, "
              f"{low} under {DIP:.0%} of best, longest such run {longest_dip(samples, best):.1f} s")  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

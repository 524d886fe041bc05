"""Pinned host->device bandwidth from each NUMA node of the host: is a lent machine's h2d spread run to run (41-55 GB/s
on one H100 host, docs/results/h100.md) where the process's CPUs and pinned buffer sit, not the link?

For GPU 0 it prints the node the GPU's PCI device names (/sys/bus/pci/devices/<bus>/numa_node) and, for the process's
default CPUs and then each node's CPUs alone, the median GB/s of a 256 MiB pinned copy allocated after the move (the
kernel places its pages on the node that first touches them), in a child process each so no buffer is shared.

    python benchmarks/h2d_numa.py [--out numa.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.h2d_watch import copy_gbs

SIZE = 256 << 20
REPEATS = 20


def _nodes() -> dict[str, set[int]]:
    """Each NUMA node's CPUs, as the kernel lists them; one node where /sys has none."""
    out: dict[str, set[int]] = {}
    for node in sorted(Path("/sys/devices/system/node").glob("node[0-9]*")):
        cpus: set[int] = set()
        for part in (node / "cpulist").read_text().strip().split(","):
            if part:
                lo, _, hi = part.partition("-")
                cpus.update(range(int(lo), int(hi or lo) + 1))
        out[node.name] = cpus & os.sched_getaffinity(0)
    return {k: v for k, v in out.items() if v} or {"all": os.sched_getaffinity(0)}


def _gpu_node() -> str:
    import torch

    p = torch.cuda.get_device_properties(0)
    bus = f"{p.pci_domain_id:04x}:{p.pci_bus_id:02x}:{p.pci_device_id:02x}.0"
    path = Path("/sys/bus/pci/devices") / bus / "numa_node"
    return f"{bus} numa_node={path.read_text().strip() if path.exists() else '?'}"


def _copy(cpus: list[int] | None, queue: mp.Queue) -> None:  # type: ignore[type-arg]
    if cpus:
        os.sched_setaffinity(0, cpus)
    import torch

    host = torch.full((SIZE,), 7, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty(SIZE, dtype=torch.uint8, device="cuda")
    copy_gbs(dev, host, 3)  # warm up
    queue.put(copy_gbs(dev, host, REPEATS))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    rows: dict[str, float] = {}
    for name, cpus in [("default", None), *((k, sorted(v)) for k, v in _nodes().items())]:
        for attempt in range(2):
            queue = ctx.Queue()
            child = ctx.Process(target=_copy, args=(cpus, queue))
            child.start()
            child.join(60)
            rows[f"{name} #{attempt + 1}"] = queue.get(timeout=5)
    gpu = _gpu_node()
    print("GPU 0 PCI", gpu)
    for name, gbs in rows.items():
        print(f"{name:14s} h2d pinned 256 MiB {gbs:7.2f} GB/s")
    if args.out:
        args.out.write_text(json.dumps({"gpu": gpu, "gb_s": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

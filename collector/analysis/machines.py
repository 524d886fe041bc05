"""Machines with several GPUs: how their GPUs are linked, what the links carry, and how training scales.

One row per host and GPU count, from its latest run with collective or data-parallel results: the links
between its GPUs (``nvidia-smi topo -m``), the best all-reduce bus bandwidth at 1 GiB and above (where NCCL's
ring reaches the links' bandwidth), and the data-parallel scaling efficiency of GPT-2-medium.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .compare import Series

#: nvidia-smi's link codes, fastest first.
LINKS = {
    "NV": "NVLink",
    "PIX": "PCIe switch",
    "PXB": "PCIe switches",
    "PHB": "PCIe host bridge",
    "NODE": "PCIe + host bridges in a NUMA node",
    "SYS": "PCIe + CPU interconnect (across NUMA nodes)",
}
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
GiB = 1 << 30


@dataclass(frozen=True)
class MultiGpuMachine:
    hostname: str
    card: str
    gpus: int
    nodes: int
    links: str
    nvlink_active: int | None
    allreduce_busbw_gbps: float | None
    allreduce_bytes: int | None
    ddp_tokens_per_s: float | None
    scaling_efficiency: float | None
    run_id: str


def link_summary(topology: str | None) -> str:
    """'NVLink (NV18)' or 'PCIe switch (PIX)': the kinds of link between GPU pairs in ``nvidia-smi topo -m``."""
    if not topology:
        return "unknown"
    lines = [_ANSI.sub("", line) for line in topology.splitlines()]
    # The header row names the columns ("GPU0 GPU1 CPU Affinity ..."); each later row starts with its GPU.
    start = next((i for i, line in enumerate(lines) if "GPU0" in line), None)
    if start is None:
        return "unknown"
    gpus = [h for h in lines[start].split() if re.fullmatch(r"GPU\d+", h)]
    kinds: set[str] = set()
    for line in lines[start + 1 :]:
        cells = line.split()
        if not cells or not re.fullmatch(r"GPU\d+", cells[0]):
            continue
        kinds.update(c for c in cells[1 : 1 + len(gpus)] if c != "X")
    if not kinds:
        return "unknown"
    named = []
    for code in sorted(kinds, key=_rank):
        family = "NV" if code.startswith("NV") else code
        named.append(f"{LINKS.get(family, code)} ({code})")
    return ", ".join(named)


def _rank(code: str) -> int:
    order = list(LINKS)
    family = "NV" if code.startswith("NV") else code
    return order.index(family) if family in order else len(order)


def multi_gpu_machines(rows: list[dict[str, Any]]) -> list[MultiGpuMachine]:
    """One per host and GPU count, from ``Reads.machines`` (each one's latest multi-GPU figures)."""
    return [
        MultiGpuMachine(
            hostname=str(r["hostname"]),
            card=str(r["card"]),
            gpus=int(r["world_size"]),
            nodes=int(r["nodes"] or 1),
            links=link_summary(r["topology"]),
            nvlink_active=int(r["nvlink_active"]) if r["nvlink_active"] is not None else None,
            allreduce_busbw_gbps=float(r["allreduce_busbw_gbps"]) if r["allreduce_busbw_gbps"] is not None else None,
            allreduce_bytes=int(r["allreduce_bytes"]) if r["allreduce_bytes"] is not None else None,
            ddp_tokens_per_s=float(r["ddp_tokens_per_s"]) if r["ddp_tokens_per_s"] is not None else None,
            scaling_efficiency=float(r["scaling_efficiency"]) if r["scaling_efficiency"] is not None else None,
            run_id=str(r["run_id"]),
        )
        for r in rows
    ]


def busbw_series(rows: list[tuple[Any, ...]]) -> dict[str, list[Series]]:
    """Bus bandwidth against message size, per collective, one line per host and GPU count
    (``Reads.machine_points``)."""
    charts: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for op, label, size, busbw in rows:
        charts.setdefault(str(op), {}).setdefault(str(label), []).append((float(size), float(busbw)))
    return {op: [Series(label, points) for label, points in lines.items()] for op, lines in charts.items()}

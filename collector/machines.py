"""Machines with several GPUs: how their GPUs are linked, what the links carry, and how training scales.

One row per host and GPU count, from its latest run with collective or data-parallel results: the links
between its GPUs (``nvidia-smi topo -m``), the best all-reduce bus bandwidth at 1 GiB and above (where NCCL's
ring reaches the links' bandwidth), and the data-parallel scaling efficiency of GPT-2-medium.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import duckdb

from .compare import Series
from .figures import TRUSTED

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


def multi_gpu_machines(con: duckdb.DuckDBPyConnection) -> list[MultiGpuMachine]:
    rows = con.execute(
        f"""
        WITH latest AS (
            SELECT hostname, world_size, arg_max(run_id, started_at) AS run_id
            FROM result_facts
            WHERE status = 'ok' AND world_size > 1 AND benchmark IN ('collective', 'training') AND device = 'cuda'
            GROUP BY hostname, world_size
        )
        SELECT l.hostname, any_value(f.card), l.world_size, max(coalesce(f.nodes, 1)), any_value(ru.topology),
               (SELECT min(g.nvlink_active) FROM gpus g WHERE g.run_id = l.run_id),
               max(f.busbw_gbps) FILTER (WHERE f.benchmark = 'collective' AND f.op = 'all_reduce'
                                         AND f.bytes >= {GiB} AND {TRUSTED}),
               arg_max(f.bytes, f.busbw_gbps) FILTER (WHERE f.benchmark = 'collective' AND f.op = 'all_reduce'
                                                     AND f.bytes >= {GiB} AND {TRUSTED}),
               max(f.tokens_per_s) FILTER (WHERE f.benchmark = 'training' AND f.world_size = l.world_size),
               max(f.scaling_efficiency) FILTER (WHERE f.benchmark = 'training'),
               CAST(l.run_id AS VARCHAR)
        FROM latest l
        JOIN result_facts f ON f.run_id = l.run_id
        JOIN runs ru ON ru.run_id = l.run_id
        GROUP BY l.hostname, l.world_size, l.run_id
        ORDER BY l.hostname, l.world_size
        """
    ).fetchall()
    return [
        MultiGpuMachine(
            hostname=str(host),
            card=str(card),
            gpus=int(world),
            nodes=int(nodes),
            links=link_summary(topology),
            nvlink_active=int(nvlink) if nvlink is not None else None,
            allreduce_busbw_gbps=float(busbw) if busbw is not None else None,
            allreduce_bytes=int(at) if at is not None else None,
            ddp_tokens_per_s=float(tokens) if tokens is not None else None,
            scaling_efficiency=float(eff) if eff is not None else None,
            run_id=run_id,
        )
        for host, card, world, nodes, topology, nvlink, busbw, at, tokens, eff, run_id in rows
    ]


def busbw_series(con: duckdb.DuckDBPyConnection) -> dict[str, list[Series]]:
    """Bus bandwidth against message size, per collective, one line per host and GPU count (latest run)."""
    rows = con.execute(
        f"""
        WITH latest AS (
            SELECT hostname, world_size, arg_max(run_id, started_at) AS run_id
            FROM result_facts WHERE benchmark = 'collective' AND status = 'ok' AND device = 'cuda'
            GROUP BY hostname, world_size
        )
        SELECT f.op, f.hostname || ' · ' || f.card || ' ×' || f.world_size, f.bytes, median(f.busbw_gbps)
        FROM result_facts f JOIN latest l USING (run_id)
        WHERE f.benchmark = 'collective' AND {TRUSTED}
        GROUP BY ALL ORDER BY 1, 2, 3
        """
    ).fetchall()
    charts: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for op, label, size, busbw in rows:
        charts.setdefault(str(op), {}).setdefault(str(label), []).append((float(size), float(busbw)))
    return {op: [Series(label, points) for label, points in lines.items()] for op, lines in charts.items()}

"""The report's multi-GPU section, from the run the agent made on a lent 2×H200 machine and a built PCIe one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from collector.analysis.machines import link_summary, multi_gpu_machines
from collector.read.report import build_report
from collector.store import Store
from schemas import RunSubmission
from scripts.results_files import read_text
from tests.factories import gpu, make_run, timing
from tests.servers import Collector

LEASE = Path(__file__).resolve().parents[2] / "docs" / "results" / "h200-x2" / "multi1.json"
PCIE_TOPOLOGY = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity
GPU0\t X \tPIX\tSYS\tSYS\t0-15\t0
GPU1\tPIX\t X \tSYS\tSYS\t0-15\t0
GPU2\tSYS\tSYS\t X \tPIX\t16-31\t1
GPU3\tSYS\tSYS\tPIX\t X \t16-31\t1

Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)"""


def _collective(op: str, size: int, busbw: float, world: int) -> dict[str, object]:
    factor = 2 * (world - 1) / world if op == "all_reduce" else (world - 1) / world
    return {
        "benchmark": "collective", "name": "collective", "gpu_index": None, "status": "ok",
        "params": {"op": op, "backend": "nccl", "dtype": "fp32", "bytes": size, "world_size": world},
        "metrics": {"algbw_gbps": busbw / factor, "busbw_gbps": busbw, "rel_error": 0.0},
        "timing": timing(size / (busbw / factor) / 1e9),
    }  # fmt: skip


def test_topology_is_summarised_by_its_fastest_links_first() -> None:
    assert link_summary(PCIE_TOPOLOGY) == "PCIe switch (PIX), PCIe + CPU interconnect (across NUMA nodes) (SYS)"
    assert link_summary("\x1b[4m\tGPU0\tGPU1\x1b[0m\nGPU0\t X \tNV18\nGPU1\tNV18\t X ") == "NVLink (NV18)"
    assert link_summary(None) == "unknown" and link_summary("nvidia-smi topo -m: not available") == "unknown"


def test_a_lent_h200_pair_and_a_pcie_box_appear_with_their_links_bandwidth_and_scaling(tmp_path: Path) -> None:
    store = Store(tmp_path / "machines.duckdb")
    lease = RunSubmission.model_validate_json(read_text(LEASE))
    store.add_run(lease)
    pcie = make_run(
        [_collective("all_reduce", 1 << 30, 11.5, 4), _collective("all_reduce", 1 << 33, 12.25, 4),
         _collective("all_reduce", 1 << 20, 3.0, 4), _collective("all_gather", 1 << 30, 10.0, 4)],
        gpus=[gpu("NVIDIA L40S", i, 48, host="box") for i in range(4)],
        hostname="box",
        topology=PCIE_TOPOLOGY,
    )  # fmt: skip
    store.add_run(pcie)
    machines = {m.hostname: m for m in multi_gpu_machines(store.reads().machines())}
    assert set(machines) == {lease.host.hostname, "box"}
    h200 = machines[lease.host.hostname]
    big = [r for r in lease.results if r.benchmark == "collective" and r.params.op == "all_reduce"  # type: ignore[union-attr]
           and r.params.bytes >= 1 << 30]  # type: ignore[union-attr]  # fmt: skip
    assert h200.allreduce_busbw_gbps == pytest.approx(max(r.metrics.busbw_gbps for r in big))  # type: ignore[union-attr]
    ddp = [r for r in lease.results if r.name == "training_ddp" and r.params.world_size == 2]  # type: ignore[union-attr]
    assert h200.scaling_efficiency == pytest.approx(ddp[0].metrics.scaling_efficiency)  # type: ignore[union-attr]
    assert (h200.gpus, h200.links, h200.nvlink_active) == (2, "NVLink (NV18)", 18)
    box = machines["box"]
    assert (box.gpus, box.allreduce_busbw_gbps, box.allreduce_bytes) == (4, 12.25, 1 << 33)
    assert box.links.startswith("PCIe switch (PIX)") and box.scaling_efficiency is None
    markdown = build_report(store.reads(), "md")
    assert "## Multi-GPU machines" in markdown and "| box | NVIDIA L40S 48 GiB · 700 W | 4 | PCIe switch" in markdown
    html = build_report(store.reads(), "html")
    assert 'id="machines"' in html and "all-reduce bus bandwidth" in html and "all-gather bus bandwidth" in html
    assert json.loads(read_text(LEASE))["topology"].count("NV18") == 2


def test_a_run_page_shows_how_its_gpus_are_linked(collector: Collector) -> None:
    import httpx

    body = read_text(LEASE).encode()
    posted = httpx.post(f"{collector.url}/api/v1/runs", content=body, headers={**collector.auth,
                        "Content-Type": "application/json"})  # fmt: skip
    assert posted.status_code == 201, posted.text
    run_id = json.loads(body)["run_id"]
    page = httpx.get(f"{collector.url}/runs/{run_id}", headers=collector.auth)
    assert page.status_code == 200
    assert "NV18" in page.text and "18 NVLinks up" in page.text and "NCCL settings: NCCL_NVLS_ENABLE=0" in page.text
    assert "\x1b" not in page.text

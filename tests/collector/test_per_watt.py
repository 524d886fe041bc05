"""Every figure per watt: results that read the board's power (``timing.power_w``, agent/machine/energy.py) give each
figure a twin per watt, the ``per_watt`` SQL view, and per-watt rows in the cross-card table and the report; results
that did not read it give none. A real DuckDB file under tmp_path, runs built by code."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.read.report import build_report
from collector.read.views import comparison
from collector.store import Store
from tests.factories import bandwidth, gpu, inference, make_run, matmul, run_dict
from tests.servers import serve_collector

PROMTOOL = shutil.which("promtool")


def _powered(result: dict[str, Any], watts: float) -> dict[str, Any]:
    result["timing"] |= {"power_w": watts, "energy_j": watts * 0.3, "energy_span_s": 0.3}
    return result


def _copy(gbps: float) -> dict[str, Any]:
    result = bandwidth(1 << 28, gbps)
    result["params"] |= {"op": "copy", "flops_per_call": 0}
    return result


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("per_watt") / "w.duckdb"
    powered = make_run([
        _powered(matmul(8192, "bf16", 700.0), 680.0),
        _powered(matmul(4096, "bf16", 600.0), 500.0),  # lower, at less power: the best figure's power is what counts
        _powered(_copy(4200.0), 420.0),
        _powered(inference("decode", 1, 1024, 5e-3), 400.0),
    ], gpus=[gpu("NVIDIA H200", memory_gib=141)], hostname="powered")  # fmt: skip
    unpowered = make_run([matmul(8192, "bf16", 650.0)], gpus=[gpu("NVIDIA H200", memory_gib=141, host="other")],
                         hostname="other")  # fmt: skip
    with Store(path) as s:
        s.add_run(powered)
        s.add_run(unpowered)
        s.settle()
        yield s, str(powered.run_id), str(unpowered.run_id)


def _figures(s: Store, run_id: str) -> dict[str, float]:
    rows = s.sql(f"SELECT figure, value FROM figures WHERE run_id = '{run_id}'", max_rows=500).rows
    return {str(f): float(v) for f, v in rows}


def test_each_figure_has_a_twin_over_the_power_its_best_result_was_measured_at(store: Any) -> None:
    s, powered, unpowered = store
    figures = _figures(s, powered)
    assert figures["matmul_bf16"] == 700.0
    assert figures["matmul_bf16_per_w"] == pytest.approx(700.0 / 680.0)
    assert figures["bw_copy_per_w"] == pytest.approx(4200.0 / 420.0)
    assert figures["llama3_8b_decode_b1_per_w"] == pytest.approx(1 / 5e-3 / 400.0)  # tokens/J
    assert not any(f.endswith("_per_w") for f in _figures(s, unpowered))  # no power read: no twin, never a guess


def test_the_per_watt_view_has_every_powered_result_with_its_unit(store: Any) -> None:
    s, _, _ = store
    rows = s.sql(
        "SELECT benchmark, figure, unit, power_w, per_watt, per_watt_unit, joules_per_call, hostname FROM per_watt "
        "ORDER BY benchmark, figure DESC", max_rows=50,
    ).rows  # fmt: skip
    by = {(r[0], r[1]): r for r in rows}
    assert {r[7] for r in rows} == {"powered"}
    assert len(rows) == 4
    bf16 = by[("matmul", 700.0)]
    assert bf16[2] == "TFLOPS" and bf16[5] == "TFLOPS/W" and bf16[4] == pytest.approx(700.0 / 680.0)
    assert bf16[6] == pytest.approx(680.0 * 2 * 8192**3 / 700.0e12)  # joules per call: power x median time
    assert {r[5] for r in rows} == {"TFLOPS/W", "GB/s/W", "tokens/J"}


def test_the_report_has_per_watt_rows_after_the_price(store: Any) -> None:
    s, _, _ = store
    cmp = comparison(s.reads())
    row = cmp.row("matmul_bf16_per_w")
    assert row is not None and row.unit == "TFLOPS/W"
    cells = [c for c, card in zip(row.cells, cmp.cards, strict=True) if c is not None and card.measured]
    assert len(cells) == 1 and cells[0].median == pytest.approx(700.0 / 680.0)  # the unpowered GPU has no cell
    keys = [r.key for r in cmp.rows]
    assert keys.index("matmul_bf16_per_w") > max(keys.index(k) for k in ("matmul_bf16", "bw_copy"))
    text = build_report(s.reads(), fmt="md")
    assert "BF16 matmul per watt" in text and "TFLOPS/W" in text


def test_a_served_collector_shows_per_watt_on_its_card_and_compare_pages_and_in_metrics(tmp_path: Path) -> None:
    run = run_dict([_powered(matmul(8192, "bf16", 700.0), 680.0), _powered(_copy(4200.0), 420.0)],
                   gpus=[gpu("NVIDIA H200", memory_gib=141)], hostname="powered")  # fmt: skip
    other = run_dict([_powered(_copy(3000.0), 500.0)], gpus=[gpu()], hostname="h100")  # the factories' H100
    with serve_collector(tmp_path / "served.duckdb") as site, httpx.Client(base_url=site.url) as http:
        for body in (run, other):
            assert http.post("/api/v1/runs", json=body, headers=site.auth).status_code == 201
        card = "NVIDIA H200 141 GiB · 700 W"
        page = http.get(f"/cards/{card}").text
        assert "BF16 matmul per watt" in page and "TFLOPS/W" in page
        cards = [card, "NVIDIA H100 80GB HBM3 80 GiB · 700 W"]
        compared = http.get("/compare", params={"cards": cards}).text
        assert "Memory copy per watt" in compared and "GB/s/W" in compared
        metrics = http.get("/metrics").text
        run_page = http.get(f"/runs/{run['run_id']}").text
    assert f"{700.0 / 680.0:.3g} TFLOPS/W" in run_page and "mean power 680 W" in run_page
    found = re.search(r'^flopfleet_gpu_figure_per_watt\{(?=[^}]*figure="matmul_bf16")(?=[^}]*unit="TFLOPS/W")'
                      r'[^}]*\} (\S+)$', metrics, flags=re.M)  # fmt: skip
    assert found is not None and float(found.group(1)) == pytest.approx(700.0 / 680.0)
    if PROMTOOL is not None:
        done = subprocess.run([PROMTOOL, "check", "metrics"], input=metrics, capture_output=True, text=True,
                              timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr

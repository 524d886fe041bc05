"""Error counters: stored typed, before and after each run, with what the run added; unknown stays unknown (NULL,
shown as "unknown", never 0); shown on the run and GPU pages."""

from __future__ import annotations

from pathlib import Path

import httpx

from collector.store import Store
from tests.collector.conftest import query
from tests.factories import gpu, make_run, matmul
from tests.servers import serve_collector

BEFORE = {"ecc_uncorrected_aggregate": 2, "ecc_corrected_volatile": 10, "remapped_rows_uncorrectable": 0,
          "remapped_rows_failed": False, "pcie_replays": 5, "energy_j": 1000.0}  # fmt: skip
AFTER = {**BEFORE, "ecc_uncorrected_aggregate": 3, "ecc_corrected_volatile": 14, "pcie_replays": 9, "energy_j": 1500.0}


def _run() -> object:
    card = gpu("NVIDIA H100 80GB HBM3", counters_before=BEFORE, counters_after=AFTER,
               xid_events=[{"xid": 48, "t_s": 3.5}, {"xid": 63, "t_s": 4.0}])  # fmt: skip
    return make_run([matmul(4096, "bf16", 700.0)], gpus=[card])


def test_counters_are_stored_with_what_the_run_added_and_unknowns_stay_null(tmp_path: Path) -> None:
    run = _run()
    with Store(tmp_path / "db.duckdb") as store:
        store.add_run(run)  # type: ignore[arg-type]
        row = query(
            store,
            "SELECT ecc_uncorrected_aggregate_during, ecc_corrected_volatile_during, pcie_replays_during, "
            "energy_j_during, retired_pages_double_bit_after, nvlink_links_after, remapped_rows_failed_after, "
            "xid_count FROM gpu_counters",
        ).fetchone()
    assert row == (1, 4, 4, 500.0, None, None, False, 2)


def test_the_run_and_gpu_pages_show_the_counters(tmp_path: Path) -> None:
    run = _run()
    db = tmp_path / "db.duckdb"
    with Store(db) as store:
        store.add_run(run)  # type: ignore[arg-type]
    with serve_collector(db) as collector, httpx.Client() as client:
        page = client.get(f"{collector.url}/runs/{run.run_id}").text  # type: ignore[attr-defined]
        assert "Error counters" in page and "pcie replays" in page
        assert "unknown" in page  # retired pages, NVLink: not reported, so not 0
        assert "2 (48, 63)" in page
        uuid = run.gpus[0].uuid  # type: ignore[attr-defined]
        history = client.get(f"{collector.url}/gpus/{uuid}").text
        assert "rows remapped" in history and ">3<" in history.replace("</td>", "<").replace('<td class="num">', ">")

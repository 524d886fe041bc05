"""Published reference data, prices and the health command, through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from collector.analysis.reference import load, parse_reference
from tests.conftest import collector_cli
from tests.fixture_db import build_fixture_db


def test_the_bundled_table_is_the_published_five_cards() -> None:
    values = load(None)
    cards = sorted({v.card for v in values})
    assert cards == ["A100", "A6000", "RTX 3090 Ti", "RTX 4090", "V100"]
    a100 = {v.metric: v.value for v in values if v.card == "A100"}
    assert (a100["matmul_fp16_tflops"], a100["bert_layer_fwdbwd_tflops"], a100["price_usd"]) == (230, 136, 16000)
    assert all(v.source.startswith("github.com/mli/transformers-benchmarks") for v in values)


def test_import_reference_and_run_files_are_labelled(tmp_path: Path, quick_run_file: Path) -> None:
    db = tmp_path / "db.duckdb"
    done = collector_cli("import-reference", "--db", str(db))
    assert done.returncode == 0 and "78 figures" in done.stdout, done.stderr
    other = tmp_path / "lab.csv"
    other.write_text("# Source: our lab wiki\nmetric,L40S\nmatmul_fp16_tflops,250\n")
    assert collector_cli("import-reference", "--db", str(db), str(other)).returncode == 0
    ran = collector_cli("import-reference", "--db", str(db), str(quick_run_file))
    assert ran.returncode == 0 and "as reference" in ran.stdout
    rows = json.loads(collector_cli("sql", "--db", str(db), "--format", "json",
                                    "SELECT card, source FROM reference WHERE metric = 'matmul_fp16' "
                                    "ORDER BY card").stdout)["rows"]  # fmt: skip
    assert {r["card"]: r["source"] for r in rows}["L40S"] == "our lab wiki"
    sources = collector_cli("sql", "--db", str(db), "--format", "csv", "SELECT source FROM runs").stdout
    assert sources.splitlines() == ["source", "reference"]
    report = collector_cli("report", "--db", str(db), "--format", "md").stdout
    assert "L40S (published)" in next(line for line in report.splitlines() if line.startswith("| "))  # the header


def test_a_bad_reference_table_is_refused_clearly(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("metric,A\nmatmul_fp16_tflops,fast\n")
    done = collector_cli("import-reference", "--db", str(tmp_path / "db.duckdb"), str(bad))
    assert done.returncode == 1 and "not a number: 'fast'" in done.stderr
    assert parse_reference("metric,X\nmemory_gb,24\n", "here")[0].unit == "GB"


def test_prices_and_health_commands(tmp_path: Path) -> None:
    db = tmp_path / "fixture.duckdb"
    build_fixture_db(db).close()
    assert collector_cli("prices", "set", "H100 PCIe", "25000", "--db", str(db)).returncode == 0
    listed = collector_cli("prices", "list", "--db", str(db)).stdout
    assert "H100 PCIe" in listed and "25,000" in listed  # as the report writes a price
    prices = tmp_path / "prices.csv"
    prices.write_text("model,price_usd\nA100-SXM4,9000\n")
    report = collector_cli("report", "--db", str(db), "--format", "md", "--prices", str(prices)).stdout
    price_row = next(line for line in report.splitlines() if line.startswith("| Price (USD)"))
    assert "9,000" in price_row and "25,000" in price_row and "30,000" in price_row
    health = json.loads(collector_cli("health", "--db", str(db), "--format", "json").stdout)  # GpuVerdict each
    assert [(v["host"], v["level"]) for v in health[:2]] == [("h8", "faulty"), ("h9", "suspect")]
    assert health[1]["reasons"][-1] == "power limit 500 W, below the default 700 W"
    assert {f["figure"] for f in health[1]["figures"]} == {"matmul_bf16", "memory", "bert_fwdbwd"}
    table = collector_cli("health", "--db", str(db)).stdout
    assert "suspect: 21% below" in table and "faulty" in table

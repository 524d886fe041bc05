"""Reports rendered from a fixture database built by code, against stored expected output (asv-style).

Regenerate the expected files after an intended change with ``FLOPFLEET_REGEN=1 make test``.
"""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path

import pytest

from collector.compare import comparison
from collector.report import build_report
from collector.store import Store
from tests.factories import T0, bandwidth, gpu, layer, make_run, matmul

EXPECTED = Path(__file__).with_name("expected")


def _fixture_db(path: Path) -> Store:
    store = Store(path)
    a100 = [gpu("NVIDIA A100-SXM4-80GB", memory_gib=80)]
    ids = iter(f"00000000-0000-4000-8000-{i:012d}" for i in range(1, 100))
    for i, tflops in enumerate((700.0, 720.0, 710.0)):
        store.add_run(
            make_run(
                [
                    matmul(2048, "bf16", tflops * 0.9),
                    matmul(8192, "bf16", tflops),
                    matmul(8192, "fp32", 51.0),
                    layer("bert_layer", "fwd", 64, 512, 380.0 + i),
                    layer("bert_layer", "fwd+bwd", 64, 512, 450.0),
                    bandwidth(1 << 26, 3000.0 + 10 * i),
                ],
                gpus=[gpu("NVIDIA H100 80GB HBM3", memory_gib=80, host=f"h{i}")],
                hostname=f"h{i}",
                run_id=next(ids),
                started=T0 + timedelta(hours=i),
            ),
            received_at=T0 + timedelta(hours=i, minutes=2),
        )
    store.add_run(
        make_run(
            [
                matmul(8192, "bf16", 280.0),
                matmul(8192, "bf16", 2000.0, flags=["above_peak"]),
                layer("bert_layer", "fwd", 64, 512, 150.0),
            ],
            gpus=a100,
            hostname="a",
            run_id=next(ids),
            started=T0,
        ),
        received_at=T0,
    )
    return store


def _check(name: str, text: str) -> None:
    path = EXPECTED / name
    if os.environ.get("FLOPFLEET_REGEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} differs; if intended, regenerate with FLOPFLEET_REGEN=1"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return _fixture_db(tmp_path / "fixture.duckdb")


def test_comparison_takes_the_median_of_each_devices_best(store: Store) -> None:
    cmp = comparison(store.cursor())
    assert [c.label for c in cmp.cards] == ["NVIDIA A100-SXM4-80GB 80 GiB", "NVIDIA H100 80GB HBM3 80 GiB"]
    rows = {r.label: r for r in cmp.rows}
    a100, h100 = rows["Matmul BF16"].cells
    assert h100 is not None and (h100.median, h100.low, h100.high, h100.count) == (710.0, 700.0, 720.0, 3)
    assert a100 is not None and a100.median == 280.0  # the above-peak result is kept out
    assert rows["Theory FP16"].cells[0] is not None and rows["Theory FP16"].cells[0].median == 312
    assert "Matmul TF32" not in rows  # nothing measured: no row


def test_markdown_report_matches_expected(store: Store) -> None:
    _check("report.md", build_report(store.cursor(), "md"))


def test_html_report_is_self_contained(store: Store) -> None:
    html = build_report(store.cursor(), "html")
    assert html.count("<svg") == 4  # matmul bf16 and fp32; BERT layer fwd and fwd+bwd at seq 512
    assert 'id="comparison"' in html and "710.0" in html and "700.0–720.0, n=3" in html
    external = re.findall(r"(?:src|href)\s*=|@import|url\(", html)
    assert external == []
    assert set(re.findall(r"https?://[^\"' ]+", html)) <= {"http://www.w3.org/2000/svg"}


def test_empty_database_reports_no_results(tmp_path: Path) -> None:
    with Store(tmp_path / "empty.duckdb") as store:
        assert "No results stored yet" in build_report(store.cursor(), "md")
        assert "No results stored yet" in build_report(store.cursor(), "html")

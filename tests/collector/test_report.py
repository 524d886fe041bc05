"""Comparison, reports, health and version changes from a fixture database built by code (asv-style), against
stored expected output. Regenerate the expected files after an intended change with ``FLOPFLEET_REGEN=1 make test``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest

from collector.read.report import build_report
from collector.read.views import charts, comparison, fleet_health, version_changes
from collector.store import Store
from schemas.baselines import bundled
from tests.fixture_db import build_fixture_db

EXPECTED = Path(__file__).with_name("expected")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One fixture database for the module: every test here only reads it."""
    built = build_fixture_db(tmp_path_factory.mktemp("report") / "fixture.duckdb")
    yield built
    built.close()


def _check(name: str, text: str) -> None:
    path = EXPECTED / name
    if os.environ.get("FLOPFLEET_REGEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} differs; if intended, regenerate with FLOPFLEET_REGEN=1"


def test_cards_are_grouped_by_model_memory_and_power_limit(store: Store) -> None:
    cmp = comparison(store.reads())
    measured = [c.label for c in cmp.cards if c.measured]
    assert measured == [
        "NVIDIA A100-SXM4-80GB 80 GiB · 700 W",
        "NVIDIA H100 80GB HBM3 80 GiB · 500 W",
        "NVIDIA H100 80GB HBM3 80 GiB · 700 W",
        "NVIDIA H100 PCIe 80 GiB · 350 W",
    ]
    # Beside them, the baselines flopfleet ships of cards this collector has not measured, labelled as baselines.
    shipped = [c for c in cmp.cards if c.baseline]
    assert {c.label.split(" baseline (")[0] for c in shipped} == {c.card for b in bundled() for c in b.cards}
    assert all(c.devices >= 1 and c.spec is not None for c in shipped)
    assert any("not this collector's measurements" in note for note in cmp.notes)


def test_cells_are_medians_of_each_devices_best_without_measurement_errors(store: Store) -> None:
    cmp = comparison(store.reads())
    index = {c.label: i for i, c in enumerate(cmp.cards)}
    bf16 = cmp.row("matmul_bf16")
    assert bf16 is not None
    sxm = bf16.cells[index["NVIDIA H100 80GB HBM3 80 GiB · 700 W"]]
    assert sxm is not None and (sxm.median, sxm.low, sxm.high, sxm.count) == (707.5, 700.0, 720.0, 4)
    a100 = bf16.cells[index["NVIDIA A100-SXM4-80GB 80 GiB · 700 W"]]
    assert a100 is not None and a100.high == 302.0  # the 2000 TFLOPS above-peak result is kept out
    theory = cmp.row("fp16")
    assert theory is not None and theory.cells[index["NVIDIA H100 PCIe 80 GiB · 350 W"]].median == 756  # type: ignore[union-attr]


def test_published_figures_are_their_own_labelled_columns(store: Store) -> None:
    cmp = comparison(store.reads())
    published = [c.label for c in cmp.cards if c.published]
    assert published == [f"{c} (published)" for c in ("A100", "A6000", "RTX 3090 Ti", "RTX 4090", "V100")]
    index = {c.label: i for i, c in enumerate(cmp.cards)}
    bert = cmp.row("bert_fwdbwd")
    assert bert is not None and bert.cells[index["A100 (published)"]].median == 136  # type: ignore[union-attr]
    assert any("published" in note for note in cmp.notes)


def test_prices_give_price_performance(store: Store) -> None:
    cmp = comparison(store.reads(), prices={"A100-SXM4": 10000.0})
    index = {c.label: i for i, c in enumerate(cmp.cards)}
    price, per_k = cmp.row("price"), cmp.row("fp16_per_kusd")
    assert price is not None and per_k is not None
    assert price.cells[index["NVIDIA H100 80GB HBM3 80 GiB · 700 W"]].median == 30000  # type: ignore[union-attr]
    assert price.cells[index["NVIDIA A100-SXM4-80GB 80 GiB · 700 W"]].median == 10000  # type: ignore[union-attr]
    assert price.cells[index["RTX 4090 (published)"]].median == 2200  # type: ignore[union-attr]
    rtx = per_k.cells[index["RTX 4090 (published)"]]
    assert rtx is not None and rtx.median == pytest.approx(172 / 2200 * 1000)


def test_health_finds_the_slow_gpu_and_why(store: Store) -> None:
    verdicts = {v.hostname: v for v in fleet_health(store.reads())}
    slow = verdicts["h9"]  # one run, 21 % under its peers: suspect until confirmed (tests/collector/test_verdicts.py)
    # Its largest shortfall: 21 % under its peers, or more under its sibling cards (the bundled H200's share).
    assert slow.verdict == "suspect" and slow.slow_by is not None and slow.slow_by >= 1 - 560 / 707.5 - 0.01
    assert slow.causes == ("power limit 500 W, below the default 700 W",)
    first = slow.reasons[0]
    assert first.startswith("BF16 matmul 560 TFLOPS is ") and "in its latest measurement only" in first
    # Its peers and, with no baseline of its own card, its sibling cards judged it: the reason names the further.
    bf16 = slow.figures["matmul_bf16"]
    assert {r.name for r in bf16.references} == {"peers", "sibling", "floor"}
    assert bf16.held_to is not None and bf16.held_to.name in ("peers", "sibling")
    assert verdicts["h0"].verdict == "ok" and verdicts["h0"].causes == ()
    assert verdicts["h8"].verdict == "faulty"  # a link below its maximum is a fault, whatever the figures say
    assert verdicts["h8"].faults == ("PCIe link at Gen4 under load, the card supports Gen5 (pcie_gen)",)
    lone = verdicts["p0"]  # no peers, no history: only its model's floor, which it clears
    assert lone.verdict == "ok" and [r.name for r in lone.figures["matmul_bf16"].references] == ["floor"]  # no sibling
    assert [v.hostname for v in fleet_health(store.reads())][:2] == ["h8", "h9"]  # worst first


def test_version_changes_need_ratio_and_noise_to_agree(store: Store) -> None:
    changes = [c for c in version_changes(store.reads()) if c.metric == "BF16 matmul"]
    (a100,) = [c for c in changes if "A100" in c.gpu_model]
    assert a100.verdict == "faster" and a100.ratio == pytest.approx(301 / 280, rel=1e-3)  # medians of 279-281, 300-302
    assert "torch 2.11.0" in a100.before and "torch 2.12.0" in a100.after
    noisy = [c for c in version_changes(store.reads()) if c.metric == "memory" and "A100" in c.gpu_model]
    assert noisy and noisy[0].verdict in ("faster", "no change (within noise)")


def test_llm_rows_are_per_model_batch_and_phase(store: Store) -> None:
    cmp = comparison(store.reads())
    index = {c.label: i for i, c in enumerate(cmp.cards)}
    sxm, a100 = index["NVIDIA H100 80GB HBM3 80 GiB · 700 W"], index["NVIDIA A100-SXM4-80GB 80 GiB · 700 W"]

    def cell(key: str, card: int) -> tuple[float, int]:
        row = cmp.row(key)
        assert row is not None and row.cells[card] is not None, key
        return round(row.cells[card].median, 2), row.cells[card].count  # type: ignore[union-attr]

    # Two H100s decoded one token per step in 5.6 and 5.7 ms: the median of 178.6 and 175.4 tokens/s.
    assert cell("llama3_8b_decode_b1", sxm) == (round((1 / 5.6e-3 + 1 / 5.7e-3) / 2, 2), 2)
    assert cell("llama3_8b_decode_b32", a100) == (round(32 / (9.0e-3 * 1.45), 2), 1)
    # 15,144,067,072 bytes per step (weights and the KV cache) in 9 ms, of the A100's 2,039 GB/s, as a percentage.
    assert cell("llama3_8b_decode_b1_bw", a100) == (82.52, 1)
    assert cell("llama3_8b_prefill_b1", a100) == (round(512 / (1.1 / 35), 2), 1)
    prefill = cmp.row("llama3_8b_prefill")
    assert prefill is not None and prefill.unit == "TFLOPS"
    assert cmp.row("llama32_3b_decode_b1") is None  # no card measured the smaller model: no row


def test_the_inference_view_and_the_decode_chart(store: Store) -> None:
    rows = store.sql(
        "SELECT card, phase, batch, seq_len, tokens_per_s, tpot_s, ttft_s, bandwidth_fraction, bytes_per_step "
        "FROM inference WHERE card LIKE 'NVIDIA A100%' ORDER BY phase, batch",
        max_rows=100,
    ).rows
    assert [(r[1], r[2], r[3]) for r in rows] == [("decode", 1, 1024), ("decode", 32, 1024), ("prefill", 1, 512),
                                                   ("prefill", 8, 2048)]  # fmt: skip
    decode_1 = rows[0]
    assert decode_1[5] == 9.0e-3 and decode_1[6] is None and decode_1[8] == 15_144_067_072
    assert decode_1[7] == 0.8252 and rows[2][7] is None  # of the memory bandwidth, for decode only
    assert rows[3][6] == 1.1  # time to first token: the prefill's time
    lines = charts(store.reads(), comparison(store.reads()), ("decode",)).decode["llama-3-8b, 1024 positions"]
    assert (lines[0].label, lines[0].points) == (
        "NVIDIA A100-SXM4-80GB 80 GiB · 700 W",
        [(1.0, 1 / 9.0e-3), (32.0, 32 / (9.0e-3 * 1.45))],
    )


def test_markdown_report_matches_expected(store: Store) -> None:
    _check("report.md", build_report(store.reads(), "md"))


def test_html_report_matches_expected_and_is_self_contained(store: Store) -> None:
    html = build_report(store.reads(), "html", generated_at=datetime(2026, 11, 29, tzinfo=timezone.utc))
    _check("report.html", html)
    assert html.count("<svg") >= 6
    for section in ("Cross-card comparison", "Fraction of the datasheet peak", "Fleet health", "Software versions",
                    "Same model, different machines", "Price / performance",
                    "LLM decode: tokens/s against batch"):  # fmt: skip
        assert section in html
    assert re.findall(r"(?:src|href)\s*=|@import|url\(", html) == []
    assert set(re.findall(r"https?://[^\"' <]+", html)) <= {"http://www.w3.org/2000/svg"}


def test_empty_database_reports_no_results(tmp_path: Path) -> None:
    with Store(tmp_path / "empty.duckdb") as store:
        assert "No results stored yet" in build_report(store.reads(), "md")
        assert "No results stored yet" in build_report(store.reads(), "html")

"""Figures, views and charts keep apart what was measured differently: transformers' Llama and the lean plain-torch
one, eager and SDPA layers; decode figures as fractions of the datasheet and of the same run's own copy. A real
DuckDB file under tmp_path, runs built by code."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from collector.read.views import charts, comparison
from collector.store import Store
from collector.store.figures import compute_sql
from tests.factories import bandwidth, inference, layer, make_run

COPY_GBPS = 4230.0
H200_GBPS = 4800.0


def _lean(result: dict[str, Any]) -> dict[str, Any]:
    result["params"] |= {"implementation": "torch", "kernels": "triton"}
    return result


def _eager(result: dict[str, Any]) -> dict[str, Any]:
    result["params"]["attn_implementation"] = "eager"
    return result


def _copy(gbps: float, elements: int) -> dict[str, Any]:
    result = bandwidth(elements, gbps)
    result["params"] |= {"op": "copy", "flops_per_call": 0}
    result["metrics"]["tflops"] = 0.0
    return result


def _results() -> list[dict[str, Any]]:
    return [
        _copy(COPY_GBPS, 1 << 26),
        _copy(2767.0, 1 << 28),  # the run's best copy is the figure, not its last
        inference("decode", 1, 1024, 7.1e-3, datasheet=H200_GBPS),
        _lean(inference("decode", 1, 1024, 4.8e-3, datasheet=H200_GBPS)),
        _lean(inference("decode", 32, 1024, 5.9e-3, datasheet=H200_GBPS)),
        _lean(inference("prefill", 8, 2048, 0.415, datasheet=989.0)),
        layer("bert_layer", "fwd", 32, 512, 300.0),
        _eager(layer("bert_layer", "fwd", 32, 512, 200.0)),
    ]


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("apart") / "f.duckdb"
    run = make_run(_results())
    with Store(path) as store:
        store.add_run(run)
        store.settle()
    return path, str(run.run_id)


def _figures(path: Path, run_id: str) -> dict[str, float]:
    with Store(path) as store:
        rows = store.sql(f"SELECT figure, value FROM figures WHERE run_id = '{run_id}'", max_rows=500).rows
    return {str(f): float(v) for f, v in rows}


def test_each_implementation_and_attention_is_its_own_figure(stored: tuple[Path, str]) -> None:
    figures = _figures(*stored)
    step = 15_144_067_072  # bytes a Llama-3-8B decode step at batch 1 and 1,024 positions reads
    assert figures["llama3_8b_decode_b1"] == pytest.approx(1 / 7.1e-3)
    assert figures["llama3_8b_decode_b1_torch"] == pytest.approx(1 / 4.8e-3)
    assert figures["llama3_8b_decode_b1_bw"] == pytest.approx(100 * round(step / 7.1e-3 / 1e9 / H200_GBPS, 4))
    # Of the best copy the same run measured on the same GPU, for both paths.
    assert figures["llama3_8b_decode_b1_copy"] == pytest.approx(100 * step / 7.1e-3 / 1e9 / COPY_GBPS)
    assert figures["llama3_8b_decode_b1_copy_torch"] == pytest.approx(100 * step / 4.8e-3 / 1e9 / COPY_GBPS)
    assert "llama3_8b_decode_b32_torch" in figures and "llama3_8b_decode_b32" not in figures
    assert "llama3_8b_prefill_torch" in figures and "llama3_8b_prefill" not in figures
    assert figures["bert_fwd"] == 300.0 and figures["bert_fwd_eager"] == 200.0  # never the best of both
    assert figures["bw_copy"] == COPY_GBPS


def test_a_result_that_does_not_say_whose_it_is_was_transformers(stored: tuple[Path, str]) -> None:
    # Rows stored before results kept ``implementation`` read NULL there (the column was added to the old file):
    # their figures are computed again as transformers' ones.
    path, run_id = stored
    con = duckdb.connect(str(path))
    try:
        con.execute("CREATE TEMP TABLE older AS SELECT * FROM results")
        con.execute("UPDATE older SET implementation = NULL")
        rows = con.execute(f"SELECT figure, value FROM ({compute_sql('older')}) WHERE run_id = '{run_id}'").fetchall()
    finally:
        con.close()
    figures = dict(rows)
    assert figures["llama3_8b_decode_b1"] == pytest.approx(1 / 4.8e-3)  # the faster of the two, now unlabelled
    assert not any(f.endswith("_torch") for f in figures)


def test_the_views_and_charts_say_whose_each_is(stored: tuple[Path, str]) -> None:
    path, _ = stored
    with Store(path) as store:
        rows = store.sql(
            "SELECT implementation, kernels, phase, batch, copy_gbps, copy_fraction, bandwidth_fraction FROM inference "
            "ORDER BY implementation, phase, batch",
            max_rows=10,
        ).rows
        layers = store.sql("SELECT attn_implementation, implementation, tflops FROM layers ORDER BY tflops").rows
        cmp = comparison(store.reads())
        decode = charts(store.reads(), cmp, ("decode",)).decode
    assert [(r[0], r[1], r[2], r[3]) for r in rows] == [
        ("torch", "triton", "decode", 1), ("torch", "triton", "decode", 32), ("torch", "triton", "prefill", 8),
        ("transformers", None, "decode", 1),
    ]  # fmt: skip
    assert rows[0][4] == COPY_GBPS and rows[0][5] == pytest.approx(rows[0][6] * H200_GBPS / COPY_GBPS, rel=1e-3)
    assert rows[2][5] is None  # a prefill has no fraction of a bandwidth
    assert layers == [("eager", "transformers", 200.0), ("sdpa", "transformers", 300.0)]
    assert set(decode) == {"llama-3-8b, 1024 positions", "llama-3-8b, 1024 positions, plain torch"}
    labels = {r.key: r.label for r in cmp.rows}
    assert labels["llama3_8b_decode_b1_copy_torch"] == "Llama-3-8B decode b=1, plain torch"
    assert labels["bert_fwd_eager"] == "BERT layer fwd, eager attention"

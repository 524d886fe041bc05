"""Every chart of the report (and of the pages), built from comparison data as self-contained SVG."""

from __future__ import annotations

from collections.abc import Callable

import duckdb

from .. import compare, machines
from ..side_by_side import SideBySide
from .svg import bar_chart, line_chart, strip_chart

Section = tuple[str, list[str]]
Builder = Callable[[duckdb.DuckDBPyConnection], Section]


CHARTS = ("matmul", "peak", "layers", "bandwidth", "training", "price", "spread")


def chart_sections(
    con: duckdb.DuckDBPyConnection,
    cmp: compare.Comparison,
    cards: list[str] | None = None,
    only: tuple[str, ...] = CHARTS,
) -> list[Section]:
    """(section title, SVGs) in the report's order; a chart with no data is left out."""
    builders: dict[str, Builder] = {
        "matmul": lambda c: ("Matrix multiply: TFLOPS against size", [
            line_chart(f"matmul {dtype}", series, x_label="n (square n×n×n)", y_label="TFLOPS")
            for dtype, series in compare.matmul_series(c, cards).items()
        ]),
        "peak": lambda c: ("Fraction of the datasheet peak", [_peak_chart(c, cmp, cards)]),
        "layers": lambda c: ("Transformer layers (fp16): TFLOPS against batch", [
            line_chart(title, series, x_label="batch", y_label="TFLOPS")
            for title, series in compare.layer_series(c, cards).items()
        ]),
        "bandwidth": lambda c: ("Memory bandwidth against array size", [
            line_chart(f"memory {op}", series, x_label="bytes per array", y_label="GB/s")
            for op, series in compare.bandwidth_series(c, cards).items()
        ]),
        "training": lambda c: ("Training throughput", [_training_chart(cmp)]),
        "price": lambda c: ("Price / performance", [_price_chart(cmp)]),
        "spread": lambda c: ("Same model, different machines", [
            strip_chart("BF16 matmul TFLOPS of each GPU (latest run)", compare.spread(c, cards), x_label="TFLOPS")
        ]),
    }  # fmt: skip
    with SideBySide(con) as side:
        sections = [side.submit(builders[name]) for name in only]
    return [(title, [svg for svg in svgs if svg]) for title, svgs in (s.result() for s in sections)]


def _peak_chart(con: duckdb.DuckDBPyConnection, cmp: compare.Comparison, cards: list[str] | None) -> str:
    fractions = compare.peak_fractions(con, cards)
    categories = [label for label, _ in compare.PEAK_CATEGORIES if any(label in f for f in fractions.values())]
    measured = [c.label for c in cmp.cards if not c.published]
    values = {(card, cat): v for card, f in fractions.items() for cat, v in f.items()}
    return bar_chart("best result as a fraction of the datasheet peak", measured, categories, values,
                     y_label="of peak", percent=True)  # fmt: skip


def _row_values(cmp: compare.Comparison, key: str, bar: str) -> dict[tuple[str, str], float]:
    row = cmp.row(key)
    if row is None:
        return {}
    return {(c.label, bar): cell.median for c, cell in zip(cmp.cards, row.cells, strict=True) if cell}


def _training_chart(cmp: compare.Comparison) -> str:
    values = {
        **_row_values(cmp, "train_bert_tokens", "BERT-large"),
        **_row_values(cmp, "train_gpt2_tokens", "GPT-2-medium"),
    }
    cards = [c.label for c in cmp.cards if any(k[0] == c.label for k in values)]
    return bar_chart("training step tokens/s", cards, ["BERT-large", "GPT-2-medium"], values, y_label="tokens/s")


def _price_chart(cmp: compare.Comparison) -> str:
    values = _row_values(cmp, "fp16_per_kusd", "FP16 matmul")
    cards = [c.label for c in cmp.cards if (c.label, "FP16 matmul") in values]
    return bar_chart("FP16 matmul TFLOPS per $1,000", cards, ["FP16 matmul"], values, y_label="TFLOPS per $1,000")


def collective_charts(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Bus bandwidth against message size, one chart per collective."""
    charts = [
        line_chart(f"{op.replace('_', '-')} bus bandwidth", series, x_label="message bytes", y_label="busbw GB/s")
        for op, series in machines.busbw_series(con).items()
    ]
    return [svg for svg in charts if svg]

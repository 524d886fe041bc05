"""Every chart of the report and the pages, drawn as self-contained SVG from a view's chart data
(``analysis.charts.Charts``).

A card keeps one colour across every chart of a page or report (its place among the view's measured cards), so a
chart without one card does not shift the others' colours. A chart of a figure is titled with the figure's label
(``analysis.charts``: the words of its row in the comparison table), its unit on the axis.
"""

from __future__ import annotations

from collections.abc import Callable

from ..analysis.charts import SPREAD, TRAINING, Charts, bandwidth_title, layer_title, matmul_title
from ..analysis.compare import PEAK_CATEGORIES, PER_KUSD, Comparison
from .numbers import size
from .svg import PALETTE, bar_chart, line_chart, strip_chart

Section = tuple[str, list[str]]
Colours = dict[str, str]


def colours_of(labels: list[str]) -> Colours:
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(labels)}


def chart_sections(data: Charts) -> list[Section]:
    """(section title, SVGs) in the report's order; a chart with no data is left out."""
    cmp = data.cmp
    colours = colours_of([c.label for c in cmp.cards if c.measured])
    builders: dict[str, Callable[[], Section]] = {
        "matmul": lambda: ("Matrix multiply: TFLOPS against size", [
            line_chart(matmul_title(dtype), series, x_label="n (square n×n×n)", y_label="TFLOPS",
                       colours=colours)
            for dtype, series in data.matmul.items()
        ]),
        "peak": lambda: ("Fraction of the datasheet peak", [_peak_chart(data, colours)]),
        "layers": lambda: ("Transformer layers (fp16): TFLOPS against batch", [
            line_chart(layer_title(title), series, x_label="batch", y_label="TFLOPS", colours=colours)
            for title, series in data.layers.items()
        ]),
        "bandwidth": lambda: ("Memory bandwidth against array size", [
            line_chart(bandwidth_title(op), series, x_label="size of each array", y_label="GB/s",
                       colours=colours, x_tick=size)
            for op, series in data.bandwidth.items()
        ]),
        "training": lambda: ("Training throughput", [_training_chart(cmp)]),
        "decode": lambda: ("LLM decode: tokens/s against batch", [
            line_chart(f"decode {model}", series, x_label="batch (sequences, one token each per step)",
                       y_label="tokens/s", colours=colours)
            for model, series in data.decode.items()
        ]),
        "price": lambda: ("Price / performance", [_price_chart(cmp)]),
        "spread": lambda: ("Same model, different machines", [
            strip_chart(f"{SPREAD.label} of each GPU (latest run)", data.spread, x_label=SPREAD.unit,
                        colours=colours)
        ]),
    }  # fmt: skip
    sections = [builders[name]() for name in data.only]
    return [(title, [svg for svg in svgs if svg]) for title, svgs in sections]


def _peak_chart(data: Charts, colours: Colours) -> str:
    fractions = data.peak
    categories = [label for label, _ in PEAK_CATEGORIES if any(label in f for f in fractions.values())]
    measured = [c.label for c in data.cmp.cards if c.measured]
    values = {(card, cat): v for card, f in fractions.items() for cat, v in f.items()}
    return bar_chart("best result as a fraction of the datasheet peak", measured, categories, values,
                     y_label="of peak", percent=True)  # fmt: skip


def _row_values(cmp: Comparison, key: str, bar: str) -> dict[tuple[str, str], float]:
    row = cmp.row(key)
    if row is None:
        return {}
    return {(c.label, bar): cell.median for c, cell in zip(cmp.cards, row.cells, strict=True) if cell}


def _training_chart(cmp: Comparison) -> str:
    figures = TRAINING
    values = {k: v for f in figures for k, v in _row_values(cmp, f.key, f.label).items()}
    cards = [c.label for c in cmp.cards if any(k[0] == c.label for k in values)]
    unit = figures[0].unit
    return bar_chart(f"Training ({unit})", cards, [f.label for f in figures], values, y_label=unit)


def _price_chart(cmp: Comparison) -> str:
    label, unit = PER_KUSD
    values = _row_values(cmp, "fp16_per_kusd", label)
    cards = [c.label for c in cmp.cards if (c.label, label) in values]
    return bar_chart(f"{label} ({unit})", cards, [label], values, y_label=unit)


def collective_charts(data: Charts) -> list[str]:
    """Bus bandwidth against message size, one chart per collective; a machine keeps its colour in each."""
    colours = colours_of(sorted({s.label for lines in data.busbw.values() for s in lines}))
    charts = []
    for op, lines in data.busbw.items():
        title = f"{op.replace('_', '-')} bus bandwidth"
        charts.append(
            line_chart(title, lines, x_label="message size", y_label="busbw GB/s", colours=colours, x_tick=size)
        )
    return [svg for svg in charts if svg]

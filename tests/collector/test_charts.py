"""Charts keep every label whole (wrapped, never cut) and write sizes as people do."""

from __future__ import annotations

import re
from html import unescape

from collector.analysis.compare import Series
from collector.render.numbers import size
from collector.render.svg import LEGEND_CHARS, H, bar_chart, line_chart, strip_chart

LONG = "CPU: Intel(R) Xeon(R) Processor @ 2.20GHz · 16 cores (a name longer than any legend column)"
SHORT = "NVIDIA H100 80GB HBM3"


def _texts(svg: str) -> list[str]:
    """Each text element's words, its lines joined as a reader reads them."""
    return [" ".join(unescape(t) for t in re.findall(r"<tspan[^>]*>([^<]*)</tspan>", body)) or unescape(body)
            for body in re.findall(r"<text[^>]*>(.*?)</text>", svg)]  # fmt: skip


def _height(svg: str) -> int:
    return int(re.search(r'height="(\d+)"', svg).group(1))  # type: ignore[union-attr]


def test_a_legend_wraps_a_long_card_name_instead_of_cutting_it() -> None:
    series = [Series(LONG, [(1024, 10.0), (2048, 20.0)]), Series(SHORT, [(1024, 12.0), (2048, 25.0)])]
    svg = line_chart("memory copy", series, x_label="size", y_label="GB/s", x_tick=size)
    texts = _texts(svg)
    assert LONG in texts and SHORT in texts
    assert all(len(line) <= LEGEND_CHARS for line in re.findall(r"<tspan[^>]*>([^<]*)</tspan>", svg))
    assert {"1 KiB", "2 KiB"} <= set(texts) and "1024" not in texts  # sizes as people write them


def test_many_long_names_make_the_chart_taller_not_shorter_names() -> None:
    series = [Series(f"{LONG} #{i}", [(1, float(i + 1))]) for i in range(12)]
    svg = line_chart("many", series, x_label="n", y_label="TFLOPS")
    assert _height(svg) > H and all(f"{LONG} #{i}" in _texts(svg) for i in range(12))


def test_bar_groups_and_strip_rows_keep_whole_names() -> None:
    bars = bar_chart("training", [LONG, SHORT], ["BERT", "GPT-2"], {(LONG, "BERT"): 1.0, (SHORT, "GPT-2"): 2.0},
                     y_label="tokens/s")  # fmt: skip
    assert {LONG, SHORT, "BERT", "GPT-2"} <= set(_texts(bars))
    strip = strip_chart("spread", {LONG: [("gpu0", 700.0)], SHORT: [("gpu1", 650.0)]}, x_label="TFLOPS")
    assert {LONG, SHORT} <= set(_texts(strip))


def test_sizes_read_in_binary_units() -> None:
    assert [size(v) for v in (512, 1536, 4 << 20, 3 << 29, 1 << 40)] == ["512 B", "1.5 KiB", "4 MiB", "1.5 GiB",
                                                                          "1 TiB"]  # fmt: skip

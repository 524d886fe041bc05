"""Self-contained SVG line charts: no scripts, no fonts or styles from the network.

Labels are never cut: a card's name wraps onto as many lines as it needs (the legend's column, a bar group's slot,
a strip's row), and the chart grows to hold them.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from html import escape

from ..analysis.compare import Series
from .numbers import axis, number
from .numbers import percent as as_percent

#: Okabe-Ito: distinguishable for the common forms of colour blindness.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
W, H = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 190, 36, 48
#: A line of 11-pixel sans-serif text, and the characters that fit in the legend's column (6.2 px each at most).
LINE_H = 13
CHAR_W = 6.2
LEGEND_CHARS = int((RIGHT - 30) / CHAR_W)


def _lines(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces (inside a word only where it must)."""
    return textwrap.wrap(text, max(4, width), break_on_hyphens=False) or [""]


def _text(x: float, y: float, lines: list[str], anchor: str = "start") -> str:
    """One text element of several lines, the first at ``y``."""
    spans = "".join(
        f'<tspan x="{x:.1f}" dy="{0 if i == 0 else LINE_H}">{escape(line)}</tspan>' for i, line in enumerate(lines)
    )
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{spans}</text>'


def _legend(entries: list[tuple[str, str]]) -> tuple[list[str], float]:
    """A swatch and the whole label per (label, colour), right of the plot; the parts and where the legend ends."""
    out, y = [], float(TOP)
    for label, colour in entries:
        lines = _lines(label, LEGEND_CHARS)
        out.append(f'<rect x="{W - RIGHT + 12}" y="{y:.1f}" width="10" height="10" fill="{colour}"/>')
        out.append(_text(W - RIGHT + 26, y + 9, lines))
        y += LINE_H * len(lines) + 2
    return out, y


def _fmt(value: float) -> str:
    return f"{int(value)}" if float(value).is_integer() else f"{value:g}"


def _frame(title: str, ticks: list[tuple[float, str]], *, height: float = H) -> list[str]:
    """The opening of a chart with a y axis from 0 to the last of ``ticks``: the svg element (``height`` tall, for
    labels below or beside the plot that need more than ``H``), the title and the grid lines."""
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    height = math.ceil(max(H, height))
    y1 = ticks[-1][0]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" width="{W}" height="{height}" '
        f'role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
        f'<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    for y, label in ticks:
        py = TOP + plot_h - y / y1 * plot_h
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{py:.1f}" y2="{py:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py + 4:.1f}" text-anchor="end">{escape(label)}</text>')
    return out


def line_chart(title: str, series: list[Series], *, x_label: str, y_label: str, log_x: bool = True,
               colours: dict[str, str] | None = None, x_tick: Callable[[float], str] | None = None) -> str:  # fmt: skip
    """One line per series; a log2 x axis suits sizes and batches that double; ``colours``: each series' colour
    by label (the same card the same colour in every chart), else by its place; ``x_tick``: how an x value is
    written (``numbers.size`` for bytes)."""
    tick = x_tick or _fmt
    points = [p for s in series for p in s.points if p[0] > 0 or not log_x]
    if not points:
        return ""
    xs = sorted({x for x, _ in points})
    fx = (lambda x: math.log2(x)) if log_x else (lambda x: x)
    x0, x1 = fx(xs[0]), fx(xs[-1])
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    ticks = axis(0.0, max(y for _, y in points))
    y1 = ticks[-1][0]
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (fx(x) - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - y / y1 * plot_h

    entries = [(s.label, (colours or {}).get(s.label) or PALETTE[i % len(PALETTE)]) for i, s in enumerate(series)]
    legend, legend_end = _legend(entries)
    out = _frame(title, ticks, height=legend_end + 8)
    for x in xs:
        out.append(f'<text x="{px(x):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{escape(tick(x))}</text>')
    out.append(
        f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" stroke="#333"/>'
        f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}" stroke="#333"/>'
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{H - 10}" text-anchor="middle">{escape(x_label)}</text>'
        f'<text transform="translate(16 {TOP + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">'
        f"{escape(y_label)}</text>"
    )
    for s, (_, color) in zip(series, entries, strict=True):
        pts = sorted(p for p in s.points if p[0] > 0 or not log_x)
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        for x, yv in pts:
            out.append(
                f'<circle cx="{px(x):.1f}" cy="{py(yv):.1f}" r="3" fill="{color}">'
                f"<title>{escape(s.label)}: {escape(tick(x))} → {number(yv)}</title></circle>"
            )
    out += legend
    out.append("</svg>")
    return "\n".join(out)


def bar_chart(title: str, groups: list[str], bars: list[str], values: dict[tuple[str, str], float], *,
              y_label: str, percent: bool = False) -> str:  # fmt: skip
    """Grouped bars: one group per ``groups`` entry (a card), one coloured bar per ``bars`` entry inside it."""
    present = [(g, b, v) for (g, b), v in values.items() if v is not None]
    if not present:
        return ""
    ticks = axis(0.0, max(v for _, _, v in present), percent=percent)
    y1 = ticks[-1][0]
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    slot = plot_w / max(1, len(groups))
    width = slot * 0.8 / max(1, len(bars))

    def py(y: float) -> float:
        return TOP + plot_h - y / y1 * plot_h

    names = [_lines(group, int(slot / CHAR_W)) for group in groups]
    entries = [(bar, PALETTE[bi % len(PALETTE)]) for bi, bar in enumerate(bars)] if len(bars) > 1 else []
    legend, legend_end = _legend(entries)
    below = TOP + plot_h + 16 + LINE_H * (max(map(len, names)) - 1) + 12
    out = _frame(title, ticks, height=max(below, legend_end + 8))
    for gi, group in enumerate(groups):
        x0 = LEFT + gi * slot + slot * 0.1
        for bi, bar in enumerate(bars):
            v = values.get((group, bar))
            if v is None:
                continue
            x = x0 + bi * width
            shown = as_percent(v) if percent else number(v)
            out.append(
                f'<rect x="{x:.1f}" y="{py(v):.1f}" width="{width * 0.9:.1f}" height="{TOP + plot_h - py(v):.1f}" '
                f'fill="{PALETTE[bi % len(PALETTE)]}"><title>{escape(group)}, {escape(bar)}: {shown}</title></rect>'
            )
        out.append(_text(LEFT + (gi + 0.5) * slot, TOP + plot_h + 16, names[gi], anchor="middle"))
    out.append(
        f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" stroke="#333"/>'
        f'<text transform="translate(16 {TOP + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">'
        f"{escape(y_label)}</text>"
    )
    out += legend
    out.append("</svg>")
    return "\n".join(out)


#: Devices in a strip chart's row above which it is drawn as a histogram: a dot each stops being readable (and
#: 10,000 of them are a megabyte).
STRIP_DOTS = 100
#: Bars of such a row.
STRIP_BINS = 60


def _density(points: list[tuple[str, float]], px: Callable[[float], float], y: float, height: float,
             colour: str) -> list[str]:  # fmt: skip
    """A strip chart's row of many devices: bars centred on ``y``, as tall as the devices in them."""
    values = sorted(v for _, v in points)
    lo, hi = values[0], values[-1]
    width = (hi - lo) / STRIP_BINS
    counts = [0] * STRIP_BINS
    for v in values:
        counts[min(STRIP_BINS - 1, int((v - lo) / width)) if width > 0 else 0] += 1
    tallest = max(counts)
    out = []
    for b, n in enumerate(counts):
        if not n:
            continue
        a, z = lo + b * width, lo + (b + 1) * width
        x0, x1 = px(a), max(px(a) + 1.0, px(z))
        h = max(1.5, n / tallest * height)
        out.append(
            f'<rect x="{x0:.1f}" y="{y - h / 2:.1f}" width="{x1 - x0:.1f}" height="{h:.1f}" fill="{colour}" '
            f'fill-opacity="0.7"><title>{number(a)}–{number(z)}: {n} devices</title></rect>'
        )
    return out


def strip_chart(title: str, rows: dict[str, list[tuple[str, float]]], *, x_label: str,
                colours: dict[str, str] | None = None) -> str:  # fmt: skip
    """One row per card, one dot per device: how far apart same-model cards on different machines land; a row of
    more than ``STRIP_DOTS`` devices is a histogram (bars as tall as the devices in them)."""
    if not rows:
        return ""
    values = [v for points in rows.values() for _, v in points]
    lo, hi = min(values), max(values)
    pad = (hi - lo) * 0.1 or abs(hi) * 0.05 or 1.0
    ticks = axis(max(0.0, lo - pad) if lo >= 0 else lo - pad, hi + pad)
    lo, hi = ticks[0][0], ticks[-1][0]
    left = 200
    names = {card: _lines(card, int((left - 24) / CHAR_W)) for card in rows}
    row_h = {card: max(28, LINE_H * len(lines) + 10) for card, lines in names.items()}
    base = TOP + sum(row_h.values())
    height = base + BOTTOM
    plot_w = W - left - 40

    def px(x: float) -> float:
        return left + (x - lo) / (hi - lo) * plot_w

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {height}" width="{W}" height="{height}" '
        f'role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
        f'<text x="16" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    top = float(TOP)
    for i, (card, points) in enumerate(rows.items()):
        y = top + row_h[card] / 2
        top += row_h[card]
        lines = names[card]
        out.append(_text(left - 8, y + 4 - LINE_H * (len(lines) - 1) / 2, lines, anchor="end"))
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>')
        colour = (colours or {}).get(card) or PALETTE[i % len(PALETTE)]
        if len(points) > STRIP_DOTS:
            out += _density(points, px, y, row_h[card] - 6, colour)
            continue
        for device, v in points:
            out.append(
                f'<circle cx="{px(v):.1f}" cy="{y:.1f}" r="4" fill="{colour}" fill-opacity="0.7">'
                f"<title>{escape(device)}: {number(v)}</title></circle>"
            )
    for x, label in ticks:
        out.append(f'<text x="{px(x):.1f}" y="{base + 16}" text-anchor="middle">{escape(label)}</text>')
    out.append(f'<text x="{left + plot_w / 2:.1f}" y="{base + 34}" text-anchor="middle">{escape(x_label)}</text>')
    out.append("</svg>")
    return "\n".join(out)

"""Self-contained SVG line charts: no scripts, no fonts or styles from the network."""

from __future__ import annotations

import math
from html import escape

from ..compare import Series

#: Okabe-Ito: distinguishable for the common forms of colour blindness.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
W, H = 640, 360
LEFT, RIGHT, TOP, BOTTOM = 64, 190, 36, 48


def _nice_step(span: float, ticks: int = 5) -> float:
    raw = span / ticks
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for mult in (1, 2, 2.5, 5, 10):
        if raw <= mult * magnitude:
            return mult * magnitude
    return 10 * magnitude


def _fmt(value: float) -> str:
    return f"{int(value)}" if float(value).is_integer() else f"{value:g}"


def line_chart(title: str, series: list[Series], *, x_label: str, y_label: str, log_x: bool = True) -> str:
    """One line per series; a log2 x axis suits sizes and batches that double."""
    points = [p for s in series for p in s.points if p[0] > 0 or not log_x]
    if not points:
        return ""
    xs = sorted({x for x, _ in points})
    fx = (lambda x: math.log2(x)) if log_x else (lambda x: x)
    x0, x1 = fx(xs[0]), fx(xs[-1])
    if x1 == x0:
        x0, x1 = x0 - 1, x1 + 1
    step = _nice_step(max(y for _, y in points) or 1.0)
    y1 = step * math.ceil(max(y for _, y in points) / step) or step
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (fx(x) - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - y / y1 * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
        f'role="img" aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
        f'<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    y = 0.0
    while y <= y1 + 1e-9:
        out.append(f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{py(y):.1f}" y2="{py(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{py(y) + 4:.1f}" text-anchor="end">{y:g}</text>')
        y += step
    for x in xs:
        out.append(f'<text x="{px(x):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{_fmt(x)}</text>')
    out.append(
        f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" stroke="#333"/>'
        f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}" stroke="#333"/>'
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{H - 10}" text-anchor="middle">{escape(x_label)}</text>'
        f'<text transform="translate(16 {TOP + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle">'
        f"{escape(y_label)}</text>"
    )
    for i, s in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        pts = sorted(p for p in s.points if p[0] > 0 or not log_x)
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        for x, yv in pts:
            out.append(
                f'<circle cx="{px(x):.1f}" cy="{py(yv):.1f}" r="3" fill="{color}">'
                f"<title>{escape(s.label)}: {_fmt(x)} → {yv:.3g}</title></circle>"
            )
        ly = TOP + 14 * i
        out.append(f'<rect x="{W - RIGHT + 12}" y="{ly}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{W - RIGHT + 26}" y="{ly + 9}">{escape(s.label[:30])}</text>')
    out.append("</svg>")
    return "\n".join(out)

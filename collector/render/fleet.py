"""The fleet at a glance, drawn: a health figure's spread over a card's GPUs as a small histogram (the GPUs judged
low on it in their level's colour, never thinner than a line, so three slow GPUs among two thousand show), and the
links of a paged, filtered GPU list (state in the URL: every page a shareable link).
"""

from __future__ import annotations

from html import escape
from urllib.parse import urlencode

from ..analysis.fleet import Filter, Spread, Summary
from .numbers import number

#: The histogram's size in pixels: bars above, the range's two ends and the median below.
W, H = 200, 74
PLOT_H = 44
#: Colours: as the pages' level words (``base.html``: ok, suspect, slow).
OK, SUSPECT, SLOW = "#8aa4bf", "#d99a00", "#b42318"
#: A count that is not zero is at least this tall (pixels), however many GPUs its bin's tallest neighbour holds.
MIN_BAR = 2.0


def histogram(s: Spread) -> str:
    """``s`` as an SVG histogram, one bar per bin stacked ok / suspect / slow, the median marked."""
    tallest = max(b.gpus for b in s.bins)
    step = W / len(s.bins)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
        f'aria-label="{escape(s.label)}: {s.gpus} GPUs from {number(s.low)} to {number(s.high)} {escape(s.unit)}" '
        'font-family="sans-serif" font-size="10">'
    ]
    for i, b in enumerate(s.bins):
        if not b.gpus:
            continue
        x, y = i * step, float(PLOT_H)
        parts = []
        for count, colour in ((b.ok, OK), (b.suspect, SUSPECT), (b.slow, SLOW)):
            if count:
                h = max(MIN_BAR, count / tallest * PLOT_H)
                y -= h
                parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{step - 1:.1f}" height="{h:.1f}" fill="{colour}"/>')
        flagged = ", ".join(f"{n} {word}" for n, word in ((b.suspect, "suspect"), (b.slow, "slow")) if n)
        title = f"{number(b.low)}–{number(b.high)} {s.unit}: {b.gpus} GPU{'s' if b.gpus != 1 else ''}"
        out.append(f"<g><title>{escape(title + (f' ({flagged})' if flagged else ''))}</title>{''.join(parts)}</g>")
    span = s.high - s.low
    mx = (s.median - s.low) / span * W if span else W / 2
    out.append(f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="0" y2="{PLOT_H + 3}" stroke="#222" stroke-dasharray="2 2"/>')
    out.append(f'<line x1="0" x2="{W}" y1="{PLOT_H + 0.5}" y2="{PLOT_H + 0.5}" stroke="#555"/>')
    out.append(f'<text x="0" y="{PLOT_H + 14}">{escape(number(s.low))}</text>')
    out.append(f'<text x="{W}" y="{PLOT_H + 14}" text-anchor="end">{escape(number(s.high))}</text>')
    out.append(f'<text x="{W / 2:.0f}" y="{PLOT_H + 27}" text-anchor="middle">median {escape(number(s.median))} '
               f"{escape(s.unit)}</text>")  # fmt: skip
    out.append("</svg>")
    return "".join(out)


def spread_charts(summary: Summary) -> dict[str, list[tuple[Spread, str]]]:
    """Each card's spreads with their histograms."""
    return {c.card: [(s, histogram(s)) for s in c.spreads] for c in summary.cards}


def text_histogram(s: Spread) -> str:
    """``s`` in one line of text (the Markdown report): block characters from the lowest value to the highest, a
    dot where no GPU is (a space would collapse in a rendered table)."""
    blocks = "·▁▂▃▄▅▆▇█"
    tallest = max(b.gpus for b in s.bins)
    bars = "".join(blocks[max(1, round(b.gpus / tallest * 8))] if b.gpus else blocks[0] for b in s.bins)
    return f"{number(s.low)} {bars} {number(s.high)}"


def list_url(base: str, chosen: Filter, page: int = 1, **changed: str) -> str:
    """The GPU list at ``base`` with ``chosen``'s filter (``changed`` replacing some of it) at ``page``."""
    wanted = {"host": chosen.host, "card": chosen.card, "level": chosen.level} | changed
    query = [(k, v) for k, v in wanted.items() if v] + ([("page", str(page))] if page > 1 else [])
    return base + ("?" + urlencode(query) if query else "")

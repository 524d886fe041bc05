"""The report as one self-contained HTML file: inline CSS and SVG, nothing fetched when it is opened."""

from __future__ import annotations

from datetime import datetime, timezone
from html import escape

from ..compare import Comparison, Series
from .svg import line_chart
from .tables import label, spread, value

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1200px;
padding:0 1rem;color:#222}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:1rem 0}th,td{padding:.3rem .6rem;border-bottom:1px solid #eee}
th{text-align:left;background:#f6f6f6}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.datasheet td{color:#666;font-style:italic}.spread{color:#888;font-size:.85em;display:block}
.charts{display:flex;flex-wrap:wrap;gap:1rem}
.charts svg{width:calc(50% - .5rem);min-width:420px;height:auto}
.muted{color:#777}code{background:#f3f3f3;padding:0 .2rem}
"""


def _table(cmp: Comparison) -> str:
    head = "".join(f"<th>{escape(c.label)}</th>" for c in cmp.cards)
    body = [
        "<tr><td>Devices / runs</td>"
        + "".join(f'<td class="num">{c.devices} / {c.runs}</td>' for c in cmp.cards)
        + "</tr>"
    ]
    for row in cmp.rows:
        cells = []
        for cell in row.cells:
            extra = spread(cell, row.digits)
            note = f'<span class="spread">{escape(extra)}</span>' if extra else ""
            cells.append(f'<td class="num">{escape(value(cell, row.digits))}{note}</td>')
        css = ' class="datasheet"' if row.source == "datasheet" else ""
        body.append(f"<tr{css}><td>{escape(label(row))}</td>{''.join(cells)}</tr>")
    return f'<table id="comparison"><thead><tr><th></th>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _charts(title: str, charts: dict[str, list[Series]], *, x_label: str, y_label: str) -> str:
    svgs = [line_chart(f"{title} {name}", series, x_label=x_label, y_label=y_label) for name, series in charts.items()]
    return '<div class="charts">' + "".join(s for s in svgs if s) + "</div>" if any(svgs) else ""


def report_html(
    cmp: Comparison,
    *,
    matmul: dict[str, list[Series]],
    layers: dict[str, list[Series]],
    runs: list[tuple[object, ...]],
    generated_at: datetime | None = None,
) -> str:
    when = (generated_at or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")
    run_rows = "".join(
        "<tr>" + "".join(f"<td>{escape(str(v) if v is not None else '')}</td>" for v in row) + "</tr>" for row in runs
    )
    sections = [
        f"<h1>flopfleet: what these cards really deliver</h1><p class=muted>{cmp.runs} run(s); generated {when}. "
        "Each cell is the median over a card's devices and runs of the best value measured, with the spread "
        "(low–high, count) where several measured it. Italic rows are vendor datasheet figures.</p>",
        "<h2>Cross-card comparison</h2>",
        _table(cmp) if cmp.cards else "<p>No results stored yet.</p>",
    ]
    if matmul:
        sections += [
            "<h2>Matrix multiply: TFLOPS against size</h2>",
            _charts("matmul", matmul, x_label="n (square n×n×n)", y_label="TFLOPS"),
        ]
    if layers:
        sections += [
            "<h2>Transformer layers (fp16): TFLOPS against batch</h2>",
            _charts("", layers, x_label="batch", y_label="TFLOPS"),
        ]
    sections += [
        "<h2>Runs</h2>",
        "<table><thead><tr><th>started</th><th>host</th><th>suite</th><th>device</th><th>GPUs</th><th>torch</th>"
        f"<th>CUDA</th><th>driver</th><th>run</th></tr></thead><tbody>{run_rows}</tbody></table>",
    ]
    body = "\n".join(sections)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f"<title>flopfleet report</title><style>{CSS}</style></head><body>{body}</body></html>\n"
    )

"""The cross-card table as Markdown, for READMEs and issues."""

from __future__ import annotations

from ..compare import Comparison
from .tables import label, spread, value


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def comparison_markdown(cmp: Comparison) -> str:
    if not cmp.cards:
        return "# flopfleet comparison\n\nNo results stored yet.\n"
    head = "| | " + " | ".join(_escape(c.label) for c in cmp.cards) + " |"
    rule = "|---|" + "---:|" * len(cmp.cards)
    lines = [
        "# flopfleet comparison",
        "",
        f"{cmp.runs} run(s). Each cell: the median over a card's devices and runs of the best value measured "
        "(datasheet rows from vendor datasheets); a spread shows low–high and the count where several measured it.",
        "",
        head,
        rule,
        "| Devices / runs | " + " | ".join(f"{c.devices} / {c.runs}" for c in cmp.cards) + " |",
    ]
    for row in cmp.rows:
        cells = []
        for cell in row.cells:
            text = value(cell, row.digits)
            extra = spread(cell, row.digits)
            cells.append(f"{text} ({extra})" if extra else text)
        lines.append(f"| {_escape(label(row))} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"

"""The report as Markdown, for READMEs and issues: the cross-card table, fleet health, version changes."""

from __future__ import annotations

from ..compare import Comparison
from ..health import Verdict
from ..regressions import Change
from .tables import label, spread, value


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def comparison_markdown(cmp: Comparison) -> list[str]:
    head = "| | " + " | ".join(_escape(c.label) for c in cmp.cards) + " |"
    lines = [
        head,
        "|---|" + "---:|" * len(cmp.cards),
        "| Devices / runs | "
        + " | ".join("published" if c.published else f"{c.devices} / {c.runs}" for c in cmp.cards)
        + " |",
    ]
    for row in cmp.rows:
        cells = []
        for cell in row.cells:
            text = value(cell, row.digits)
            extra = spread(cell, row.digits)
            cells.append(f"{text} ({extra})" if extra else text)
        lines.append(f"| {_escape(label(row))} | " + " | ".join(cells) + " |")
    return lines + [""] + [f"_{note}_" for note in cmp.notes]


def report_markdown(cmp: Comparison, verdicts: list[Verdict], changes: list[Change]) -> str:
    if not cmp.cards:
        return "# flopfleet comparison\n\nNo results stored yet.\n"
    lines = [
        "# flopfleet comparison",
        "",
        f"{cmp.runs} run(s). Each cell: the median over a card's devices and runs of the best value measured "
        "(datasheet rows from vendor datasheets; columns marked published are not measured here); a spread shows "
        "low–high and the count where several measured it.",
        "",
        *comparison_markdown(cmp),
    ]
    if verdicts:
        lines += [
            "",
            "## Fleet health",
            "",
            "| GPU | card | host | verdict | likely cause / notes |",
            "|---|---|---|---|---|",
        ]
        lines += [
            f"| {v.device} | {_escape(v.card)} | {v.hostname} | {v.text} | {_escape('; '.join(v.causes))} |"
            for v in verdicts
        ]
    if changes:
        lines += ["", "## Software versions", "", "| GPU model | metric | from | to | change | noise | verdict |",
                  "|---|---|---|---|---:|---:|---|"]  # fmt: skip
        lines += [
            f"| {_escape(c.gpu_model)} | {c.metric} | {c.before} | {c.after} | {c.ratio - 1:+.1%} | {c.noise:.1%} | "
            f"{c.verdict} |"
            for c in changes
        ]
    return "\n".join(lines) + "\n"

"""The report as Markdown, for READMEs and issues: the cross-card table, fleet health, version changes.

Every cell and note goes through ``md_text``: names come from runs, so a ``|`` or newline in one must not break the
table, raw HTML must show as text, and Markdown syntax must not turn a name into a link or emphasis.
"""

from __future__ import annotations

import re

from schemas.judgement import GpuJudgement
from schemas.labels import HOSTNAME
from schemas.terminal import printable

from ..analysis.compare import Comparison
from ..analysis.fleet import LEVELS, Summary
from ..analysis.machines import MultiGpuMachine
from ..analysis.regressions import Change
from .fleet import text_histogram
from .numbers import number
from .tables import label, spread, value

_LINE_BREAKS = re.compile(r"\r\n|[\r\n]")
#: One pass, so a backslash added here is never escaped again.
_BACKSLASHED = re.compile(r"([\\|\[\]`*_])")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def md_text(text: object) -> str:
    """``text`` as literal Markdown table-cell text: one line, no HTML, no links, emphasis or code spans."""
    line = printable(_LINE_BREAKS.sub(" ", str(text)))  # other control characters (ESC …) as visible escapes
    line = "".join(_ENTITIES.get(char, char) for char in line)
    return _BACKSLASHED.sub(r"\\\1", line)


def _row(*cells: object) -> str:
    return "| " + " | ".join(md_text(c) for c in cells) + " |"


def comparison_markdown(cmp: Comparison) -> list[str]:
    lines = [
        "| | " + " | ".join(md_text(c.label) for c in cmp.cards) + " |",
        "|---|" + "---:|" * len(cmp.cards),
        _row("Devices / runs", *("published" if c.published else f"{c.devices} / {c.runs}" for c in cmp.cards)),
    ]
    for row in cmp.rows:
        cells = []
        for cell in row.cells:
            text = value(cell)
            extra = spread(cell)
            cells.append(f"{text} ({extra})" if extra else text)
        lines.append(_row(label(row), *cells))
    return lines + [""] + [f"_{md_text(note)}_" for note in cmp.notes]


def starved_note(results: int, runs: int) -> str | None:
    """What the report says of results measured on a busy host (flag ``starved``), which no figure holds."""
    if not results:
        return None
    return (
        f"Left out: {results} result(s) of {runs} run(s) flagged starved: the host was busy while they were "
        "measured (the measuring process waited for a CPU), so they say nothing of the GPU. Their runs show them."
    )


def report_markdown(
    cmp: Comparison,
    verdicts: list[GpuJudgement],
    changes: list[Change],
    machines: list[MultiGpuMachine] | None = None,
    starved: tuple[int, int] = (0, 0),
    summary: Summary | None = None,
) -> str:
    """The report; ``summary``: the fleet at a glance, and ``verdicts`` only those that need action (a fleet
    larger than a page)."""
    if not any(c.measured for c in cmp.cards):
        return "# flopfleet comparison\n\nNo results stored yet.\n"
    left_out = starved_note(*starved)
    lines = [
        "# flopfleet comparison",
        "",
        f"{cmp.runs} run(s). Each cell: the median over a card's devices of each device's latest best value (from "
        "its newest run that measured it; datasheet rows from vendor datasheets; columns marked published are not "
        "measured here); a spread shows low–high and the number of devices where several measured it.",
        *(["", md_text(left_out)] if left_out else []),
        "",
        *comparison_markdown(cmp),
    ]
    if summary is not None:
        lines += ["", "## Fleet health", "", *glance_markdown(summary, len(verdicts))]
    if verdicts:
        lines += [
            *([] if summary is not None else ["", "## Fleet health"]),
            "",
            f"| GPU | card | {HOSTNAME} | verdict | why / likely cause |",
            "|---|---|---|---|---|",
        ]
        lines += [_row(v.device, v.card, v.hostname, v.text, "; ".join([*v.reasons, *v.causes])) for v in verdicts]
    if machines:
        lines += ["", "## Multi-GPU machines", "", *machines_markdown(machines)]
    if changes:
        lines += ["", "## Software versions", "", "| GPU model | metric | from | to | change | noise | verdict |",
                  "|---|---|---|---|---:|---:|---|"]  # fmt: skip
        lines += [
            _row(c.gpu_model, c.metric, c.before, c.after, f"{c.ratio - 1:+.1%}", f"{c.noise:.1%}", c.verdict)
            for c in changes
        ]
    return "\n".join(lines) + "\n"


def machines_markdown(machines: list[MultiGpuMachine]) -> list[str]:
    lines = [
        f"| {HOSTNAME} | card | GPUs | links | all-reduce busbw (GB/s, ≥ 1 GiB) | DDP GPT-2-medium tokens/s | "
        "scaling efficiency |",
        "|---|---|---:|---|---:|---:|---:|",
    ]
    for m in machines:
        gpus = f"{m.gpus} ({m.nodes} nodes)" if m.nodes > 1 else str(m.gpus)
        busbw, tokens = number(m.allreduce_busbw_gbps), number(m.ddp_tokens_per_s)
        eff = f"{m.scaling_efficiency:.1%}" if m.scaling_efficiency is not None else ""
        lines.append(_row(m.hostname, m.card, gpus, m.links, busbw, tokens, eff))
    return lines


def glance_markdown(summary: Summary, listed: int) -> list[str]:
    """A fleet larger than a page: GPUs by card and level, each figure's spread, then what the list below holds."""
    words = [f"{summary.levels[level.value]:,} {level.value}" for level in LEVELS if summary.levels[level.value]]
    lines = [
        f"{summary.gpus:,} GPUs: {', '.join(words)}; {summary.need_action:,} need action.",
        "",
        "| card | GPUs | " + " | ".join(level.value for level in LEVELS) + " |",
        "|---|---:|" + "---:|" * len(LEVELS),
    ]
    for c in summary.cards:
        lines.append(_row(c.card, f"{c.gpus:,}", *(f"{c.levels[level.value]:,}" for level in LEVELS)))
    lines += ["", "Each figure's spread over a card's GPUs (their latest values, lowest to highest):", "",
              "| card | figure | spread | median | slow | suspect |", "|---|---|---|---:|---:|---:|"]  # fmt: skip
    for c in summary.cards:
        for s in c.spreads:
            lines.append(_row(c.card, f"{s.label} ({s.unit})", text_histogram(s), number(s.median), s.slow, s.suspect))
    if summary.need_action:
        first = f"the first {listed:,}, " if listed < summary.need_action else ""
        lines += ["", f"Need action ({first}worst first; the collector's /health lists every GPU, /health.csv too):"]
    return lines

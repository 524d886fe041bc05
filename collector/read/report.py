"""The report: the ``report`` view rendered as Markdown or one self-contained HTML page."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal

from ..render.charts import chart_sections, collective_charts
from ..render.fleet import spread_charts
from ..render.markdown import report_markdown, starved_note
from ..render.pages import render
from ..store.reads import Reads
from . import views

ReportFormat = Literal["md", "html"]


def render_report(data: views.Report, fmt: ReportFormat, *, generated_at: datetime | None = None) -> str:
    if fmt == "md":
        return report_markdown(data.cmp, data.listed, data.changes, data.machines, data.starved, data.summary)
    assert data.charts is not None
    return render(
        "report.html",
        standalone=True,
        cmp=data.cmp,
        chart_sections=chart_sections(data.charts),
        verdicts=data.listed,
        summary=data.summary,
        health_charts=spread_charts(data.summary) if data.summary else {},
        changes=data.changes,
        machines=data.machines,
        collective_charts=collective_charts(data.charts) if data.machines else [],
        runs=data.runs,
        left_out=starved_note(*data.starved),
        generated=(generated_at or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC"),
    )


def build_report(
    reads: Reads,
    fmt: ReportFormat,
    *,
    prices: dict[str, float] | None = None,
    generated_at: datetime | None = None,
    baselines: bool = False,
) -> str:
    """The report view, read and rendered; ``baselines``: each card's baseline as a column beside it."""
    data = views.report(reads, prices=prices, with_charts=fmt == "html", baselines=baselines)
    return render_report(data, fmt, generated_at=generated_at)

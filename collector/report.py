"""The report command's work: comparison, charts, fleet health and version changes, as Markdown or one HTML file."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal

import duckdb

from . import compare
from .health import fleet_health
from .machines import multi_gpu_machines
from .regressions import regressions
from .render.charts import chart_sections, collective_charts
from .render.markdown import report_markdown
from .render.pages import render
from .side_by_side import SideBySide

Format = Literal["md", "html"]


def build_report(
    con: duckdb.DuckDBPyConnection,
    fmt: Format,
    *,
    prices: dict[str, float] | None = None,
    generated_at: datetime | None = None,
) -> str:
    with SideBySide(con) as side:
        verdicts = side.submit(fleet_health)
        changes = side.submit(regressions)
        multi = side.submit(multi_gpu_machines)
        runs = side.submit(compare.runs_table) if fmt == "html" else None
        cmp = compare.comparison(con, extra_prices=prices)
        sections = chart_sections(con, cmp) if fmt == "html" else []
    if fmt == "md":
        return report_markdown(cmp, verdicts.result(), changes.result(), multi.result())
    assert runs is not None
    return render(
        "report.html",
        standalone=True,
        cmp=cmp,
        chart_sections=sections,
        verdicts=verdicts.result(),
        changes=changes.result(),
        machines=multi.result(),
        collective_charts=collective_charts(con) if multi.result() else [],
        runs=runs.result(),
        generated=(generated_at or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC"),
    )

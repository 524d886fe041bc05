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

Format = Literal["md", "html"]


def build_report(
    con: duckdb.DuckDBPyConnection,
    fmt: Format,
    *,
    prices: dict[str, float] | None = None,
    generated_at: datetime | None = None,
) -> str:
    cmp = compare.comparison(con, extra_prices=prices)
    verdicts = fleet_health(con)
    changes = regressions(con)
    multi = multi_gpu_machines(con)
    if fmt == "md":
        return report_markdown(cmp, verdicts, changes, multi)
    return render(
        "report.html",
        standalone=True,
        cmp=cmp,
        chart_sections=chart_sections(con, cmp),
        verdicts=verdicts,
        changes=changes,
        machines=multi,
        collective_charts=collective_charts(con) if multi else [],
        runs=compare.runs_table(con),
        generated=(generated_at or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC"),
    )

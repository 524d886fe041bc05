"""The report command's work: comparison data from the store, rendered as Markdown or HTML."""

from __future__ import annotations

from typing import Literal

import duckdb

from . import compare
from .render.html import report_html
from .render.markdown import comparison_markdown

Format = Literal["md", "html"]


def build_report(con: duckdb.DuckDBPyConnection, fmt: Format) -> str:
    cmp = compare.comparison(con)
    if fmt == "md":
        return comparison_markdown(cmp)
    return report_html(
        cmp,
        matmul=compare.matmul_series(con),
        layers=compare.layer_series(con),
        runs=compare.runs_table(con),
    )

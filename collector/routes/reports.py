"""The comparison report, as a page and as Markdown; the JSON Schema of a run."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, PlainTextResponse

from schemas import run_json_schema

from ..auth import Reader
from ..report import build_report
from .deps import StoreDep

router = APIRouter(tags=["reports"])


@router.get("/report", response_class=HTMLResponse)
def report_page(_: Reader, store: StoreDep) -> HTMLResponse:
    return HTMLResponse(build_report(store.reads(), "html"))


@router.get("/report.md", response_class=PlainTextResponse)
def report_markdown(_: Reader, store: StoreDep) -> PlainTextResponse:
    return PlainTextResponse(build_report(store.reads(), "md"), media_type="text/markdown")


@router.get("/api/v1/schema")
def schema() -> dict[str, Any]:
    """The JSON Schema a run must satisfy (generated from the models)."""
    return run_json_schema()

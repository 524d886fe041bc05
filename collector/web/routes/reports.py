"""The comparison report, as a page and as Markdown; GPU verdicts as JSON; the JSON Schema of a run."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from schemas import run_json_schema
from schemas.api import SCHEMA_PATH, VERDICTS_PATH
from schemas.contract import answer_exclude
from schemas.verdicts import FigureVerdict, GpuVerdict

from ...read import views
from ...read.report import build_report
from ...store.errors import BadRequest
from ..auth import Reader, VerdictReader
from .deps import StoreDep

#: GPUs one verdicts request may name (a machine has at most a few dozen).
MOST_UUIDS = 256

router = APIRouter(tags=["reports"])


BaselinesQuery = Annotated[bool, Query(description="Each card's baseline as a column beside it.")]


@router.get("/report", response_class=HTMLResponse)
def report_page(_: Reader, store: StoreDep, baselines: BaselinesQuery = False) -> HTMLResponse:
    return HTMLResponse(build_report(store.reads(), "html", baselines=baselines))


@router.get("/report.md", response_class=PlainTextResponse)
def report_markdown(_: Reader, store: StoreDep, baselines: BaselinesQuery = False) -> PlainTextResponse:
    return PlainTextResponse(build_report(store.reads(), "md", baselines=baselines), media_type="text/markdown")


@router.get(SCHEMA_PATH)
def schema() -> dict[str, Any]:
    """The JSON Schema a run must satisfy (generated from the models)."""
    return run_json_schema()


@router.get(VERDICTS_PATH, response_class=Response, responses={200: {"model": list[GpuVerdict]}})
def verdicts(
    _: VerdictReader,
    store: StoreDep,
    request: Request,
    uuid: Annotated[list[str] | None, Query(max_length=128, description="A GPU's UUID; repeatable.")] = None,
    host: Annotated[str | None, Query(max_length=256, description="Every GPU of this host.")] = None,
) -> Response:
    """The verdicts of the GPUs named by UUID, or of one host's (``flopfleet-agent check`` reads them); the
    figures of every run posted before the request are in them. A GPU the collector has no run of is absent."""
    if not uuid and not host:
        raise BadRequest("name the GPUs: ?uuid=GPU-...&uuid=... or ?host=NAME")
    if uuid and len(uuid) > MOST_UUIDS:
        raise BadRequest(f"uuid: at most {MOST_UUIDS} GPUs per request, {len(uuid)} given")
    found = views.gpu_verdicts(store.reads(), uuid, host)
    leave = answer_exclude(request.headers, frozenset(FigureVerdict.model_fields))  # an earlier agent's shape
    body = "[" + ",".join(v.wire("collector").model_dump_json(exclude=leave) for v in found) + "]"
    return Response(body, media_type="application/json")

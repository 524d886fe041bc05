"""Runs: post one (validated strictly, stored once), list them, fetch one as it was sent."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from schemas import RunAccepted, RunsPage, RunSummary

from ..errors import InvalidRun, PayloadTooLarge
from ..validation import parse_run
from .deps import SettingsDep, StoreDep

router = APIRouter(prefix="/api/v1/runs", tags=["runs"])


@router.post(
    "",
    status_code=201,
    responses={
        200: {"description": "This exact run was stored before; nothing changed"},
        409: {"description": "This run_id is stored with different content"},
        413: {"description": "The body is over the size limit"},
        422: {"description": "The run is invalid; the message names each failing field"},
    },
)
async def post_run(request: Request, response: Response, store: StoreDep, settings: SettingsDep) -> RunAccepted:
    body = await read_body(request, settings.max_body_bytes)
    run = parse_run(body)
    stored = await run_in_threadpool(store.add_run, run)
    if stored.status == "duplicate":
        response.status_code = 200
    return RunAccepted(run_id=run.run_id, status=stored.status, results=stored.results)


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it passes ``limit`` bytes (never read whole into memory first)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the body is {declared} bytes; the limit is {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise PayloadTooLarge(f"the body is over the limit of {limit} bytes")
        chunks.append(chunk)
    if not size:
        raise InvalidRun("the request body is empty; send a run as JSON")
    return b"".join(chunks)


@router.get("")
def list_runs(
    store: StoreDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> RunsPage:
    rows, count = store.list_runs(limit, offset)
    data = tuple(RunSummary.model_validate({**r, "gpu_names": tuple(r["gpu_names"])}, strict=False) for r in rows)
    return RunsPage(data=data, count=count, limit=limit, offset=offset)


@router.get("/{run_id}", response_class=Response, responses={200: {"content": {"application/json": {}}}})
def get_run(run_id: str, store: StoreDep) -> Response:
    """The run exactly as stored (its canonical JSON)."""
    return Response(content=store.run_payload(run_id), media_type="application/json")

"""Runs: post one (token, size limits, gzip, strict validation, stored once; a newer minor's run stored as far as this
collector knows it, docs/contract.md), list them, fetch one as stored."""

from __future__ import annotations

import asyncio
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query, Request, Response

from schemas import RunAccepted, RunsPage, RunSummary
from schemas.api import RUNS_PATH

from ...store import Store
from ...store.errors import InvalidRun, StorageUnavailable
from ..auth import Reader, Writer
from ..errors import Busy
from ..metrics import Metrics
from ..settings import Settings
from ..validation import Validator
from .bodies import read_body
from .deps import LiveStoreDep, MetricsDep, SettingsDep, StoreDep, ValidatorDep

router = APIRouter(prefix=RUNS_PATH, tags=["runs"])


@router.post(
    "",
    status_code=201,
    response_model=RunAccepted,
    responses={
        200: {"model": RunAccepted, "description": "This exact run was stored before; nothing changed"},
        401: {"description": "No token, or not a valid one"},
        409: {"description": "This run_id is stored with different content"},
        413: {"description": "The body is over the size limit (on the wire or after gunzip)"},
        429: {"description": "Too many posts in flight; send the run again after Retry-After seconds"},
        503: {"description": "The database cannot store runs now (a full disk, say); send the run again later"},
        415: {"description": "A Content-Encoding other than gzip"},
        422: {
            "description": "The run is invalid; the message names each failing field. A run of a contract major "
            "this collector does not read: code unsupported_version (docs/contract.md)"
        },
    },
)
async def post_run(
    request: Request,
    token: Writer,
    store: LiveStoreDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    validator: ValidatorDep,
) -> Response:
    state = request.app.state  # the event loop's own counter: no lock needed
    if state.posts_in_flight >= settings.max_posts_in_flight:
        raise Busy(f"{state.posts_in_flight} runs are being stored; send this one again shortly")
    state.posts_in_flight += 1
    try:
        return await _store_posted(request, token, store, settings, metrics, validator)
    finally:
        state.posts_in_flight -= 1


async def _store_posted(
    request: Request, token: str, store: Store, settings: Settings, metrics: Metrics, validator: Validator
) -> Response:
    body, gzipped = await read_body(request, settings.max_body_bytes)
    if not body:
        raise InvalidRun("the request body is empty; send a run as JSON")
    checked = await validator.check(body, gzip_it=gzipped is None)
    payload = gzipped if gzipped is not None else checked.gzipped
    assert payload is not None
    written = store.submit(checked.document or body, run_id=checked.run_id, results=checked.results,
                           sha256=checked.sha256, payload=payload, token_name=token,
                           not_understood=checked.not_understood)  # fmt: skip
    try:  # shielded: the writer still answers the run's future when this request gives up on it
        stored = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(written)), settings.write_timeout_s)
    except asyncio.TimeoutError:
        raise StorageUnavailable(
            f"the database did not store the run within {settings.write_timeout_s:g} s; send it again"
        ) from None
    metrics.runs.labels(status=stored.status).inc()
    if stored.status == "created":
        metrics.results.inc(stored.results)
    accepted = RunAccepted(run_id=UUID(stored.run_id), status=stored.status, results=stored.results,
                           not_understood=checked.not_understood)  # fmt: skip
    # A Response goes out as it is: FastAPI would otherwise validate the model it was just built from again. An
    # empty ``not_understood`` is left out: agents from before the field read their receipt strictly.
    return Response(accepted.model_dump_json(exclude_defaults=True), status_code=201 if stored.status == "created"
                    else 200, media_type="application/json")  # fmt: skip


@router.get("")
def list_runs(
    _: Reader,
    store: StoreDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
) -> RunsPage:
    rows, count = store.list_runs(limit, offset)
    data = tuple(RunSummary.model_validate({**r, "gpu_names": tuple(r["gpu_names"]),
                                            "not_understood": tuple(r["not_understood"] or ())}, strict=False)
                 for r in rows)  # fmt: skip
    return RunsPage(data=data, count=count, limit=limit, offset=offset)


@router.get("/{run_id}", response_class=Response, responses={200: {"content": {"application/json": {}}}})
def get_run(run_id: str, _: Reader, store: StoreDep) -> Response:
    """The run exactly as stored (its canonical JSON)."""
    return Response(content=store.run_payload(run_id), media_type="application/json")

"""Baselines: list and fetch them, export this fleet's, import another's (admin), remove one (admin)."""

from __future__ import annotations

import socket
from datetime import date
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from schemas.api import BASELINES_PATH
from schemas.baselines import BaselineError, dump_bundle, parse_bundle

from ...analysis.baselines import parse_tags
from ...read.export import export_baseline
from ..auth import Admin, Reader
from ..errors import InvalidBaseline
from .bodies import read_body
from .deps import StoreDep

router = APIRouter(prefix=BASELINES_PATH, tags=["baselines"])
#: A bundle of a thousand cards is well under this.
MAX_BUNDLE_BYTES = 8 << 20
JSON = "application/json"


@router.get("")
def list_baselines(_: Reader, store: StoreDep) -> list[dict[str, Any]]:
    """Every baseline held (bundled and imported): id, name, origin, cards, suites, GPUs, runs, period."""
    return store.reads().baseline_list()


@router.get("/export", responses={200: {"content": {JSON: {}}, "description": "A baseline bundle"}})
def export(
    _: Reader,
    store: StoreDep,
    model: Annotated[str | None, Query(description="Cards matching this regex")] = None,
    since: Annotated[date | None, Query(description="Runs started on or after this day")] = None,
    suite: Annotated[str | None, Query()] = None,
    tag: Annotated[list[str] | None, Query(description="key=value; repeatable")] = None,
    name: Annotated[str | None, Query()] = None,
) -> Response:
    """This fleet's healthy runs as a baseline bundle (``flopfleet-collector baseline export``); 404 with the reasons
    when nothing is left to export."""
    tags = parse_tags(tag or [])
    host = socket.gethostname()
    exported = export_baseline(store.reads(), name=name or f"{host} {date.today():%Y-%m-%d}", collector=host,
                                     model=model, since=since, tags=tags, suite=suite)  # fmt: skip
    return Response(dump_bundle(exported.bundle), media_type=JSON)


@router.get("/{ident}", responses={200: {"content": {JSON: {}}, "description": "The bundle, hash unchanged"}})
def show(ident: str, _: Reader, store: StoreDep) -> Response:
    return Response(store.baseline_bundle(ident), media_type=JSON)


IMPORT_ANSWERS: dict[int | str, dict[str, Any]] = {
    200: {"description": "This bundle was imported before"},
    413: {"description": "Over 8 MiB on the wire or after gunzip"},
    415: {"description": "A Content-Encoding other than gzip"},
    422: {"description": "Not a valid bundle; the message says why"},
}


@router.post("", status_code=201, responses=IMPORT_ANSWERS)
async def import_baseline(request: Request, _: Admin, store: StoreDep, response: Response) -> dict[str, Any]:
    """Import a bundle (JSON, or gzip with Content-Encoding), checked whole first (format, schema version, fields,
    content hash): nothing of a bundle that fails is stored."""
    body = (await read_body(request, MAX_BUNDLE_BYTES))[0]  # refused past the limit before it is all read
    try:
        bundle = parse_bundle(body, expect_sha256=request.query_params.get("sha256"))
    except BaselineError as exc:
        raise InvalidBaseline(str(exc)) from None
    status = await run_in_threadpool(store.add_baseline, bundle)
    response.status_code = 201 if status == "created" else 200
    return {"id": bundle.sha256, "name": bundle.name, "status": status, "cards": sorted({c.card for c in bundle.cards})}


@router.delete("/{ident}")
def remove(ident: str, _: Admin, store: StoreDep) -> dict[str, str]:
    found, name = store.remove_baseline(ident)
    return {"id": found, "name": name, "status": "removed"}

"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from contextlib import suppress

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from ...read import views
from ...store import Store
from ...store.errors import CollectorError
from ..auth import Reader
from .deps import LiveStoreDep, MetricsDep

router = APIRouter(tags=["operations"])


def _failed(store: Store) -> JSONResponse | None:
    failure = store.failure
    if failure is None:
        return None
    body = {"status": "storage_failed", "reason": failure.reason, "since": failure.since.isoformat(),
            "recovering": True, "reopening": failure.invalidated, "message": failure.message()}  # fmt: skip
    return JSONResponse(body, status_code=503, headers={"Retry-After": "5"})


@router.get("/healthz", responses={503: {"description": "The database cannot be written; the body says why"}})
async def healthz(store: LiveStoreDep) -> JSONResponse:
    """The process answers and its database can be written."""
    return _failed(store) or JSONResponse({"status": "ok"})


@router.get("/readyz", responses={503: {"description": "Not ready: the database does not answer, or shutting down"}})
def readyz(request: Request, store: LiveStoreDep) -> JSONResponse:
    """The database answers with the layout this collector writes, and the server is not shutting down."""
    if getattr(request.app.state, "stopping", False):
        return JSONResponse({"status": "stopping"}, status_code=503)
    failed = _failed(store)
    if failed is not None:
        return failed
    try:
        ok = store.ready()
    except Exception as exc:  # any failure to answer means not ready
        return JSONResponse({"status": "unavailable", "reason": type(exc).__name__}, status_code=503)
    return JSONResponse({"status": "ready" if ok else "unavailable"}, status_code=200 if ok else 503)


@router.get("/metrics", response_class=Response)
def metrics(_: Reader, store: LiveStoreDep, registry: MetricsDep) -> Response:
    """The collector's own metrics, then each GPU's (figures, verdict, error counters: ``render.prometheus``), read
    from the summaries as they are (a scrape never waits on the writer; none while storage has failed), or while the
    fleet is judged at start, as the last collector on the file left them (``web.metrics.KeptLines``)."""
    body = registry.render(store)
    if store.failure is None:
        with suppress(CollectorError):
            kept = registry.kept.answer()
            body += kept if kept is not None else registry.gpus.render(views.fleet_metrics(store.reads()))
    return Response(body, media_type=CONTENT_TYPE_LATEST)

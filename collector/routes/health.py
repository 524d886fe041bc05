"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from ..auth import Reader
from .deps import LiveStoreDep, MetricsDep

router = APIRouter(tags=["operations"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process answers."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "Not ready: the database does not answer, or shutting down"}})
def readyz(request: Request, store: LiveStoreDep) -> JSONResponse:
    """The database answers with the layout this collector writes, and the server is not shutting down."""
    if getattr(request.app.state, "stopping", False):
        return JSONResponse({"status": "stopping"}, status_code=503)
    try:
        ok = store.ready()
    except Exception as exc:  # any failure to answer means not ready
        return JSONResponse({"status": "unavailable", "reason": type(exc).__name__}, status_code=503)
    return JSONResponse({"status": "ready" if ok else "unavailable"}, status_code=200 if ok else 503)


@router.get("/metrics", response_class=Response)
def metrics(_: Reader, store: LiveStoreDep, registry: MetricsDep) -> Response:
    return Response(registry.render(store), media_type=CONTENT_TYPE_LATEST)

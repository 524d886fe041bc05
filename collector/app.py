"""``create_app(settings)``: the FastAPI application, with one JSON error shape for every failure."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from schemas import ErrorBody, ErrorDetail, ErrorInfo, RunSubmission

from . import __version__
from .errors import CollectorError
from .metrics import Metrics
from .observe import Observe
from .routes import admin, health, pages, reports, runs, sql
from .settings import Settings
from .store import Store
from .tokens import TokenStore
from .validation import Validator

log = logging.getLogger("flopfleet.collector")
RUNS_PATH = "/api/v1/runs"


def error_response(
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = ErrorBody(
        error=ErrorInfo(code=code, message=message, details=tuple(ErrorDetail(**d) for d in details or []))
    )
    return JSONResponse(status_code=status, content=body.model_dump(mode="json"), headers=headers)


def create_app(settings: Settings, store: Store | None = None) -> FastAPI:
    """The app over ``settings.db``; a store passed in is used (and left open) instead, as tests do."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = store is None
        app.state.store = store or Store(settings.db, threads=settings.db_threads)
        if owned:
            app.state.store.harden()
        app.state.store.warm()
        app.state.validator.start()
        log.info("collector ready", extra={"db": str(settings.db), "version": __version__})
        try:
            yield
        finally:
            app.state.stopping = True
            app.state.validator.stop()
            if owned:
                app.state.store.close()

    app = FastAPI(
        title="flopfleet collector",
        version=__version__,
        description="Stores flopfleet benchmark runs in DuckDB, compares GPUs, answers read-only SQL.",
        lifespan=lifespan,
        # FastAPI's built-in OpenTelemetry looks up the global providers on every request (a tenth of the event
        # loop's time under ingest load); the collector has its own metrics (/metrics) and logs.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.settings = settings
    app.state.tokens = TokenStore(settings.db)
    app.state.metrics = metrics = Metrics()
    app.state.validator = Validator(settings.validate_workers)
    app.state.stopping = False
    for router in (health.router, runs.router, sql.router, reports.router, admin.router, pages.router):
        app.include_router(router)

    app.add_middleware(Observe, metrics=metrics)

    @app.exception_handler(CollectorError)
    async def collector_error(request: Request, exc: CollectorError) -> JSONResponse:
        if request.method == "POST" and request.url.path == RUNS_PATH:
            metrics.rejected.labels(reason=exc.code).inc()
        headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
        return error_response(exc.status_code, exc.code, exc.message, exc.details, headers)

    @app.exception_handler(RequestValidationError)
    async def request_invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        details = [
            {"loc": ".".join(str(p) for p in e["loc"]), "message": e["msg"], "type": e["type"]} for e in exc.errors()
        ]
        message = "; ".join(f"{d['loc']}: {d['message']}" for d in details[:5])
        return error_response(422, "validation_error", message, details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(exc.status_code, "http_error", str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return error_response(500, "internal_error", f"internal error: {type(exc).__name__}")

    def openapi() -> dict[str, Any]:
        """The generated spec, with the run body (validated by hand for strictness) described in it."""
        if app.openapi_schema:
            return app.openapi_schema
        from fastapi.openapi.utils import get_openapi

        spec = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        schema = RunSubmission.model_json_schema(ref_template="#/components/schemas/{model}")
        components = spec.setdefault("components", {}).setdefault("schemas", {})
        components.update(schema.pop("$defs", {}))
        components["RunSubmission"] = schema
        spec["paths"][RUNS_PATH]["post"]["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunSubmission"}}},
        }
        spec.setdefault("components", {}).setdefault("securitySchemes", {})["bearer"] = {
            "type": "http",
            "scheme": "bearer",
        }
        app.openapi_schema = spec
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
    return app

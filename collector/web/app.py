"""``create_app(settings)``: the FastAPI application, with one JSON error shape for every failure."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus
from typing import Any

import duckdb
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from schemas import ErrorBody, ErrorDetail, ErrorInfo, RunSubmission
from schemas.api import RUNS_PATH

from .. import __version__
from ..read import views
from ..render.pages import render
from ..store import STORAGE_ERRORS, Store
from ..store.errors import CollectorError, StorageUnavailable
from ..store.redact import scrub
from .auth import reads_need_token
from .metrics import Metrics
from .observe import Observe
from .routes import admin, baselines, health, pages, reports, runs, sql
from .security import ANSWER_HEADERS, Guard, allowed_hosts
from .settings import Settings
from .tokens import TokenStore
from .validation import Validator

log = logging.getLogger("flopfleet.collector")
#: How long a stopping collector waits for its judgement of the fleet at start (seconds at 10,000 GPUs).
JUDGING_WAIT_S = 30
#: What a 503 or 429 asks a client to wait (seconds); agents add up to half again at random (agent/upload.py).
RETRY_AFTER_S = 5


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


def wants_page(request: Request) -> bool:
    """A browser asking for a page (not the API, a CSV or a program): its error is a page too, the same status."""
    accept = request.headers.get("accept", "")
    path = request.url.path
    return (request.method in ("GET", "HEAD") and "text/html" in accept and not path.startswith("/api/")
            and not path.endswith((".csv", ".md", ".json")))  # fmt: skip


def error_page(status: int, message: str, headers: dict[str, str] | None = None) -> HTMLResponse:
    """What a browser is shown instead of the JSON error: the status, the message and the way back."""
    return HTMLResponse(render("error.html", status=status, reason=HTTPStatus(status).phrase, message=message),
                        status_code=status, headers=headers)  # fmt: skip


def _judge_fleet(app: FastAPI) -> None:
    """The fleet judged and its metrics written once as the collector starts, beside its first requests: later
    refreshes judge only what changed (``read.verdicts``), so the first page or scrape need not judge it all.
    Meanwhile scrapes answer what the last collector on the file kept as it stopped (``web.metrics.KeptLines``)."""
    store, metrics = app.state.store, app.state.metrics
    try:
        reads = store.reads()
        metrics.kept.loaded(reads.kept_metrics(views.judged_from(reads)))
    except Exception:
        log.warning("reading the metrics kept in the file failed; the first scrape waits for the fleet's judgement",
                    exc_info=True)  # fmt: skip
        metrics.kept.loaded(None)
    try:
        metrics.gpus.render(views.fleet_metrics(store.reads()))
        app.state.judged = True
    except CollectorError as exc:  # storage failed meanwhile (/readyz says so): the first reader judges it instead
        log.info("the fleet was not judged at start: %s", exc)
    except Exception:
        log.warning("judging the fleet at start failed; the first reader judges it", exc_info=True)
    finally:
        metrics.kept.judged()


def _keep_metrics(app: FastAPI) -> None:
    """Each GPU's series once the last runs are summarised, kept in the file for the next collector's first scrapes
    (``Store.keep_metrics``); only where this one judged its fleet and can still write."""
    store, gpus = app.state.store, app.state.metrics.gpus
    if not app.state.judged or store.failure is not None:
        return
    try:
        store.keep_metrics(lambda reads: (views.judged_from(reads), gpus.render(views.fleet_metrics(reads))))
    except Exception:
        log.warning("the metrics were not kept for the next collector; its first scrape waits for its judgement",
                    exc_info=True)  # fmt: skip


def create_app(
    settings: Settings, store: Store | None = None, *, close_store: bool = False, validator: Validator | None = None
) -> FastAPI:
    """The app over ``settings.db``; a store passed in is used instead (opened and hardened by its caller, as
    ``serve`` does before it listens), and left open unless ``close_store``: uvicorn ends the process with the
    SIGTERM it caught once the app has shut down, so ``serve``'s store must be closed here. ``validator``: its
    workers, launched by the caller before the store opened (else made here)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        opened = store is None
        owned = opened or close_store
        app.state.store = store or settings.open_store()
        if opened:
            app.state.store.harden(settings.duckdb_memory_limit())
        app.state.validator.launch()  # already launched by ``serve``; they import while the store warms
        app.state.store.warm()
        app.state.validator.wait()
        app.state.metrics.kept.start()
        judging = threading.Thread(target=_judge_fleet, args=(app,), name="flopfleet-verdicts", daemon=True)
        judging.start()
        log.info("collector ready", extra={"db": str(settings.db), "version": __version__})
        try:
            yield
        finally:
            app.state.stopping = True
            app.state.validator.stop()
            judging.join(JUDGING_WAIT_S)
            if owned:
                _keep_metrics(app)
                app.state.store.close()

    app = FastAPI(
        title="flopfleet collector",
        version=__version__,
        description="Stores flopfleet benchmark runs in DuckDB, compares GPUs, answers read-only SQL.",
        lifespan=lifespan,
        # FastAPI's docs pages load their scripts from a CDN; the collector loads nothing from elsewhere. The
        # OpenAPI document itself stays at /openapi.json.
        docs_url=None,
        redoc_url=None,
        # FastAPI's built-in OpenTelemetry looks up the global providers on every request (a tenth of the event
        # loop's time under ingest load); the collector has its own metrics (/metrics) and logs.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.settings = settings
    app.state.tokens = TokenStore(settings.db)
    app.state.metrics = metrics = Metrics()
    app.state.validator = validator or Validator(settings.validate_workers)
    app.state.stopping = False
    app.state.judged = False  # the fleet judged at start (then its metrics are kept in the file as it stops)
    app.state.posts_in_flight = 0
    for router in (
        health.router,
        runs.router,
        sql.router,
        reports.router,
        admin.router,
        baselines.router,
        pages.router,
    ):
        app.include_router(router)

    app.add_middleware(Guard, hosts=allowed_hosts(settings.allowed_hosts, settings.host, reads_need_token(settings)))
    app.add_middleware(Observe, metrics=metrics)  # outermost: it counts what Guard refuses too

    @app.exception_handler(CollectorError)
    async def collector_error(request: Request, exc: CollectorError) -> Response:
        if request.method == "POST" and request.url.path == RUNS_PATH:
            metrics.rejected.labels(reason=exc.code).inc()
        headers = {"WWW-Authenticate": "Bearer"} if exc.status_code == 401 else None
        if exc.status_code in (503, 429):
            headers = {"Retry-After": str(RETRY_AFTER_S)}
        if wants_page(request):
            return error_page(exc.status_code, exc.message, headers)
        return error_response(exc.status_code, exc.code, exc.message, exc.details, headers)

    @app.exception_handler(RequestValidationError)
    async def request_invalid(request: Request, exc: RequestValidationError) -> Response:
        details = [
            {"loc": ".".join(str(p) for p in e["loc"]), "message": e["msg"], "type": e["type"]} for e in exc.errors()
        ]
        message = "; ".join(f"{d['loc']}: {d['message']}" for d in details[:5])
        if wants_page(request):
            return error_page(422, message)
        return error_response(422, "validation_error", message, details)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if wants_page(request):
            message = f"there is no page at {request.url.path}" if exc.status_code == 404 else str(exc.detail)
            return error_page(exc.status_code, message)
        return error_response(exc.status_code, "http_error", str(exc.detail))

    @app.exception_handler(duckdb.Error)
    async def database_error(request: Request, exc: duckdb.Error) -> JSONResponse:
        """A read that found the database failing is answered 503 and tells the store (which then recovers)."""
        if not isinstance(exc, STORAGE_ERRORS):
            log.exception("database error")
            return error_response(500, "internal_error", f"internal error: {type(exc).__name__}")
        live: Store | None = getattr(request.app.state, "store", None)
        if live is not None:
            live.report_fatal(exc)
        message = f"the database cannot answer now: {scrub(str(exc).splitlines()[0], settings.db)}"
        return error_response(503, StorageUnavailable.code, message, headers={"Retry-After": str(RETRY_AFTER_S)})

    @app.exception_handler(ClientDisconnect)
    async def client_left(_: Request, exc: ClientDisconnect) -> JSONResponse:
        return error_response(400, "client_disconnected", "the client went away before its request was read")

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        # Answered outside the middleware (Starlette's outermost error handler), so the headers are added here.
        headers = {name.decode(): value.decode() for name, value in ANSWER_HEADERS}
        return error_response(500, "internal_error", f"internal error: {type(exc).__name__}", headers=headers)

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

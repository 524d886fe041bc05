"""The HTTP server around the app: uvicorn with the collector's limits, the same for ``serve`` and for tests."""

from __future__ import annotations

import logging
from typing import Any

import uvicorn
from fastapi import FastAPI

from .metrics import Metrics
from .settings import Settings

log = logging.getLogger(__name__)
#: How long SIGTERM waits for requests in flight (a stuck disk answers 503 well before: ``Store``).
GRACEFUL_S = 30


def server_config(app: FastAPI, settings: Settings, **overrides: Any) -> uvicorn.Config:
    """uvicorn's config for ``app`` with the limits of ``settings`` (``http_limits``) and the open-file limit raised."""
    metrics: Metrics = app.state.metrics
    try:
        from .http_limits import HttpLimits, connection_cap, limited_protocol, raise_open_file_limit
    except ImportError:  # httptools missing (the collector extra brings it): h11 caps the headers, nothing more
        log.warning("httptools is not installed: header and body deadlines and the connection cap are off")
        protocol: Any = "h11"
        extra: dict[str, Any] = {"h11_max_incomplete_event_size": settings.max_header_bytes}
    else:
        limits = HttpLimits(
            max_header_bytes=settings.max_header_bytes,
            header_timeout_s=settings.header_timeout_s,
            body_timeout_s=settings.body_timeout_s,
            max_connections=connection_cap(settings.max_connections, raise_open_file_limit()),
        )
        protocol, extra = limited_protocol(limits, metrics.refusal), {}
    options: dict[str, Any] = {
        "http": protocol,
        "ws": "none",
        "timeout_keep_alive": settings.idle_timeout_s,
        "log_level": settings.log_level,
        "log_config": None,
        "access_log": False,
        "timeout_graceful_shutdown": GRACEFUL_S,
        **extra,
        **overrides,
    }
    return uvicorn.Config(app, **options)

"""Dependencies shared by the routers.

All ``async def``: FastAPI runs a plain ``def`` dependency in its thread pool, a thread hop (and GIL hand-offs) per
dependency per request for what is an attribute lookup.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import Depends, Request

from ...store import Store
from ...store.errors import StorageUnavailable
from ..metrics import Metrics
from ..settings import Settings
from ..validation import Validator


async def get_store(request: Request) -> Store:
    """The store once every run acknowledged so far has its figures (they follow its commit by a moment), so that
    a page, report or query read right after a post shows the run."""
    store: Store = request.app.state.store
    if store.failure is not None:
        raise StorageUnavailable(store.failure.message())
    if not store.settled:
        await asyncio.to_thread(store.settle)
    return store


async def get_live_store(request: Request) -> Store:
    """The store as it is, for posting runs and for health and metrics, which must not wait on the writer."""
    store: Store = request.app.state.store
    return store


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


StoreDep = Annotated[Store, Depends(get_store)]
LiveStoreDep = Annotated[Store, Depends(get_live_store)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]


async def get_validator(request: Request) -> Validator:
    validator: Validator = request.app.state.validator
    return validator


ValidatorDep = Annotated[Validator, Depends(get_validator)]

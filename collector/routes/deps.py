"""Dependencies shared by the routers.

All ``async def``: FastAPI runs a plain ``def`` dependency in its thread pool, a thread hop (and GIL hand-offs) per
dependency per request for what is an attribute lookup.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from ..metrics import Metrics
from ..settings import Settings
from ..store import Store
from ..validation import Validator


async def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


async def get_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


StoreDep = Annotated[Store, Depends(get_store)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]


async def get_validator(request: Request) -> Validator:
    validator: Validator = request.app.state.validator
    return validator


ValidatorDep = Annotated[Validator, Depends(get_validator)]

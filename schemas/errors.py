"""The one JSON shape every error response has."""

from __future__ import annotations

from pydantic import Field

from .base import WireModel


class ErrorDetail(WireModel):
    """One failing field: ``loc`` is its dotted path in the payload, e.g. ``results.3.params.n``."""

    loc: str
    message: str
    type: str


class ErrorInfo(WireModel):
    code: str
    message: str
    details: tuple[ErrorDetail, ...] = Field(default=())


class ErrorBody(WireModel):
    error: ErrorInfo

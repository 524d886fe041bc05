"""The one JSON shape every error response has."""

from __future__ import annotations

from pydantic import Field

from .base import Answer


class ErrorDetail(Answer):
    """One failing field: ``loc`` is its dotted path in the payload, e.g. ``results.3.params.n``."""

    loc: str
    message: str
    type: str


class ErrorInfo(Answer):
    code: str
    message: str
    details: tuple[ErrorDetail, ...] = Field(default=())


class ErrorBody(Answer):
    error: ErrorInfo

"""What the collector answers: acknowledgements and run listings."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import AwareDatetime, Field

from .base import Answer, Count, Label, Slug, Text

#: The collector's paths that agents call: one spelling, for the agent's requests and the collector's routes.
RUNS_PATH = "/api/v1/runs"
VERDICTS_PATH = "/api/v1/verdicts"
TOKEN_PATH = "/api/v1/token"
#: The collector's other paths: one spelling, for its routes, its pages' links and its CLI.
SQL_PATH = "/api/v1/sql"
SNAPSHOT_PATH = "/api/v1/snapshot"
SCHEMA_PATH = "/api/v1/schema"
BASELINES_PATH = "/api/v1/baselines"
#: The most entries a run's ``not_understood`` keeps (each names one field, value or benchmark kind, with a count).
MAX_NOT_UNDERSTOOD = 100


class TokenInfo(Answer):
    """Who a bearer token is (``GET /api/v1/token``): the agent's first contact, before it measures anything, so a
    wrong token or a URL that is not a flopfleet collector costs one line instead of a run."""

    name: Label
    scopes: tuple[Slug, ...]


class RunAccepted(Answer):
    """The answer to a posted run; ``duplicate`` when that exact run was stored before. ``not_understood``: what of a
    run of a newer minor the collector did not know, and so did not store in its tables (docs/contract.md); left out
    of the answer when empty, as collectors from before the field answered."""

    run_id: UUID
    status: Literal["created", "duplicate"]
    results: Count
    not_understood: tuple[Text, ...] = Field(default=(), max_length=MAX_NOT_UNDERSTOOD)


class RunSummary(Answer):
    run_id: UUID
    suite: Slug
    device: Literal["cuda", "cpu"]
    hostname: Label
    started_at: AwareDatetime
    received_at: AwareDatetime
    gpu_names: tuple[Label, ...]
    results: Count
    #: The run's contract version (``1.2``) and what of it the collector did not know when it stored it.
    contract: Label = "1.0"
    not_understood: tuple[Text, ...] = ()


class RunsPage(Answer):
    data: tuple[RunSummary, ...]
    count: Count
    limit: Count
    offset: Count = Field(default=0)

"""What the collector answers: acknowledgements and run listings."""

from __future__ import annotations

from typing import Literal
from uuid import UUID

from pydantic import AwareDatetime, Field

from .base import Count, Label, Slug, WireModel

#: The collector's paths that agents call: one spelling, for the agent's requests and the collector's routes.
RUNS_PATH = "/api/v1/runs"
VERDICTS_PATH = "/api/v1/verdicts"
TOKEN_PATH = "/api/v1/token"
#: The collector's other paths: one spelling, for its routes, its pages' links and its CLI.
SQL_PATH = "/api/v1/sql"
SNAPSHOT_PATH = "/api/v1/snapshot"
SCHEMA_PATH = "/api/v1/schema"
BASELINES_PATH = "/api/v1/baselines"


class TokenInfo(WireModel):
    """Who a bearer token is (``GET /api/v1/token``): the agent's first contact, before it measures anything, so a
    wrong token or a URL that is not a flopfleet collector costs one line instead of a run."""

    name: Label
    scopes: tuple[Slug, ...]


class RunAccepted(WireModel):
    """The answer to a posted run; ``duplicate`` when that exact run was stored before."""

    run_id: UUID
    status: Literal["created", "duplicate"]
    results: Count


class RunSummary(WireModel):
    run_id: UUID
    suite: Slug
    device: Literal["cuda", "cpu"]
    hostname: Label
    started_at: AwareDatetime
    received_at: AwareDatetime
    gpu_names: tuple[Label, ...]
    results: Count


class RunsPage(WireModel):
    data: tuple[RunSummary, ...]
    count: Count
    limit: Count
    offset: Count = Field(default=0)

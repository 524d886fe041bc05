"""Safe SQL over HTTP: one read-only statement, time-limited, row-capped, as JSON or CSV."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from schemas.api import SQL_PATH

from ...render.query import as_csv, plain
from ...store.errors import CollectorError
from ...store.sqlguard import MAX_SQL_CHARS, QueryResult
from ..auth import Reader
from .deps import MetricsDep, SettingsDep, StoreDep

router = APIRouter(prefix=SQL_PATH, tags=["sql"])
Format = Literal["json", "csv"]


class SqlRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sql: str = Field(min_length=1, max_length=MAX_SQL_CHARS, description="One SELECT statement")
    format: Format = "json"
    max_rows: int | None = Field(default=None, ge=1, description="At most the server's sql_max_rows")


class SqlAnswer(BaseModel):
    columns: list[str]
    rows: list[list[object]]
    row_count: int
    truncated: bool
    truncated_by: Literal["max_rows", "max_bytes"] | None = Field(default=None, description="Which cap cut it")
    elapsed_ms: float


def _answer(result: QueryResult, fmt: Format) -> Response:
    headers = {"X-Truncated": "true" if result.truncated else "false"}
    if result.truncated_by:
        headers["X-Truncated-By"] = result.truncated_by
    if fmt == "csv":
        return Response(as_csv(result), media_type="text/csv; charset=utf-8", headers=headers)
    body = SqlAnswer(
        columns=result.columns,
        rows=[[plain(v) for v in row] for row in result.rows],
        row_count=len(result.rows),
        truncated=result.truncated,
        truncated_by=result.truncated_by,
        elapsed_ms=round(result.elapsed_s * 1000, 2),
    )
    return Response(body.model_dump_json(), media_type="application/json", headers=headers)


async def _run(sql: str, fmt: Format, max_rows: int | None, store: StoreDep, settings: SettingsDep,
               metrics: MetricsDep) -> Response:  # fmt: skip
    cap = min(max_rows or settings.sql_max_rows, settings.sql_max_rows)
    try:
        result = await run_in_threadpool(store.sql, sql, max_rows=cap, timeout_s=settings.sql_timeout_s,
                                         max_bytes=settings.sql_max_bytes,
                                         max_memory=settings.sql_memory_bytes())  # fmt: skip
    except CollectorError as exc:
        metrics.sql.labels(outcome=exc.code).inc()
        raise
    metrics.sql.labels(outcome="truncated" if result.truncated else "ok").inc()
    return _answer(result, fmt)


@router.post("", response_model=SqlAnswer, responses={400: {"description": "Refused, failed or timed out"}})
async def post_sql(
    query: SqlRequest, _: Reader, store: StoreDep, settings: SettingsDep, metrics: MetricsDep
) -> Response:
    return await _run(query.sql, query.format, query.max_rows, store, settings, metrics)


@router.get("", response_model=SqlAnswer, responses={400: {"description": "Refused, failed or timed out"}})
async def get_sql(
    _: Reader,
    store: StoreDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    sql: Annotated[str, Query(min_length=1, max_length=MAX_SQL_CHARS)],
    format: Format = "json",
    max_rows: Annotated[int | None, Query(ge=1)] = None,
) -> Response:
    """The same as POST, for links: ``/api/v1/sql?sql=SELECT+*+FROM+cards&format=csv``."""
    return await _run(sql, format, max_rows, store, settings, metrics)

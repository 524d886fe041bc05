"""Commands that ask a running collector over HTTP instead of opening its database, which DuckDB lets one process
hold at a time: ``sql --collector`` and ``snapshot --collector``."""

from __future__ import annotations

from pathlib import Path

from schemas.api import SNAPSHOT_PATH, SQL_PATH

from ..store.errors import CollectorError
from ..store.sqlguard import QueryResult


def ask_sql(url: str, token: str | None, query: str, max_rows: int) -> QueryResult:
    """A query answered by a running collector's SQL API, as the store would answer it here."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        answer = httpx.post(url.rstrip("/") + SQL_PATH, json={"sql": query, "max_rows": max_rows}, headers=headers,
                            timeout=httpx.Timeout(30, read=3600))  # fmt: skip
    except httpx.HTTPError as exc:
        raise CollectorError(f"cannot reach the collector at {url}: {exc}") from None
    try:
        body = answer.json()
    except ValueError:
        body = None
    if answer.status_code != 200 or not isinstance(body, dict):
        said = body["error"]["message"] if isinstance(body, dict) and "error" in body else answer.text[:300]
        raise CollectorError(f"the collector answered {answer.status_code}: {said}")
    return QueryResult(body["columns"], [tuple(row) for row in body["rows"]], body["truncated"],
                       body["elapsed_ms"] / 1000, body["truncated_by"])  # fmt: skip


def download_snapshot(collector: str, token: str | None, output: Path) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.stream("GET", collector.rstrip("/") + SNAPSHOT_PATH, headers=headers, timeout=600) as answer:
        if answer.status_code != 200:
            answer.read()
            raise CollectorError(f"the collector answered {answer.status_code}: {answer.text[:300]}")
        with open(output, "wb") as fh:
            for chunk in answer.iter_bytes():
                fh.write(chunk)

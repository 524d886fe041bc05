"""Backups while the collector runs: a consistent snapshot of the database, streamed as a DuckDB file."""

from __future__ import annotations

import tempfile
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from schemas.api import SNAPSHOT_PATH, TOKEN_PATH, TokenInfo

from ..auth import Admin, Bearer
from .deps import StoreDep

router = APIRouter(tags=["operations"])


@router.get(TOKEN_PATH, responses={401: {"description": "No token, or not a valid one"}})
def token_info(token: Bearer) -> TokenInfo:
    """Who the bearer token is and what it may do: an agent asks before it measures, so that a wrong token or URL
    is found in a second, not after a whole run."""
    return token


@router.get(
    SNAPSHOT_PATH,
    response_class=FileResponse,
    responses={200: {"content": {"application/octet-stream": {}}, "description": "A DuckDB file"}},
)
async def snapshot(_: Admin, store: StoreDep) -> FileResponse:
    """Every table as of one moment, in a new DuckDB file (needs a token with the admin scope: it is all the data)."""
    folder = Path(tempfile.mkdtemp(prefix="flopfleet-snapshot-"))
    path = await run_in_threadpool(store.snapshot, folder / "flopfleet-snapshot.duckdb")

    def cleanup() -> None:
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()

    return FileResponse(
        path, filename=path.name, media_type="application/octet-stream", background=BackgroundTask(cleanup)
    )

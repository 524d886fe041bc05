"""Liveness."""

from __future__ import annotations

from fastapi import APIRouter

from .deps import StoreDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz(store: StoreDep) -> dict[str, str]:
    store.cursor().execute("SELECT 1").fetchone()
    return {"status": "ok"}

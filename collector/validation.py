"""Turning bytes into a run, the same way for HTTP and for ``ingest``: strict, with field paths in errors."""

from __future__ import annotations

from pydantic import ValidationError

from schemas import RunSubmission

from .errors import InvalidRun

MAX_LISTED = 5


def _loc(parts: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in parts) or "(body)"


def parse_run(body: bytes | str) -> RunSubmission:
    """A validated run, or InvalidRun whose message names each failing field's path (e.g. results.3.params.n)."""
    try:
        return RunSubmission.model_validate_json(body)
    except ValidationError as exc:
        details = [{"loc": _loc(e["loc"]), "message": e["msg"], "type": e["type"]} for e in exc.errors()]
        listed = "; ".join(f"{d['loc']}: {d['message']}" for d in details[:MAX_LISTED])
        more = f" (and {len(details) - MAX_LISTED} more)" if len(details) > MAX_LISTED else ""
        raise InvalidRun(f"invalid run: {listed}{more}", details) from None

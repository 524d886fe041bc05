"""Turning bytes into a run, the same way for HTTP and for ``ingest``: strict, with field paths in errors.

Strict for a run of this collector's contract or an older one; a run of a newer minor is read as far as this
collector knows it (``newer``: what it did not know is said on the run); a run of a major it does not read is
refused with its own error (``UnsupportedVersion``), naming the versions it reads (docs/contract.md).

The clock rule: a run that says it started or finished more than ``MAX_AHEAD`` after the collector's clock, or
started before ``EARLIEST`` (a machine whose clock was never set says 1970), is refused (422, naming the field and
the agent's clock as the cause): stored, it would be a GPU's "latest" run for years, hide it from the "no run for 6 h"
alert and push every real run off the home page. Its agent keeps it in the spool, and the reason with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from pydantic import ValidationError
from pydantic_core import ErrorDetails, from_json

from schemas import RunSubmission
from schemas.contract import THIS, majors_text, run_version
from schemas.run import ACCEPTED_SCHEMA_VERSIONS, UNREAD_MAJOR

from ..store.errors import InvalidRun, UnsupportedVersion
from .newer import understood

MAX_LISTED = 5
#: The clock rule: how far a run's start or end may be ahead of the collector's clock (clocks a little apart)...
MAX_AHEAD = timedelta(hours=1)
#: ... and the earliest start taken (before flopfleet, and before the GPUs it knows).
EARLIEST = datetime(2020, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Parsed:
    """A run as this collector reads it. For a run of a newer minor: ``document``, the JSON the store reads its rows
    from (the body less what this collector cannot read), and what it did not understand."""

    run: RunSubmission
    document: bytes | None = None
    not_understood: tuple[str, ...] = ()


def _loc(parts: Sequence[int | str], kept: Sequence[int] | None = None) -> str:
    """A field's dotted path; ``kept``: the run as sent had results left out (``newer``), so a result is named by its
    place in the run as sent."""
    if kept is not None and len(parts) >= 2 and parts[0] == "results" and isinstance(parts[1], int):
        parts = ("results", kept[parts[1]], *parts[2:])
    return ".".join(str(p) for p in parts) or "(body)"


def _invalid(errors: list[ErrorDetails], kept: Sequence[int] | None = None) -> InvalidRun:
    details = [{"loc": _loc(e["loc"], kept), "message": e["msg"], "type": e["type"]} for e in errors]
    listed = "; ".join(f"{d['loc']}: {d['message']}" for d in details[:MAX_LISTED])
    more = f" (and {len(details) - MAX_LISTED} more)" if len(details) > MAX_LISTED else ""
    return InvalidRun(f"invalid run: {listed}{more}", details)


def clock_problem(run: RunSubmission, now: datetime | None = None) -> InvalidRun | None:
    """The clock rule (see the module's docstring): why ``run``'s times cannot be taken, or None."""
    now = now or datetime.now(timezone.utc)
    for field, when in (("started_at", run.started_at), ("finished_at", run.finished_at)):
        if when > now + MAX_AHEAD:
            why = (f"{when:%Y-%m-%d %H:%M} UTC is {_ahead(when - now)} after the collector's clock: the agent's clock "
                   "is wrong (set it, e.g. with NTP); the run stays in its spool")  # fmt: skip
            return InvalidRun(f"invalid run: {field}: {why}", [{"loc": field, "message": why, "type": "clock_ahead"}])
    if run.started_at < EARLIEST:
        why = (f"{run.started_at:%Y-%m-%d %H:%M} UTC is before {EARLIEST:%Y-%m-%d}: the agent's clock was never set "
               "(set it, e.g. with NTP); the run stays in its spool")  # fmt: skip
        return InvalidRun(f"invalid run: started_at: {why}", [{"loc": "started_at", "message": why,
                                                              "type": "clock_unset"}])  # fmt: skip
    return None


def _ahead(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours:,.1f} hours" if hours < 48 else f"{hours / 24:,.0f} days"


def parse_run(body: bytes | str, *, now: datetime | None = None) -> RunSubmission:
    """A validated run (of a newer minor: what this collector knows of it), or InvalidRun whose message names each
    failing field's path (e.g. results.3.params.n); the clock rule applies at ``now``."""
    return read_run(body, now=now).run


def read_run(body: bytes | str, *, now: datetime | None = None) -> Parsed:
    """``parse_run``, with what a run of a newer minor carried that this collector does not know."""
    try:
        parsed = Parsed(RunSubmission.model_validate_json(body))
    except ValidationError as exc:
        parsed = _tolerated(body, exc.errors())
    problem = clock_problem(parsed.run, now)
    if problem is not None:
        raise problem
    return parsed


def _tolerated(body: bytes | str, errors: list[ErrorDetails]) -> Parsed:
    """A run that failed strict validation: refused, unless it is of a newer minor and what failed is what a newer
    minor may add (``newer``)."""
    unread = [e for e in errors if e["type"] == UNREAD_MAJOR]
    if unread:
        said = unread[0]["input"]
        fix = "upgrade the collector" if said > THIS.major else "send it to a collector that reads it"
        why = (f"this run is contract {said}.x and this collector reads contract "
               f"{majors_text(ACCEPTED_SCHEMA_VERSIONS)} (it is {THIS}): {fix}")  # fmt: skip
        raise UnsupportedVersion(f"invalid run: schema_version: {unread[0]['msg']}: {why}",
                                 [{"loc": "schema_version", "message": why, "type": UNREAD_MAJOR}])  # fmt: skip
    try:
        data = from_json(body)
    except ValueError:
        data = None
    version = run_version(data) if isinstance(data, dict) else None
    if version is None or version <= THIS:
        raise _invalid(errors)
    found = understood(data, errors, _invalid)
    return Parsed(found.run, found.document, found.not_understood)

"""Turning bytes into a run, the same way for HTTP and for ``ingest``: strict, with field paths in errors.

The clock rule: a run that says it started or finished more than ``MAX_AHEAD`` after the collector's clock, or
started before ``EARLIEST`` (a machine whose clock was never set says 1970), is refused (422, naming the field and
the agent's clock as the cause): stored, it would be a GPU's "latest" run for years, hide it from the "no run for 6 h"
alert and push every real run off the home page. Its agent keeps it in the spool, and the reason with it.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pydantic import ValidationError

from schemas import RunSubmission

from ..store.errors import InvalidRun

MAX_LISTED = 5
#: The clock rule: how far a run's start or end may be ahead of the collector's clock (clocks a little apart)...
MAX_AHEAD = timedelta(hours=1)
#: ... and the earliest start taken (before flopfleet, and before the GPUs it knows).
EARLIEST = datetime(2020, 1, 1, tzinfo=timezone.utc)


def _loc(parts: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in parts) or "(body)"


def _invalid(exc: ValidationError) -> InvalidRun:
    details = [{"loc": _loc(e["loc"]), "message": e["msg"], "type": e["type"]} for e in exc.errors()]
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
    """A validated run, or InvalidRun whose message names each failing field's path (e.g. results.3.params.n);
    the clock rule applies at ``now``."""
    try:
        run = RunSubmission.model_validate_json(body)
    except ValidationError as exc:
        raise _invalid(exc) from None
    problem = clock_problem(run, now)
    if problem is not None:
        raise problem
    return run

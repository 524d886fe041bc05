"""This fleet's healthy runs as a baseline bundle (``baseline export``, ``GET /api/v1/baselines/export``): the
export's view, apart from the pages'."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timezone

from schemas.baselines import BaselineBundle, BaselineSource, seal
from schemas.verdicts import Level

from ..analysis import baselines
from ..store.errors import NotFound
from ..store.reads import Reads
from .views import fleet_health


@dataclass(frozen=True)
class BaselineExport:
    """A baseline exported from this fleet, and what was left out of it and why."""

    bundle: BaselineBundle
    left_out: list[str]


def export_baseline(
    reads: Reads,
    *,
    name: str,
    collector: str,
    model: str | None = None,
    since: date | None = None,
    tags: dict[str, str] | None = None,
    suite: str | None = None,
    min_runs: int = baselines.MIN_RUNS,
) -> BaselineExport:
    """This fleet's healthy runs as a baseline per card and suite: GPUs judged slow, faulty or suspect now are left
    out, and so are runs beside another process, under a slowdown or with flagged results (``baselines``)."""
    unhealthy = {v.device for v in fleet_health(reads) if v.level in (Level.slow, Level.faulty, Level.suspect)}
    rows = reads.baseline_measurements(model, since, tags, suite)
    cards, left_out = baselines.build(baselines.measurements(rows, unhealthy), min_runs=min_runs)
    if unhealthy:
        left_out.insert(0, f"{len(unhealthy)} GPU{'s' if len(unhealthy) != 1 else ''} judged slow, faulty or "
                           "suspect now: none of their runs")  # fmt: skip
    filters = {k: v for k, v in (("model", model), ("since", since and since.isoformat()), ("suite", suite)) if v}
    filters |= {f"tag:{k}": v for k, v in (tags or {}).items()}
    if not cards:
        why = "; ".join(left_out) or "no healthy runs of agent-measured GPUs match"
        raise NotFound(f"nothing to export: {why}")
    source = BaselineSource(collector=collector, exported_at=datetime.now(timezone.utc), filters=filters)
    return BaselineExport(seal(name, source, cards), left_out)

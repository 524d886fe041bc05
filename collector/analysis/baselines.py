"""Baselines from a fleet's healthy runs (pure functions over the rows ``Reads.baseline_measurements`` returns).

Each GPU counts once, however many runs it has: a baseline's value is the median over GPUs of each GPU's median,
its spreads the MAD between those medians and the median of each GPU's own run-to-run MAD, all relative to the
value. Only healthy measurements go in: GPUs whose verdict is slow, faulty or suspect are left out (``unhealthy``),
and so are runs measured beside another process, under a thermal or hardware slowdown, or with results flagged as
wrong or above the datasheet (the query leaves those out). A card's figure measured by fewer than ``MIN_RUNS``
healthy runs is refused, with the reason.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date

from schemas.baselines import BaselineBundle, BaselineFigure, CardBaseline, parse_bundle, software_of
from schemas.verdicts import SPREAD_MIN_RUNS

from ..store.errors import BadRequest
from ..store.figures import BY_KEY

#: Healthy runs a card's figure needs before it is exported: fewer say too little about a model.
MIN_RUNS = 3


@dataclass(frozen=True)
class Measurement:
    """One healthy value of one figure of one GPU in one run."""

    card: str
    gpu_name: str
    suite: str
    device: str
    figure: str
    value: float
    day: date
    software: Mapping[str, str | None]  # driver, cuda, torch, transformers


def _mad(values: Sequence[float], mid: float) -> float:
    return statistics.median(abs(v - mid) for v in values)


def _figure(key: str, by_device: dict[str, list[Measurement]]) -> BaselineFigure:
    medians = [statistics.median(m.value for m in ms) for ms in by_device.values()]
    value = statistics.median(medians)
    within = [
        _mad(vals, mid) / mid
        for ms in by_device.values()
        if len(vals := [m.value for m in ms]) >= SPREAD_MIN_RUNS and (mid := statistics.median(vals)) > 0
    ]
    days = [m.day for ms in by_device.values() for m in ms]
    return BaselineFigure(
        figure=key,
        unit=BY_KEY[key].unit if key in BY_KEY else "",
        value=value,
        low=min(medians),
        high=max(medians),
        between_gpus=_mad(medians, value) / value if len(medians) >= 2 and value > 0 else None,
        within_gpu=statistics.median(within) if within else None,
        gpus=len(medians),
        runs=sum(len(ms) for ms in by_device.values()),
        first=min(days),
        last=max(days),
    )


def build(measurements: Iterable[Measurement], *, min_runs: int = MIN_RUNS) -> tuple[list[CardBaseline], list[str]]:
    """One baseline per card and suite from healthy measurements, and what was left out and why (a figure with too
    few runs; a card left with none)."""
    groups: dict[tuple[str, str], dict[str, dict[str, list[Measurement]]]] = {}
    names: dict[str, str] = {}
    for m in measurements:
        groups.setdefault((m.card, m.suite), {}).setdefault(m.figure, {}).setdefault(m.device, []).append(m)
        names[m.card] = m.gpu_name
    cards, refused = [], []
    for (card, suite), figures in sorted(groups.items()):
        kept = []
        for key, by_device in sorted(figures.items()):
            runs = sum(len(ms) for ms in by_device.values())
            if runs < min_runs:
                gpus = len(by_device)
                refused.append(f"{card}, {suite} suite, {key}: {runs} healthy run{'s' if runs != 1 else ''} of "
                               f"{gpus} GPU{'s' if gpus != 1 else ''}, at least {min_runs} needed")  # fmt: skip
                continue
            kept.append(_figure(key, by_device))
        if not kept:
            refused.append(f"{card}, {suite} suite: no figure with enough healthy runs; nothing exported for it")
            continue
        software = software_of(m.software for by_device in figures.values() for ms in by_device.values() for m in ms)
        cards.append(CardBaseline(card=card, gpu_name=names[card], kind="measured", suite=suite,
                                  figures=tuple(kept), software=software))  # fmt: skip
    return cards, refused


def measurements(rows: Iterable[Mapping[str, object]], unhealthy: set[str]) -> list[Measurement]:
    """``Reads.baseline_measurements``' rows as measurements, leaving out the GPUs in ``unhealthy``."""
    out = []
    for r in rows:
        if str(r["device_id"]) in unhealthy:
            continue
        started = r["started_at"]
        day = started.date() if hasattr(started, "date") else date.fromisoformat(str(started)[:10])
        software = {k: (str(r[k]) if r[k] is not None else None) for k in ("driver", "cuda", "torch", "transformers")}
        out.append(Measurement(str(r["card"]), str(r["gpu_name"]), str(r["suite"]), str(r["device_id"]),
                               str(r["figure"]), float(str(r["value"])), day, software))  # fmt: skip
    return out


def load_all(rows: Iterable[tuple[str, str]]) -> list[tuple[BaselineBundle, str]]:
    """The bundles of (bundle JSON, origin) rows, as ``Reads.baselines`` returns them."""
    return [(parse_bundle(text), origin) for text, origin in rows]


def parse_tags(items: Iterable[str]) -> dict[str, str]:
    """``key=value`` filters (``baseline export --tag``, ``?tag=``) as a dict; BadRequest naming a bad one."""
    tags = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadRequest(f"tag wants key=value, got {item!r}")
        tags[key] = value
    return tags

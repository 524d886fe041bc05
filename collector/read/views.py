"""One function per view (home, cards, card, GPU, run, compare, health, machines, report, SQL catalog): the named
queries it reads (``store.reads``), the analysis over their rows, and the data every format renders (HTML,
Markdown, CSV, JSON). Renderers take what these return and never see the database.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from typing import Any

from schemas import RunSubmission
from schemas.baselines import BaselineBundle, BaselineIndex, BaselineSource, baseline_threshold, seal
from schemas.judgement import GpuJudgement
from schemas.verdicts import MAX_THRESHOLD, SPREAD_SIGMAS, Level, minimum_threshold

from ..analysis import baselines, compare, machines, regressions
from ..analysis.charts import CHARTS, SPREAD_FIGURE, Charts
from ..analysis.compare import PEAK_CATEGORIES, Comparison
from ..analysis.health import FleetMetrics
from ..analysis.machines import MultiGpuMachine
from ..analysis.parse import parse_run
from ..analysis.regressions import Change
from ..store import sqlviews
from ..store.errors import NotFound
from ..store.figures import BY_KEY
from ..store.reads import Reads
from . import verdicts


@dataclass(frozen=True)
class Home:
    cards: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    total_runs: int
    slow: int  # slow or faulty
    suspect: int
    verdicts: int


@dataclass(frozen=True)
class BaselineBand:
    """One figure of a card's baseline as pages show it: the value, the band a healthy GPU measures within (down to
    the threshold), what it stands on and where it comes from."""

    figure: str
    label: str
    unit: str
    suite: str
    value: float
    floor: float  # value * (1 - threshold): below this a GPU fails the baseline
    threshold: float
    low: float | None
    high: float | None
    gpus: int
    runs: int
    period: str
    source: str  # the bundle's name, origin and id


@dataclass(frozen=True)
class CardView:
    card: str
    cmp: Comparison
    verdicts: list[GpuJudgement]
    changes: list[Change]
    charts: Charts
    baselines: list[BaselineBand] = field(default_factory=list)


@dataclass(frozen=True)
class GpuView:
    device: str
    history: list[dict[str, Any]]
    verdict: GpuJudgement | None


@dataclass(frozen=True)
class CompareView:
    choices: list[str]
    chosen: list[str]
    cmp: Comparison | None
    message: str | None
    charts: Charts | None


@dataclass(frozen=True)
class Report:
    cmp: Comparison
    verdicts: list[GpuJudgement]
    changes: list[Change]
    machines: list[MultiGpuMachine]
    charts: Charts | None
    runs: list[dict[str, Any]]
    starved: tuple[int, int] = (0, 0)  # (results, runs) flagged starved: left out of every figure and verdict


MOST_COMPARED = 4


def measurements(reads: Reads, cards: list[str] | None = None) -> compare.Measurements:
    return compare.Measurements(
        cards=reads.cards(cards),
        references=reads.reference_cards(),
        cells=reads.cells(cards),
        published=reads.reference_values(),
        prices=reads.prices(),
        runs=reads.run_count(),
    )


def comparison(
    reads: Reads, cards: list[str] | None = None, prices: dict[str, float] | None = None, *, baselines: bool = False
) -> Comparison:
    """The cross-card table of every card, or of ``cards`` (measured or published); ``baselines``: each measured
    card's baseline as a column beside it."""
    measured = [c for c in cards if not c.endswith(compare.PUBLISHED)] if cards else None
    data = measurements(reads, measured)
    by_card = {}
    if baselines:
        index = baseline_index(reads)
        by_card = {c["card"]: index.entries(c["card"]) for c in data.cards}
    return compare.comparison(data, cards, prices, by_card)


def charts(reads: Reads, cmp: Comparison, only: tuple[str, ...] = CHARTS, *, machines_too: bool = False) -> Charts:
    """The data of the charts in ``only`` for the measured cards of ``cmp``."""
    cards = [c.label for c in cmp.cards if c.measured] or None
    peak_figures = [figure for _, figure in PEAK_CATEGORIES]
    return Charts(
        cmp=cmp,
        only=only,
        matmul=compare.matmul_series(reads.points("matmul", cards)) if "matmul" in only else {},
        layers=compare.series(reads.points("layer", cards)) if "layers" in only else {},
        bandwidth=compare.series(reads.points("bandwidth", cards)) if "bandwidth" in only else {},
        decode=compare.series(reads.points("decode", cards)) if "decode" in only else {},
        peak=compare.peak_fractions(reads.peak_fractions(peak_figures, cards)) if "peak" in only else {},
        spread=compare.spread(reads.device_values(SPREAD_FIGURE, cards)) if "spread" in only else {},
        busbw=machines.busbw_series(reads.machine_points()) if machines_too else {},
    )


_BASELINES_LOCK = threading.Lock()
_BASELINES: dict[tuple[tuple[str, str], ...], BaselineIndex] = {}


def baseline_index(reads: Reads) -> BaselineIndex:
    """The stored baselines (bundled and imported) as verdicts use them, parsed once per set of baselines."""
    stored = [(str(text), str(origin)) for text, origin in reads.baselines()]
    key = tuple((hashlib.sha256(text.encode()).hexdigest(), origin) for text, origin in stored)
    with _BASELINES_LOCK:
        if key in _BASELINES:
            return _BASELINES[key]
    index = BaselineIndex(baselines.load_all(stored))
    with _BASELINES_LOCK:
        _BASELINES.clear()
        _BASELINES[key] = index
    return index


def fleet_health(reads: Reads, model: str | None = None) -> list[GpuJudgement]:
    """Every GPU's verdict (of one model, or all), worst first: kept between refreshes (``read.verdicts``)."""
    found = verdicts.kept(reads, baseline_index(reads)).verdicts()
    return found if model is None else [v for v in found if v.gpu_model == model]


def gpu_verdicts(reads: Reads, uuids: list[str] | None = None, host: str | None = None) -> list[GpuJudgement]:
    """The verdicts of the GPUs named by UUID, or of one host's GPUs (``check --from-collector``), worst first."""
    wanted = set(uuids or ())
    return [v for v in fleet_health(reads) if v.device in wanted or (host is not None and v.hostname == host)]


def version_changes(reads: Reads, model: str | None = None) -> list[Change]:
    return regressions.regressions(reads.version_figures(regressions.FIGURE_KEYS, model))


def home(reads: Reads) -> Home:
    verdicts = fleet_health(reads)
    return Home(cards=reads.cards(), runs=reads.recent_runs(15), total_runs=reads.run_count(),
                slow=sum(v.level in (Level.slow, Level.faulty) for v in verdicts),
                suspect=sum(v.level is Level.suspect for v in verdicts), verdicts=len(verdicts))  # fmt: skip


def card(reads: Reads, name: str) -> CardView:
    model = reads.card_model(name)
    if model is None:
        raise NotFound(f"no card {name!r}; see /cards")
    cmp = comparison(reads, [name])
    return CardView(
        card=name,
        cmp=cmp,
        verdicts=[v for v in fleet_health(reads, model) if v.card == name],
        changes=version_changes(reads, model),
        charts=charts(reads, cmp, ("matmul", "layers")),
        baselines=baseline_bands(baseline_index(reads), name),
    )


def baseline_bands(index: BaselineIndex, card: str) -> list[BaselineBand]:
    """The card's baseline, figure by figure (health suite first), with the threshold verdicts hold it to."""
    bands = []
    for e in sorted(index.entries(card), key=lambda e: (e.suite != "health", e.suite, e.figure.figure)):
        f = e.figure
        threshold = baseline_threshold(f, minimum=minimum_threshold(f.figure), maximum=MAX_THRESHOLD,
                                       sigmas=SPREAD_SIGMAS)  # fmt: skip
        label = BY_KEY[f.figure].label if f.figure in BY_KEY else f.figure
        source = f"{e.bundle} ({e.origin}, {e.bundle_id})"
        bands.append(BaselineBand(f.figure, label, f.unit, e.suite, f.value, f.value * (1 - threshold), threshold,
                                  f.low, f.high, f.gpus, f.runs, e.period, source))  # fmt: skip
    return bands


def gpu(reads: Reads, device: str) -> GpuView:
    history = reads.gpu_history(device)
    if not history:
        raise NotFound(f"no GPU {device!r}")
    verdict = next((v for v in fleet_health(reads, history[0]["gpu_model"]) if v.device == device), None)
    return GpuView(device, history, verdict)


@dataclass(frozen=True)
class Queryable:
    """A view (or a table under the views) as the SQL page lists it: what a row is, and its columns."""

    name: str
    about: str
    columns: list[tuple[str, str]]  # (name, DuckDB type)


def sql_catalog(reads: Reads) -> list[Queryable]:
    """Every view SQL users query, with its columns, then the raw tables under them."""
    about = sqlviews.ABOUT | sqlviews.UNDER
    columns = reads.columns(list(about))
    return [Queryable(name, text, columns[name]) for name, text in about.items()]


def run(payload: str) -> RunSubmission:
    """A stored run as the agent sent it (``Store.run_payload``)."""
    return parse_run(payload)


def card_names(reads: Reads) -> list[str]:
    """Measured cards, then published ones."""
    return [r["card"] for r in reads.cards()] + [card + compare.PUBLISHED for card, _ in reads.reference_cards()]


def refusal(reads: Reads, cards: list[str], fewest: int) -> str | None:
    """Why these cards cannot be compared (too few, too many, unknown), or None."""
    if not fewest <= len(cards) <= MOST_COMPARED:
        return f"choose {fewest} to {MOST_COMPARED} cards to compare (?cards=A&cards=B); {len(cards)} chosen"
    known = set(card_names(reads))
    unknown = [c for c in cards if c not in known]
    if unknown:
        return f"unknown card(s): {', '.join(map(repr, unknown))}; the known ones are listed at /cards"
    return None


def compare_cards(reads: Reads, chosen: list[str]) -> CompareView:
    choices = card_names(reads)
    if not chosen:
        return CompareView(choices, chosen, None, None, None)
    message = refusal(reads, chosen, fewest=2)
    if message:
        return CompareView(choices, chosen, None, message, None)
    cmp = comparison(reads, chosen)
    measured = any(not c.published for c in cmp.cards)
    return CompareView(choices, chosen, cmp, None, charts(reads, cmp, ("matmul",)) if measured else None)


def fleet_metrics(reads: Reads) -> FleetMetrics:
    return verdicts.kept(reads, baseline_index(reads)).metrics()


def multi_gpu_machines(reads: Reads) -> list[MultiGpuMachine]:
    """Machines with several GPUs: links, all-reduce bus bandwidth, data-parallel scaling (latest runs)."""
    return machines.multi_gpu_machines(reads.machines())


def report(
    reads: Reads, *, prices: dict[str, float] | None = None, with_charts: bool = True, baselines: bool = False
) -> Report:
    """Everything the report shows; ``with_charts``: the chart data and the recent runs (the HTML report);
    ``baselines``: each card's baseline as a column beside it."""
    cmp = comparison(reads, prices=prices, baselines=baselines)
    multi = multi_gpu_machines(reads)
    return Report(
        cmp=cmp,
        verdicts=fleet_health(reads),
        changes=version_changes(reads),
        machines=multi,
        charts=charts(reads, cmp, machines_too=bool(multi)) if with_charts else None,
        runs=reads.recent_runs(50) if with_charts else [],
        starved=reads.starved_results(),
    )


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

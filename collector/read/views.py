"""One function per view (home, cards, card, GPU, run, compare, health, machines, report, SQL catalog): the named
queries it reads (``store.reads``), the analysis over their rows, and the data every format renders (HTML,
Markdown, CSV, JSON). Renderers take what these return and never see the database.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any

from schemas import RunSubmission
from schemas.baselines import BaselineIndex
from schemas.judgement import GpuJudgement
from schemas.verdicts import Level, baseline_margin

from .. import __version__
from ..analysis import baselines, compare, machines, regressions
from ..analysis.charts import CHARTS, SPREAD_FIGURE, Charts
from ..analysis.compare import PEAK_CATEGORIES, Comparison
from ..analysis.fleet import PAGE, Filter, Summary
from ..analysis.health import FleetMetrics
from ..analysis.machines import MultiGpuMachine
from ..analysis.parse import parse_run
from ..analysis.regressions import Change
from ..store import DB_VERSION, sqlviews
from ..store.errors import NotFound
from ..store.figures import BY_KEY
from ..store.reads import Reads
from . import verdicts
from .health_views import HealthView, glance, health_view, report_health


@dataclass(frozen=True)
class Home:
    cards: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    total_runs: int
    slow: int  # slow or faulty
    suspect: int
    verdicts: int
    summary: Summary | None = None  # each card's GPUs by level, where the fleet is larger than a page


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
    health: HealthView | None = None  # its GPUs as the page lists them (whole, or summarised and paged)


@dataclass(frozen=True)
class GpuView:
    device: str
    history: list[dict[str, Any]]  # one page of its runs, newest first
    verdict: GpuJudgement | None
    runs: int = 0  # every run of it kept
    page: int = 1
    pages: int = 1


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
    summary: Summary | None = None  # the fleet at a glance, where it is larger than a page
    listed: list[GpuJudgement] = field(default_factory=list)  # the verdicts listed: all, or those that need action


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
    reads: Reads,
    cards: list[str] | None = None,
    prices: dict[str, float] | None = None,
    *,
    baselines: bool = False,
    unmeasured: bool = True,
) -> Comparison:
    """The cross-card table of every card, or of ``cards`` (measured or published); ``baselines``: each measured
    card's baseline as a column beside it; ``unmeasured``: the baselines of cards not measured here beside them."""
    measured = [c for c in cards if not c.endswith(compare.PUBLISHED)] if cards else None
    data = measurements(reads, measured)
    index = baseline_index(reads)
    here = {c["card"] for c in data.cards}
    by_card = {card: index.entries(card) for card in here} if baselines else {}
    # The baselines of cards this collector has not measured, always: one card is seen beside flopfleet's measured
    # ones (their columns are labelled as baselines, as published ones are).
    beside = {card: index.entries(card) for card in index.cards() - here} if unmeasured else {}
    return compare.comparison(data, cards, prices, by_card, beside)


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


def _stored_baselines(reads: Reads) -> tuple[list[tuple[str, str]], tuple[tuple[str, str], ...]]:
    """The stored baselines (bundle, origin), and what tells one set of them from another (their hashes)."""
    stored = [(str(text), str(origin)) for text, origin in reads.baselines()]
    return stored, tuple((hashlib.sha256(text.encode()).hexdigest(), origin) for text, origin in stored)


def baseline_index(reads: Reads) -> BaselineIndex:
    """The stored baselines (bundled and imported) as verdicts use them, parsed once per set of baselines."""
    stored, key = _stored_baselines(reads)
    with _BASELINES_LOCK:
        if key in _BASELINES:
            return _BASELINES[key]
    index = BaselineIndex(baselines.load_all(stored))
    with _BASELINES_LOCK:
        _BASELINES.clear()
        _BASELINES[key] = index
    return index


def judged_from(reads: Reads) -> str:
    """What the fleet's verdicts, and so each GPU's series on ``/metrics``, are judged from: this collector's version
    and layout, the baselines held, how far the summaries go. Where it is the same, so are they (a collector answers
    its first scrapes with what the last one on the file kept as it stopped: ``web.metrics.KeptLines``)."""
    commit, device_runs = reads.summaries_extent()
    baselines = hashlib.sha256(repr(_stored_baselines(reads)[1]).encode()).hexdigest()[:16]
    return f"collector {__version__}, db_version {DB_VERSION}, baselines {baselines}, to commit {commit}, " \
           f"{device_runs} device runs"  # fmt: skip


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
                suspect=sum(v.level is Level.suspect for v in verdicts), verdicts=len(verdicts),
                summary=glance(verdicts, verdicts_key(reads)).summary if len(verdicts) > PAGE else None)  # fmt: skip


def verdicts_key(reads: Reads, scope: str | None = None) -> object:
    """What the verdicts of ``scope`` (a model, a card; None: the fleet) were judged from: equal keys, equal verdicts
    (None: not known, nothing kept)."""
    return None if reads.generation is None else (reads.generation, scope, id(baseline_index(reads)))


def fleet_health_page(reads: Reads, chosen: Filter, page: int = 1) -> HealthView:
    """``/health``: the fleet's verdicts, whole or summarised and paged (``health_views``)."""
    return health_view(fleet_health(reads), chosen, page, key=verdicts_key(reads))


def card(reads: Reads, name: str, chosen: Filter | None = None, page: int = 1) -> CardView:
    """A card's comparison, GPUs (``chosen``: of a host and a level, a page at a time), baseline and versions."""
    model = reads.card_model(name)
    if model is None:
        raise NotFound(f"no card {name!r}; see /cards")
    cmp = comparison(reads, [name], unmeasured=False)  # a card's page is that card's
    verdicts = [v for v in fleet_health(reads, model) if v.card == name]
    return CardView(
        card=name,
        cmp=cmp,
        verdicts=verdicts,
        changes=version_changes(reads, model),
        charts=charts(reads, cmp, ("matmul", "layers")),
        baselines=baseline_bands(baseline_index(reads), name),
        health=health_view(verdicts, chosen or Filter(), page, key=verdicts_key(reads, f"card {name}")),
    )


def baseline_bands(index: BaselineIndex, card: str) -> list[BaselineBand]:
    """The card's baseline, figure by figure (health suite first), with the threshold verdicts hold it to."""
    bands = []
    for e in sorted(index.entries(card), key=lambda e: (e.suite != "health", e.suite, e.figure.figure)):
        f = e.figure
        threshold = baseline_margin(f)
        label = BY_KEY[f.figure].label if f.figure in BY_KEY else f.figure
        source = f"{e.bundle} ({e.origin}, {e.bundle_id})"
        bands.append(BaselineBand(f.figure, label, f.unit, e.suite, f.value, f.value * (1 - threshold), threshold,
                                  f.low, f.high, f.gpus, f.runs, e.period, source))  # fmt: skip
    return bands


def gpu(reads: Reads, device: str, page: int = 1) -> GpuView:
    """A GPU's verdict and its runs, newest first, a page at a time (its cost follows the page, not the runs)."""
    runs = reads.gpu_runs(device)
    if not runs:
        raise NotFound(f"no GPU {device!r}")
    pages = -(-runs // PAGE)
    page = min(max(1, page), pages)
    history = reads.gpu_history(device, PAGE, (page - 1) * PAGE)
    verdict = next((v for v in fleet_health(reads, history[0]["gpu_model"]) if v.device == device), None)
    return GpuView(device, history, verdict, runs, page, pages)


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
    message = refusal(reads, chosen, fewest=1)  # one card is compared with the baselines of others
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
    verdicts = fleet_health(reads)
    summary, listed = report_health(verdicts, verdicts_key(reads))
    return Report(
        cmp=cmp,
        verdicts=verdicts,
        changes=version_changes(reads),
        machines=multi,
        charts=charts(reads, cmp, machines_too=bool(multi)) if with_charts else None,
        runs=reads.recent_runs(50) if with_charts else [],
        starved=reads.starved_results(),
        summary=summary,
        listed=listed,
    )

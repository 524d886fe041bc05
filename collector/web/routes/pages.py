"""Server-rendered pages: no build step, nothing from a CDN, state in the URL so every view is a shareable link."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.convertors import Convertor, register_url_convertor

from schemas import GpuCounters, TimingStats
from schemas.contract import THIS
from schemas.labels import HOSTNAME, describe, headline, per_watt
from schemas.verdicts import Level

from ...analysis import health
from ...analysis.compare import Comparison
from ...analysis.fleet import Filter
from ...read import views
from ...render.charts import chart_sections
from ...render.csvsafe import write_csv
from ...render.fleet import spread_charts
from ...render.numbers import number
from ...render.pages import render
from ...store.errors import BadRequest, CollectorError
from ...store.figures import BY_KEY
from ...store.queries import EXAMPLES
from ...store.sqlviews import EVERY_RESULT, FIGURE_VIEWS, TRUSTED_WORDS, UNDER
from ..auth import Reader
from .deps import SettingsDep, StoreDep


class NameConvertor(Convertor[str]):
    """A card name or GPU id in a path, any character included: ``path``'s ``.*`` stops at a newline (a 404)."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


# Starlette looks convertors up by name when a route is declared, so this must run before the routes below.
register_url_convertor("name", NameConvertor())
router = APIRouter(tags=["pages"], include_in_schema=False)
CardsParam = Annotated[list[str] | None, Query()]
#: A GPU list's filter and page (``analysis.fleet.Filter``), in the URL so that every page is a link.
HostParam = Annotated[str, Query(max_length=256, description="Part of a hostname or GPU UUID, any case.")]
CardParam = Annotated[str, Query(max_length=512, description="One card, as the cards page names it.")]
LevelParam = Annotated[Level | None, Query(description="One level: ok, suspect, slow, faulty or unknown.")]
PageParam = Annotated[int, Query(ge=1, le=1_000_000, description="The page of the list, from 1.")]
#: The cards page's columns: (the figure's label and unit, as the comparison table's row says them; figure).
KEY_COLUMNS = tuple(
    (f"{BY_KEY[key].label} ({BY_KEY[key].unit})", key)
    for key in ("matmul_bf16", "matmul_fp16", "bert_fwdbwd", "bw_copy", "train_gpt2_tokens")
)


def _page(template: str, **context: object) -> HTMLResponse:
    return HTMLResponse(render(template, **context))


def _csv(header: list[str], rows: list[list[object]], name: str) -> Response:
    return Response(write_csv(header, rows), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": f'inline; filename="{name}"'})  # fmt: skip


def _selected(cards: list[str] | None) -> list[str]:
    """``?cards=a&cards=b``, each card once, in the order given."""
    return list(dict.fromkeys(c.strip() for c in cards or [] if c.strip()))


@router.get("/", response_class=HTMLResponse)
def home(_: Reader, store: StoreDep) -> HTMLResponse:
    data = views.home(store.reads())
    return _page("home.html", cards=data.cards, runs=data.runs, total_runs=data.total_runs, slow=data.slow,
                 suspect=data.suspect, verdicts=data.verdicts, summary=data.summary)  # fmt: skip


@router.get("/cards", response_class=HTMLResponse)
def cards_page(_: Reader, store: StoreDep) -> HTMLResponse:
    cmp = views.comparison(store.reads(), unmeasured=False)  # the cards measured here, as SQL has them
    return _page("cards.html", cmp=cmp, columns=KEY_COLUMNS, index_of={c.label: i for i, c in enumerate(cmp.cards)},
                 trusted_words=TRUSTED_WORDS)  # fmt: skip


@router.get("/cards.csv")
def cards_csv(_: Reader, store: StoreDep) -> Response:
    return _comparison_csv(views.comparison(store.reads(), unmeasured=False), "cards.csv")


def _comparison_csv(cmp: Comparison, name: str) -> Response:
    rows: list[list[object]] = [["devices / runs", *("published" if c.published else f"{c.devices}/{c.runs}"
                                                     for c in cmp.cards)]]  # fmt: skip
    for row in cmp.rows:
        rows.append([f"{row.label} ({row.unit})", *(round(c.median, 6) if c else "" for c in row.cells)])
    return _csv(["", *(c.label for c in cmp.cards)], rows, name)


@router.get("/cards/{card:name}", response_class=HTMLResponse)
def card_page(
    card: str, _: Reader, store: StoreDep, host: HostParam = "", level: LevelParam = None, page: PageParam = 1
) -> HTMLResponse:
    data = views.card(store.reads(), card, Filter(host=host.strip(), level=level.value if level else ""), page)
    health = data.health
    charts = spread_charts(health.summary) if health and health.summary else {}
    return _page("card.html", card=data.card, cmp=data.cmp, view=health, health_charts=charts, baselines=data.baselines,
                 chart_sections=chart_sections(data.charts), changes=data.changes)  # fmt: skip


@router.get("/gpus/{device:name}", response_class=HTMLResponse)
def gpu_page(device: str, _: Reader, store: StoreDep, page: PageParam = 1) -> HTMLResponse:
    data = views.gpu(store.reads(), device, page)
    return _page("gpu.html", device=data.device, history=data.history, verdict=data.verdict, runs=data.runs,
                 page=data.page, pages=data.pages)  # fmt: skip


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run_page(run_id: str, _: Reader, store: StoreDep) -> HTMLResponse:
    run = views.run(store.run_payload(run_id))
    results = []
    for r in run.results:
        shown, efficiency = headline(r), per_watt(r)
        t = r.timing
        results.append({
            "name": r.name, "case": describe(r), "status": r.status,
            "headline": f"{number(shown[0])} {shown[1]}" if shown else "", "peak": r.peak_fraction,
            "per_watt": f"{efficiency[0]:.3g} {efficiency[1]}" if efficiency else "",
            "power": f"board's mean power {t.power_w:.0f} W over the repeats" if t and t.power_w else "",
            "median": f"{number(t.median_s * 1e3)} ms" if t else "",
            "method": f"{t.method} ×{t.calls_per_repeat}, {t.repeats} repeats, CV {t.cv:.1%}" + _host(t) if t else "",
            "notes": ", ".join(r.flags) + (f" {r.reason}" if r.reason else ""),
        })  # fmt: skip
    return _page("run.html", run=run, results=results, counter_names=list(GpuCounters.model_fields),
                 not_understood=store.reads().not_understood(run_id), contract=THIS)  # fmt: skip


def _host(t: TimingStats) -> str:
    """What the window got of the host, where the measuring process had to wait for it (agent/starvation.py)."""
    waited = f", waited for a CPU {t.host_wait:.0%}" if t.host_wait else ""
    return waited + (f", GPU idle {t.device_idle:.0%}" if t.device_idle else "")


@router.get("/compare", response_class=HTMLResponse)
def compare_page(_: Reader, store: StoreDep, cards: CardsParam = None) -> HTMLResponse:
    data = views.compare_cards(store.reads(), _selected(cards))
    sections = chart_sections(data.charts) if data.charts else []
    return _page("compare.html", choices=data.choices, chosen=data.chosen, cmp=data.cmp, message=data.message,
                 chart_sections=sections, query=urlencode([("cards", c) for c in data.chosen]))  # fmt: skip


@router.get("/compare.csv")
def compare_csv(_: Reader, store: StoreDep, cards: CardsParam = None) -> Response:
    chosen = _selected(cards)
    reads = store.reads()
    message = views.refusal(reads, chosen, fewest=1)  # one card is a card page's table
    if message:
        raise BadRequest(message)
    return _comparison_csv(views.comparison(reads, chosen), "compare.csv")


@router.get("/health", response_class=HTMLResponse)
def health_page(
    _: Reader, store: StoreDep, host: HostParam = "", card: CardParam = "", level: LevelParam = None,
    page: PageParam = 1,
) -> HTMLResponse:  # fmt: skip
    chosen = Filter(host=host.strip(), card=card.strip(), level=level.value if level else "")
    view = views.fleet_health_page(store.reads(), chosen, page)
    return _page("health.html", view=view, health_charts=spread_charts(view.summary) if view.summary else {})


@router.get("/health.csv")
def health_csv(_: Reader, store: StoreDep) -> Response:
    rows: list[list[object]] = []
    keys = health.FIGURE_KEYS
    for v in views.fleet_health(store.reads()):
        figures = [v.figures[k].value if k in v.figures else "" for k in keys]
        rows.append([v.device, v.card, v.hostname, v.run_id, v.verdict, v.slow_by or "", *figures,
                     "; ".join([*v.reasons, *v.causes])])  # fmt: skip
    header = ["gpu", "card", HOSTNAME, "run_id", "verdict", "slow_by", *keys, "reasons"]
    return _csv(header, rows, "health.csv")


@router.get("/sql", response_class=HTMLResponse)
async def sql_page(_: Reader, store: StoreDep, settings: SettingsDep, sql: str = "") -> HTMLResponse:
    result, error = None, None
    cap = min(1000, settings.sql_max_rows)
    if sql.strip():
        try:
            result = await run_in_threadpool(store.sql, sql, max_rows=cap, timeout_s=settings.sql_timeout_s,
                                             max_bytes=settings.sql_max_bytes,
                                             max_memory=settings.sql_memory_bytes())  # fmt: skip
        except CollectorError as exc:
            error = exc.message
    catalog = await run_in_threadpool(lambda: views.sql_catalog(store.reads()))
    return _page("sql.html", sql=sql or EXAMPLES[0][1], result=result, error=error, examples=EXAMPLES,
                 max_rows=cap, timeout=f"{settings.sql_timeout_s:g}", catalog=catalog, raw=UNDER,
                 figure_views=FIGURE_VIEWS, every_result=EVERY_RESULT, trusted_words=TRUSTED_WORDS)  # fmt: skip


FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1d2733"/>'
    '<path d="M3 12 L6 7 L9 9 L13 3" stroke="#56B4E9" stroke-width="2" fill="none"/></svg>'
)


@router.get("/favicon.ico")
def favicon() -> Response:
    return Response(FAVICON, media_type="image/svg+xml", headers={"Cache-Control": "max-age=86400"})

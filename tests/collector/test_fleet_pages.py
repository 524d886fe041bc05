"""A fleet larger than a page, generated as ``benchmarks/collector_million.py`` generates 10,000 GPUs (health runs
of five card models, 1 GPU in 211 slow at matmul), served by a real collector: every view summarises first and
lists a page at a time, and what it says agrees with ``/health.csv``, which lists every GPU."""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import duckdb
import httpx
import pytest

from benchmarks.collector_million import build
from collector.analysis.fleet import LEVELS, NEEDS_ACTION, PAGE
from collector.store.aggregates import DEVICE_COUNTERS
from tests.servers import Collector, serve_collector

#: 120 GPUs of each card: the fleet and each card's list are larger than a page. Three checks each, so that a slow
#: GPU is confirmed slow, not only suspect.
GPUS, CHECKS = 600, 3
ACTION = {level.value for level in NEEDS_ACTION}


def generate(db: Path, runs: int, gpus: int) -> Path:
    build(db, runs, gpus=gpus, chunk=100_000, refresh_runs=50_000)
    return db


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    db = generate(tmp_path_factory.mktemp("fleet") / "fleet.duckdb", GPUS * CHECKS, GPUS)
    with serve_collector(db) as served:
        yield served


@pytest.fixture(scope="module")
def every_gpu(fleet: Collector) -> list[dict[str, str]]:
    """``/health.csv``: every GPU, worst first."""
    return list(csv.DictReader(io.StringIO(httpx.get(fleet.url + "/health.csv").text)))


def _get(site: Collector, path: str, **params: object) -> httpx.Response:
    return httpx.get(site.url + path, params=params)  # type: ignore[arg-type]


def _section(html: str, start: str, end: str) -> str:
    return html.split(start, 1)[1].split(end, 1)[0]


def _gpus(html: str) -> list[str]:
    """The GPUs a health table lists, in its order."""
    return re.findall(r'<td class="small"><a href="/gpus/([^"]+)">', html)


def _hosts(html: str) -> list[str]:
    """The hostnames of the GPUs a health table lists, in its order (the GPUs of one host are equals in it)."""
    return re.findall(r'<td class="small"><a href="/gpus/[^"]+">[^<]+</a></td>\n<td>[^<]*</td><td>([^<]*)</td>', html)


def test_health_summarises_first(fleet: Collector, every_gpu: list[dict[str, str]]) -> None:
    page = _get(fleet, "/health")
    assert page.status_code == 200
    levels = Counter(row["verdict"] for row in every_gpu)
    assert len(every_gpu) == GPUS and levels["slow"] >= 2  # the generator's slow GPUs, confirmed
    glance = _section(page.text, '<p id="glance"', "</p>")
    assert f"{GPUS:,} GPUs:" in glance
    for level, n in levels.items():
        assert f"{n:,} {level}</span>" in glance
    # Each card's row: its GPUs and how many at each level, as the CSV counts them.
    table = _section(page.text, '<table id="levels">', "</table>")
    for card in {row["card"] for row in every_gpu}:
        mine = [row for row in every_gpu if row["card"] == card]
        cells = re.findall(r'<td class="num[^"]*">(?:<a [^>]*>)?([\d,]+)', _section(table, f">{card}</a>", "</tr>"))
        by_level = Counter(row["verdict"] for row in mine)
        assert cells == [f"{len(mine):,}", *(f"{by_level[level.value]:,}" for level in LEVELS)]
    # The GPUs that need action, worst first, before the list: exactly the CSV's, in its order.
    action = _gpus(_section(page.text, '<h2 id="action">', '<h2 id="gpus">'))
    assert action == [row["gpu"] for row in every_gpu if row["verdict"] in ACTION]
    # Each card's figures as histograms, the slow GPUs counted on the figure they are slow at.
    spreads = _section(page.text, "Spread of each figure", '<h2 id="gpus">')
    assert spreads.count("<svg") == len(re.findall(r"<figure>", spreads)) >= 5 * 4
    slow_bf16 = sum(
        int(n) for n in re.findall(r"BF16 matmul \(TFLOPS\) · <span class=\"level-slow\">(\d+) slow", spreads)
    )
    assert slow_bf16 == levels["slow"]
    # The list: one page, worst first.
    assert _gpus(page.text.split('<h2 id="gpus">', 1)[1]) == [row["gpu"] for row in every_gpu[:PAGE]]


def test_the_list_is_paged_filtered_and_searched_on_the_server(
    fleet: Collector, every_gpu: list[dict[str, str]]
) -> None:
    def listed(**params: object) -> list[str]:
        answer = _get(fleet, "/health", **params)
        assert answer.status_code == 200
        return _gpus(answer.text.split('id="gpu-filter"', 1)[1])

    pages = -(-GPUS // PAGE)
    seen = [gpu for n in range(1, pages + 1) for gpu in listed(page=n)]
    assert seen == [row["gpu"] for row in every_gpu]  # every GPU once, worst first
    assert listed(page=pages + 5) == listed(page=pages)  # past the last: the last
    assert listed(level="slow") == [row["gpu"] for row in every_gpu if row["verdict"] == "slow"]
    card = every_gpu[-1]["card"]
    assert listed(card=card, page=2) == [row["gpu"] for row in every_gpu if row["card"] == card][PAGE : 2 * PAGE]
    host = every_gpu[7]["hostname"]
    assert listed(host=host.upper()) == [row["gpu"] for row in every_gpu if row["hostname"] == host]
    assert listed(host=every_gpu[3]["gpu"][-12:]) == [every_gpu[3]["gpu"]]
    assert "No GPU matches" in _get(fleet, "/health", host="no-such-host").text
    for params, field in (({"level": "broken"}, "level"), ({"page": 0}, "page"), ({"host": "x" * 300}, "host")):
        refused = _get(fleet, "/health", **params)
        assert refused.status_code == 422 and field in refused.json()["error"]["message"]


def test_the_card_page_and_home_summarise_too(fleet: Collector, every_gpu: list[dict[str, str]]) -> None:
    card = next(row["card"] for row in every_gpu if row["verdict"] == "slow")
    mine = [row for row in every_gpu if row["card"] == card]
    page = _get(fleet, "/cards/" + card)
    assert page.status_code == 200
    assert f"{len(mine):,} GPUs:" in _section(page.text, '<p id="glance"', "</p>")
    action = _gpus(_section(page.text, '<h3 id="action">', "<h3>Every GPU of this card</h3>"))
    assert action == [row["gpu"] for row in mine if row["verdict"] in ACTION]
    listed = _hosts(page.text.split('id="gpu-filter"', 1)[1])
    assert listed == [row["hostname"] for row in mine[:PAGE]]
    slow = _get(fleet, "/cards/" + card, level="slow").text.split('id="gpu-filter"', 1)[1]
    assert _gpus(slow) == [row["gpu"] for row in mine if row["verdict"] == "slow"]
    home = _get(fleet, "/").text
    table = _section(home, "<h2>Health by card</h2>", "</table>")
    assert f"{Counter(row['verdict'] for row in every_gpu)['ok']:,}</a>" in table


def test_reports_summarise_and_list_what_needs_action(fleet: Collector, every_gpu: list[dict[str, str]]) -> None:
    action = [row for row in every_gpu if row["verdict"] in ACTION]
    md = _get(fleet, "/report.md").text
    health = md.split("## Fleet health", 1)[1]
    assert health.lstrip().startswith(f"{GPUS:,} GPUs:")
    assert re.findall(r"^\| (GPU-[0-9a-f-]+) \|", health, re.M) == [row["gpu"] for row in action]
    assert health.count("▁") + health.count("█") > 0  # each figure's spread, drawn in text
    html = _get(fleet, "/report").text
    assert re.findall(r"(?:src|href)\s*=|@import|url\(", html) == []  # still one self-contained file
    listed = re.findall(r'<td class="small">(GPU-[0-9a-f-]+)</td>', html.split("Fleet health", 1)[1])
    assert listed == [row["gpu"] for row in action]
    assert len(html) < 2 * len(md) + 200_000  # a summary, not a row per GPU


def test_a_gpu_page_lists_its_runs_a_page_at_a_time_with_their_counters(tmp_path: Path) -> None:
    db = generate(tmp_path / "two.duckdb", 2 * (PAGE + 1), 2)
    with duckdb.connect(str(db)) as con:  # as a collector before the GPU page read its counters kept left it
        con.execute("DROP INDEX device_runs_device")
        for name, _, _ in DEVICE_COUNTERS:
            con.execute(f"ALTER TABLE device_runs DROP COLUMN {name}")
    with serve_collector(db) as site:
        device = _gpus(_get(site, "/health").text)[0]
        sql = (
            "SELECT run_id, ecc_uncorrected_aggregate_after, remapped_rows_uncorrectable_after, pcie_replays_during, "
            f"xid_count FROM gpu_counters WHERE gpu_uuid = '{device}' ORDER BY started_at DESC"
        )
        expected = httpx.get(site.url + "/api/v1/sql", params={"sql": sql}).json()["rows"]
        first, second = (_get(site, f"/gpus/{device}", page=n).text for n in (1, 2))
        shown = [_history(page) for page in (first, second)]
        assert shown == [expected[:PAGE], expected[PAGE:]] and len(expected) == PAGE + 1
        assert f"Runs 1–{PAGE} of {PAGE + 1}, newest first" in first and 'rel="next" href="?page=2"' in first


def _history(page: str) -> list[list[object]]:
    """(run, its four counters) of each row of a GPU page's history, as the page shows them."""
    rows = []
    for row in page.split('id="history"', 1)[1].split("<tbody>", 1)[1].split("</tr>")[:-1]:
        run = re.findall(r'href="/runs/([^"]+)"', row)[0]
        counters = re.findall(r'<td class="num">([^<]*)</td>', row)[-4:]
        rows.append([run, *(None if c == "unknown" else int(c) for c in counters)])
    return rows

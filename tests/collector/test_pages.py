"""The web pages over a real server: every page answers, links are shareable, CSV exports match the pages."""

from __future__ import annotations

from urllib.parse import quote

import httpx

from tests.collector.conftest import A100, SXM
from tests.servers import Collector


def _get(site: Collector, path: str, **params: object) -> httpx.Response:
    return httpx.get(site.url + path, params=params)  # type: ignore[arg-type]


def test_home_lists_cards_and_points_at_slow_gpus(site: Collector) -> None:
    page = _get(site, "/")
    assert page.status_code == 200
    assert SXM in page.text and "1 GPU(s) slow or faulty" in page.text and "2 suspect" in page.text
    assert 'href="/runs/' in page.text


def test_cards_page_and_csv(site: Collector) -> None:
    page = _get(site, "/cards")
    assert page.status_code == 200 and A100 in page.text and "A100 (published)" in page.text
    table = _get(site, "/cards.csv")
    assert table.headers["content-type"].startswith("text/csv")
    header = table.text.splitlines()[0].split(",")
    assert header[1:5] == [A100, "NVIDIA H100 80GB HBM3 80 GiB · 500 W", SXM, "NVIDIA H100 PCIe 80 GiB · 350 W"]


def test_one_card_page_has_its_gpus_and_versions(site: Collector) -> None:
    page = _get(site, "/cards/" + quote(A100))
    assert page.status_code == 200
    assert "faster" in page.text  # the torch upgrade on A100s
    assert page.text.count('href="/gpus/') == 4
    assert _get(site, "/cards/" + quote("No Such GPU")).status_code == 404


def test_gpu_history_and_run_detail(site: Collector) -> None:
    home = _get(site, "/health").text
    device = home.split('href="/gpus/')[1].split('"')[0]
    gpu = _get(site, f"/gpus/{device}")
    assert gpu.status_code == 200 and "faulty" in gpu.text and "History" in gpu.text  # h8, on a narrowed link
    assert "PCIe link at Gen4 under load" in gpu.text
    run_id = gpu.text.split('href="/runs/')[1].split('"')[0]
    run = _get(site, f"/runs/{run_id}")
    assert run.status_code == 200 and "bf16 n=8192" in run.text
    assert _get(site, "/runs/00000000-0000-0000-0000-000000000000").status_code == 404


def test_compare_takes_two_to_four_cards_from_the_url(site: Collector) -> None:
    page = _get(site, "/compare", cards=[SXM, "A100 (published)"])
    assert page.status_code == 200
    headers = page.text.split('<table id="comparison">')[1].split("</thead>")[0]
    assert SXM in headers and "A100 (published)" in headers and A100 not in headers
    assert "choose 2 to 4 cards" in _get(site, "/compare", cards=[SXM]).text
    assert "unknown card" in _get(site, "/compare", cards=[SXM, "Imaginary"]).text
    csv = _get(site, "/compare.csv", cards=[SXM, "A100 (published)"]).text.splitlines()
    assert csv[0] == f",{SXM},A100 (published)"


def test_health_page_and_csv(site: Collector) -> None:
    assert "power limit 500 W, below the default 700 W" in _get(site, "/health").text
    rows = _get(site, "/health.csv").text.splitlines()
    assert rows[0].startswith("gpu,card,hostname,run_id,verdict,slow_by")  # the pages' and SQL's word
    assert ",h8," in rows[1] and ",faulty," in rows[1] and "(pcie_gen)" in rows[1]
    assert ",suspect," in rows[2] and "in its latest measurement only" in rows[2]


def test_sql_console_runs_a_query_from_the_url(site: Collector) -> None:
    page = _get(site, "/sql", sql="SELECT card, count(*) AS n FROM matmul GROUP BY card ORDER BY card")
    assert page.status_code == 200 and 'id="sql-result"' in page.text and A100 in page.text
    refused = _get(site, "/sql", sql="DROP TABLE runs")
    assert 'id="sql-error"' in refused.text and "DROP" in refused.text

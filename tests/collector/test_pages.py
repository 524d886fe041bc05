"""The web pages over a real server: every page answers, links are shareable, CSV exports match the pages."""

from __future__ import annotations

import re
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


def test_compare_takes_one_to_four_cards_from_the_url(site: Collector) -> None:
    page = _get(site, "/compare", cards=[SXM, "A100 (published)"])
    assert page.status_code == 200
    headers = page.text.split('<table id="comparison">')[1].split("</thead>")[0]
    assert SXM in headers and "A100 (published)" in headers and A100 not in headers
    # One card is compared with the baselines flopfleet ships of cards this collector has not measured.
    alone = _get(site, "/compare", cards=[SXM]).text.split('<table id="comparison">')[1].split("</thead>")[0]
    assert SXM in alone and "NVIDIA H200 140 GiB · 700 W baseline (" in alone
    assert "choose 1 to 4 cards" in _get(site, "/compare", cards=[SXM, A100, "x", "y", "z"]).text
    assert "unknown card" in _get(site, "/compare", cards=[SXM, "Imaginary"]).text
    csv = _get(site, "/compare.csv", cards=[SXM, "A100 (published)"]).text.splitlines()
    assert csv[0].startswith(f",{SXM},") and csv[0].endswith(",A100 (published)")


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


def test_sql_answers_read_as_the_pages_write_numbers_with_every_digit_in_csv_and_json(site: Collector) -> None:
    sql = (
        "SELECT 0.004205383872380331::DOUBLE AS share, 1234567.891::DOUBLE AS big, 42 AS whole, 'x' AS word, "
        "NULL AS nothing"
    )
    page = _get(site, "/sql", sql=sql).text.split('id="sql-result"')[1].split("</table>")[0]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", page.split("<tbody>")[1])
    assert cells == ["0.00421", "1,234,568", "42", "x", ""]
    assert 'title="0.004205383872380331"' in page  # every digit on hover
    assert _get(site, "/api/v1/sql", sql=sql).json()["rows"] == [[0.004205383872380331, 1234567.891, 42, "x", None]]
    assert (
        _get(site, "/api/v1/sql", sql=sql, format="csv").text.splitlines()[1]
        == "0.004205383872380331,1234567.891,42,x,"
    )


def test_a_browser_is_shown_an_error_page_and_a_program_the_json_error(site: Collector) -> None:
    browser = {"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}
    for path in ("/runs/no-such-run", "/no-such-page", "/cards/" + quote("No Such GPU")):
        page = httpx.get(site.url + path, headers=browser)
        assert page.status_code == 404 and page.headers["content-type"].startswith("text/html"), path
        assert "<h1>404 Not Found</h1>" in page.text and 'id="error-message"' in page.text and 'href="/"' in page.text
        program = httpx.get(site.url + path)
        assert program.status_code == 404 and set(program.json()["error"]) == {"code", "message", "details"}
    message = httpx.get(site.url + "/runs/no-such-run").json()["error"]["message"]
    assert message in httpx.get(site.url + "/runs/no-such-run", headers=browser).text
    api = httpx.get(site.url + "/api/v1/runs/no-such-run", headers=browser)  # the API answers JSON to anyone
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"


def test_a_run_page_names_each_results_implementation(collector: Collector) -> None:
    """A run measures LLM cells twice, through transformers' model and the agent's plain-torch one: one label each."""
    from schemas.labels import IMPLEMENTATIONS
    from tests.factories import inference, run_dict

    cells = [inference("prefill", 1, 512, 0.02), inference("prefill", 1, 512, 0.015)]
    cells[1]["params"] = {**cells[1]["params"], "implementation": "torch"}
    run = run_dict(cells)
    assert httpx.post(f"{collector.url}/api/v1/runs", json=run, headers=collector.auth).status_code == 201
    page = httpx.get(f"{collector.url}/runs/{run['run_id']}").text
    rows = page.split('id="results"')[1].split("<tbody>")[1].split("</tbody>")[0].split("<tr>")[1:]
    cases = [row.split("<td>")[2].split("</td>")[0] for row in rows]
    assert len(set(cases)) == 2, cases
    assert [case.rsplit(", ", 1)[1] for case in cases] == [IMPLEMENTATIONS["transformers"], IMPLEMENTATIONS["torch"]]

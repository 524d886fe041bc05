"""What a browser is told and refused: security headers on every answer, only known host names while reads are open
(DNS rebinding), no background requests from other sites, nothing loaded from a CDN."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from collector.web.security import CSP, allowed_hosts, host_allowed
from tests.factories import matmul, run_dict
from tests.servers import Collector, serve_collector

PAGES = ["/", "/cards", "/health", "/health.csv", "/cards.csv", "/sql?sql=SELECT+1", "/report", "/report.md",
         "/api/v1/runs", "/api/v1/sql?sql=SELECT+1", "/healthz", "/metrics", "/openapi.json",
         "/no-such-page"]  # fmt: skip


@pytest.mark.parametrize("path", PAGES)
def test_every_answer_carries_the_security_headers(collector: Collector, path: str) -> None:
    answer = httpx.get(collector.url + path)
    assert answer.headers["content-security-policy"] == CSP
    assert "frame-ancestors 'none'" in CSP and "script-src" not in CSP  # no script may run, none is needed
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["referrer-policy"] == "no-referrer"
    assert answer.headers["x-frame-options"] == "DENY"


def test_errors_and_refusals_carry_them_too(collector: Collector) -> None:
    for answer in (
        httpx.post(f"{collector.url}/api/v1/runs", content=b"{}"),  # 401
        httpx.get(f"{collector.url}/", headers={"Host": "evil.example"}),  # 421
        httpx.get(f"{collector.url}/api/v1/runs", headers={"X-Big": "a" * 20_000}),  # 431, before the app
    ):
        assert answer.headers["x-content-type-options"] == "nosniff", answer.status_code


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.evil.example", "localhost.evil.co"])
def test_a_rebound_name_cannot_read_an_open_collector(collector: Collector, host: str) -> None:
    httpx.post(f"{collector.url}/api/v1/runs", content=json.dumps(run_dict([matmul(64, "fp32", 1.0)])),
               headers=collector.auth)  # fmt: skip
    for path in ("/", "/api/v1/sql?sql=SELECT+*+FROM+runs", "/report.md", "/api/v1/runs"):
        answer = httpx.get(collector.url + path, headers={"Host": host})
        assert answer.status_code == 421, (path, answer.status_code)
        assert answer.json()["error"]["code"] == "host_not_allowed"
        assert "FLOPFLEET_ALLOWED_HOSTS" in answer.json()["error"]["message"]


LOOPBACK = ["localhost", "localhost:8000", "127.0.0.1", "[::1]:8000", "10.1.2.3", "app.localhost"]


@pytest.mark.parametrize("host", LOOPBACK)
def test_loopback_names_and_addresses_are_answered(collector: Collector, host: str) -> None:
    assert httpx.get(f"{collector.url}/cards", headers={"Host": host}).status_code == 200


def test_more_hosts_can_be_allowed_and_token_reads_answer_any(tmp_path: Path) -> None:
    assert allowed_hosts("auto", "0.0.0.0", reads_need_token=True) == ("*",)
    open_everywhere = allowed_hosts("auto", "0.0.0.0", reads_need_token=False)
    assert "localhost" in open_everywhere and not host_allowed("evil.example", open_everywhere)
    with serve_collector(tmp_path / "db.duckdb", allowed_hosts="collector.lab, *.fleet.example") as served:
        ok = [httpx.get(f"{served.url}/cards", headers={"Host": h}).status_code
              for h in ("collector.lab:8000", "a.fleet.example", "127.0.0.1")]  # fmt: skip
        assert ok == [200, 200, 200]
        assert httpx.get(f"{served.url}/cards", headers={"Host": "localhost"}).status_code == 421


BACKGROUND = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "image"}


def test_other_sites_cannot_make_a_browser_run_sql_or_post(collector: Collector) -> None:
    sql = f"{collector.url}/api/v1/sql?sql=SELECT+count(*)+FROM+range(10)"
    refused = httpx.get(sql, headers=BACKGROUND)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "cross_site_refused"
    posted = httpx.post(f"{collector.url}/api/v1/sql", json={"sql": "SELECT 1"},
                        headers={"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors"})  # fmt: skip
    assert posted.status_code == 403
    form = httpx.post(f"{collector.url}/api/v1/runs", content=b"{}",
                      headers={**collector.auth, "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate",
                               "Sec-Fetch-Dest": "document"})  # fmt: skip
    assert form.status_code == 403  # a cross-site form post is refused even as a navigation
    # a link someone follows from elsewhere, the collector's own pages, and programs (no Sec-Fetch) still work
    link = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    assert httpx.get(sql, headers=link).status_code == 200
    assert httpx.get(sql, headers={"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors"}).status_code == 200
    assert httpx.get(sql).status_code == 200


def test_no_page_loads_anything_from_elsewhere(collector: Collector) -> None:
    assert httpx.get(f"{collector.url}/docs").status_code == 404
    for path in ("/", "/cards", "/health", "/sql", "/report", "/compare"):
        html = httpx.get(collector.url + path).text
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), path

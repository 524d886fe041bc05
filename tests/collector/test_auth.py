"""Tokens: writes always need one; reads need one off loopback or when asked; revoked tokens stop working."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest

from collector.web.auth import reads_need_token
from collector.web.settings import Settings
from collector.web.tokens import TokenError, TokenStore, token_file
from tests.conftest import collector_cli
from tests.factories import matmul, run_dict
from tests.servers import Collector, serve_collector


def _post(url: str, body: dict[str, object], token: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{url}/api/v1/runs", content=json.dumps(body), headers=headers)


@pytest.mark.parametrize("token", [None, "ffk_not-a-real-token", ""])
def test_writes_without_a_valid_token_get_401(collector: Collector, token: str | None) -> None:
    answer = _post(collector.url, run_dict([matmul(64, "fp32", 1.0)]), token)
    assert answer.status_code == 401
    assert answer.headers["www-authenticate"] == "Bearer"
    assert answer.json()["error"]["code"] == "unauthorized"
    assert httpx.get(f"{collector.url}/api/v1/runs").json()["count"] == 0


def test_a_revoked_token_stops_working_at_once(collector: Collector) -> None:
    tokens = TokenStore(collector.db)
    extra = tokens.create("node7")
    assert _post(collector.url, run_dict([matmul(64, "fp32", 1.0)]), extra).status_code == 201
    tokens.revoke("node7")
    refused = _post(collector.url, run_dict([matmul(64, "fp32", 1.0)]), extra)
    assert refused.status_code == 401
    assert "revoked" in refused.json()["error"]["message"]


def test_each_run_records_which_token_sent_it(collector: Collector) -> None:
    body = run_dict([matmul(64, "fp32", 1.0)])
    assert _post(collector.url, body, collector.token).status_code == 201
    answer = httpx.get(f"{collector.url}/api/v1/sql", params={"sql": "SELECT token_name FROM runs"}).json()
    assert answer["rows"] == [["test-0"]]


def test_reads_are_open_on_loopback_and_can_require_a_token(tmp_path: Path) -> None:
    assert not reads_need_token(Settings(host="127.0.0.1"))
    assert reads_need_token(Settings(host="0.0.0.0"))
    assert not reads_need_token(Settings(host="0.0.0.0", read_access="open"))
    with serve_collector(tmp_path / "db.duckdb", read_access="token") as served:
        for path in ("/api/v1/runs", "/report", "/report.md", "/metrics", "/api/v1/sql?sql=SELECT+1"):
            refused = httpx.get(served.url + path)
            assert refused.status_code == 401, path
            assert set(refused.json()) == {"error"}
            assert httpx.get(served.url + path, headers=served.auth).status_code == 200, path
        assert httpx.get(f"{served.url}/healthz").status_code == 200
        assert httpx.get(f"{served.url}/readyz").status_code == 200


def test_token_cli_shows_a_token_once_and_keeps_only_its_hash(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    made = collector_cli("token", "create", "--db", str(db), "--name", "lab-a")
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("ffk_") and len(token) > 40
    assert token not in token_file(db).read_text()
    assert TokenStore(db).check(token) == "lab-a"
    again = collector_cli("token", "create", "--db", str(db), "--name", "lab-a")
    assert again.returncode == 1 and "exists" in again.stderr
    listed = collector_cli("token", "list", "--db", str(db))
    assert "lab-a" in listed.stdout
    revoked = collector_cli("token", "revoke", "lab-a", "--db", str(db))
    assert revoked.returncode == 0
    assert TokenStore(db).check(token) is None
    with pytest.raises(TokenError, match="no active token"):
        TokenStore(db).revoke("lab-a")
    with pytest.raises(TokenError, match="token name"):
        TokenStore(db).create("bad name")


def _scoped(db: Path, name: str, *scopes: str) -> str:
    flags = [a for s in scopes for a in ("--scope", s)]
    made = collector_cli("token", "create", "--db", str(db), "--name", name, *flags)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def test_scopes_let_a_dashboard_read_without_posting_or_downloading(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    agent, dashboard, admin = _scoped(db, "agent"), _scoped(db, "dash", "read"), _scoped(db, "ops", "admin", "read")
    listed = collector_cli("token", "list", "--db", str(db)).stdout
    assert "write" in listed and "admin, read" not in listed and "read, admin" in listed  # canonical order
    with serve_collector(db, read_access="token") as served:
        body = run_dict([matmul(64, "fp32", 1.0)])
        assert _post(served.url, body, dashboard).status_code == 403
        assert _post(served.url, body, agent).status_code == 201
        as_agent = httpx.get(f"{served.url}/api/v1/runs", headers={"Authorization": f"Bearer {agent}"})
        assert as_agent.status_code == 403 and "scope 'read'" in as_agent.json()["error"]["message"]
        as_dashboard = httpx.get(f"{served.url}/api/v1/runs", headers={"Authorization": f"Bearer {dashboard}"})
        assert as_dashboard.json()["count"] == 1
        for token, status in ((agent, 403), (dashboard, 403), (admin, 200)):
            snap = httpx.get(f"{served.url}/api/v1/snapshot", headers={"Authorization": f"Bearer {token}"})
            assert snap.status_code == status
    bad = collector_cli("token", "create", "--db", str(db), "--name", "x", "--scope", "root")
    assert bad.returncode == 1 and "not one of: write, read, admin" in bad.stderr


def test_tokens_from_before_scopes_keep_what_they_could_do(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    token = TokenStore(db).create("old", ("write",))
    data = json.loads(token_file(db).read_text())
    del data["tokens"][0]["scopes"]  # as written by a collector without scopes
    token_file(db).write_text(json.dumps(data))
    assert TokenStore(db).lookup(token).scopes == ("write", "read", "admin")  # type: ignore[union-attr]


@pytest.mark.parametrize("broken", ["{not json", '{"tokens": [{"name": 1}]}', '{"tokens": "x"}', "[]", "\x00\xff"])
def test_a_broken_token_file_keeps_the_last_good_tokens_and_names_no_path(tmp_path: Path, broken: str) -> None:
    db = tmp_path / "db.duckdb"
    with serve_collector(db) as served:
        body = run_dict([matmul(64, "fp32", 1.0)])
        assert _post(served.url, body, served.token).status_code == 201
        token_file(db).write_text(broken, encoding="latin-1")  # half-edited by hand, say
        again = _post(served.url, run_dict([matmul(64, "fp32", 2.0)]), served.token)
        assert again.status_code == 201  # the tokens read before still hold
        assert _post(served.url, body, "ffk_unknown").status_code == 401
    # a collector that starts on the broken file has no tokens to keep: writes wait, answered 503
    with serve_collector(tmp_path / "other.duckdb") as served:
        token_file(served.db).write_text(broken, encoding="latin-1")
        refused = _post(served.url, body, served.token)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "tokens_unavailable"
        assert str(tmp_path) not in refused.text and "tokens.json" not in refused.text
        metrics = httpx.get(f"{served.url}/metrics").text
        assert 'route="/api/v1/runs",status="503"' in metrics


def test_every_refusal_is_counted_in_metrics_as_a_4xx(collector: Collector) -> None:
    _post(collector.url, run_dict([matmul(64, "fp32", 1.0)]), None)  # 401
    httpx.get(f"{collector.url}/compare.csv")  # 400
    httpx.get(f"{collector.url}/cards", headers={"Host": "evil.example"})  # 421
    httpx.get(f"{collector.url}/cards", headers={"X-Big": "a" * 20_000})  # 431, refused before the app
    metrics = httpx.get(f"{collector.url}/metrics").text
    for status in ("401", "400", "421", "431"):
        assert re.search(rf'flopfleet_http_requests_total{{[^}}]*status="{status}"}} [1-9]', metrics), status
    assert 'status="500"' not in metrics

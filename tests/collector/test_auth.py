"""Tokens: writes always need one; reads need one off loopback or when asked; revoked tokens stop working."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from collector.auth import reads_need_token
from collector.settings import Settings
from collector.tokens import TokenError, TokenStore, token_file
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

"""Ingest edge cases: gzip bodies, gzip bombs, encodings, schema versions."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import httpx

from tests.factories import matmul, run_dict
from tests.servers import Collector, serve_collector


def _post(served: Collector, content: bytes, **headers: str) -> httpx.Response:
    return httpx.post(f"{served.url}/api/v1/runs", content=content, headers={**served.auth, **headers})


def test_gzip_bodies_are_accepted(collector: Collector) -> None:
    body = json.dumps(run_dict([matmul(64, "fp32", 1.0)] * 50)).encode()
    answer = _post(collector, gzip.compress(body), **{"Content-Encoding": "gzip"})
    assert answer.status_code == 201, answer.text
    assert answer.json()["results"] == 50


def test_a_gzip_bomb_gets_413_without_inflating_it(tmp_path: Path) -> None:
    bomb = gzip.compress(b"0" * (64 << 20))  # 64 MiB of zeros in about 64 KiB
    assert len(bomb) < 1 << 20
    with serve_collector(tmp_path / "db.duckdb", max_body_bytes=1 << 20) as served:
        answer = _post(served, bomb, **{"Content-Encoding": "gzip"})
        assert answer.status_code == 413
        assert "inflates past" in answer.json()["error"]["message"]
        assert _post(served, b"\x1f\x8b not gzip", **{"Content-Encoding": "gzip"}).status_code == 400
        assert _post(served, b"{}", **{"Content-Encoding": "br"}).status_code == 415


def test_a_newer_schema_version_is_refused_naming_the_accepted_ones(collector: Collector) -> None:
    body = run_dict([matmul(64, "fp32", 1.0)])
    body["schema_version"] = 2
    answer = _post(collector, json.dumps(body).encode())
    assert answer.status_code == 422
    assert "schema_version 2 is newer than the versions accepted here (1)" in answer.json()["error"]["message"]

"""The HTTP API on a real uvicorn server, through a real httpx client."""

from __future__ import annotations

import copy
import json

import httpx

from tests.factories import matmul, run_dict
from tests.servers import Collector, serve_collector


def _post(served: Collector, body: object, **headers: str) -> httpx.Response:
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    headers = {"Content-Type": "application/json", **served.auth, **headers}
    return httpx.post(f"{served.url}/api/v1/runs", content=content, headers=headers)


def test_post_stores_then_answers_duplicate_then_conflict(collector: Collector) -> None:
    body = run_dict([matmul(1024, "bf16", 500.0)])
    first = _post(collector, body)
    assert first.status_code == 201 and first.json() == {"run_id": body["run_id"], "status": "created", "results": 1}
    again = _post(collector, body)
    assert again.status_code == 200 and again.json()["status"] == "duplicate"
    changed = copy.deepcopy(body)
    changed["results"][0]["metrics"]["tflops"] = 501.0
    conflict = _post(collector, changed)
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "run_conflict"


def test_a_bad_payload_gets_422_naming_the_field(collector: Collector) -> None:
    body = run_dict([matmul(1024, "bf16", 500.0)])
    body["results"][0]["params"]["n"] = -5
    answer = _post(collector, body)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "validation_error"
    assert "results.0.matmul.params.n" in error["message"]
    assert error["details"][0]["loc"] == "results.0.matmul.params.n"
    for bad in (b"", b"{not json", b"[]"):
        answer = _post(collector, bad)
        assert answer.status_code == 422, bad
        assert set(answer.json()) == {"error"}


def test_an_oversized_body_gets_413(tmp_path: object) -> None:
    from pathlib import Path

    with serve_collector(Path(str(tmp_path)) / "db.duckdb", max_body_bytes=4096) as served:
        answer = _post(served, run_dict([matmul(64, "fp32", 1.0)] * 30))
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "payload_too_large"


def test_runs_can_be_listed_and_fetched(collector: Collector) -> None:
    bodies = [run_dict([matmul(64, "fp32", 1.0)], hostname=f"node{i}") for i in range(3)]
    for body in bodies:
        assert _post(collector, body).status_code == 201
    page = httpx.get(f"{collector.url}/api/v1/runs", params={"limit": 2}).json()
    assert page["count"] == 3 and len(page["data"]) == 2 and page["limit"] == 2
    assert page["data"][0]["gpu_names"] == ["NVIDIA H100 80GB HBM3"]
    one = httpx.get(f"{collector.url}/api/v1/runs/{bodies[1]['run_id']}")
    assert one.status_code == 200 and one.json()["host"]["hostname"] == "node1"
    missing = httpx.get(f"{collector.url}/api/v1/runs/00000000-0000-0000-0000-000000000000")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    bad_limit = httpx.get(f"{collector.url}/api/v1/runs", params={"limit": 0})
    assert bad_limit.status_code == 422 and "limit" in bad_limit.json()["error"]["message"]


def test_health_docs_and_openapi(collector: Collector) -> None:
    assert httpx.get(f"{collector.url}/healthz").json() == {"status": "ok"}
    # FastAPI's docs pages load scripts from a CDN, and the collector loads nothing from elsewhere: they are off.
    assert httpx.get(f"{collector.url}/docs").status_code == 404
    assert httpx.get(f"{collector.url}/redoc").status_code == 404
    spec = httpx.get(f"{collector.url}/openapi.json").json()
    body = spec["paths"]["/api/v1/runs"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"$ref": "#/components/schemas/RunSubmission"}
    assert "MatmulResult" in spec["components"]["schemas"]
    assert httpx.get(f"{collector.url}/api/v1/schema").json()["title"] == "RunSubmission"


def test_report_pages(collector: Collector) -> None:
    _post(collector, run_dict([matmul(4096, "bf16", 650.0)]))
    page = httpx.get(f"{collector.url}/report")
    assert page.status_code == 200 and "<svg" in page.text and ">650<" in page.text
    md = httpx.get(f"{collector.url}/report.md")
    assert md.headers["content-type"].startswith("text/markdown") and "| BF16 matmul (TFLOPS) | 650 |" in md.text


def test_a_run_is_in_pages_and_sql_as_soon_as_it_is_acknowledged(collector: Collector) -> None:
    """Figures follow a run's commit by a moment; reads wait for them, so a read right after a 201 shows the run."""
    with httpx.Client() as client:
        for i in range(8):
            body = run_dict([matmul(2048, "fp16", 600.0 + i)])
            posted = client.post(f"{collector.url}/api/v1/runs", json=body, headers=collector.auth)
            assert posted.status_code == 201
            sql = f"SELECT figure, value FROM figures WHERE run_id = '{body['run_id']}'"
            answer = client.post(f"{collector.url}/api/v1/sql", json={"sql": sql})
            assert answer.json()["rows"] == [["matmul_fp16", 600.0 + i]]
            cards = client.get(f"{collector.url}/cards.csv").text  # the device's latest figure, this run's
            assert f"FP16 matmul (TFLOPS),{600 + i:.1f}" in cards
            assert f"devices / runs,1/{i + 1}" in cards

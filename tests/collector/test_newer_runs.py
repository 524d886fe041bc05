"""A run of a newer minor is stored as far as this collector knows it, whole as its payload, and says what was not
understood; a run of this version is as strict as ever; a run of another major is refused in its own words
(docs/contract.md). Real runs of other releases: tests/e2e/test_releases.py."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.store import Store
from schemas.contract import CONTRACT_HEADER, MAJORS_HEADER, THIS
from tests.conftest import collector_cli
from tests.factories import layer, matmul, run_dict
from tests.servers import Collector, serve_collector

NEWER = f"{THIS.major}.{THIS.minor + 1}"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    with serve_collector(tmp_path_factory.mktemp("newer") / "db.duckdb") as collector:
        yield collector


def newer_run() -> dict[str, Any]:
    """A run of the next minor: a field, a flag, a benchmark kind and a dtype this collector does not know, beside
    results it does."""
    results = [matmul(2048, "bf16", 600.0), matmul(4096, "bf16", 650.0), layer("bert_layer", "fwd", 64, 128, 300.0),
               matmul(1024, "bf16", 500.0)]  # fmt: skip
    data = run_dict(results)
    data["schema_minor"] = THIS.minor + 1
    data["fleet_zone"] = "eu-1"  # a new field of the envelope
    for result in data["results"]:
        result["timing"]["gpu_busy_share"] = 0.97  # a new field of every result's timing
    data["results"][1]["flags"] = ["cold_cache"]  # a new flag: stored, and the result kept out of figures
    data["results"][2]["benchmark"] = "attention"  # a new kind: kept in the payload only
    data["results"][3]["params"]["dtype"] = "fp4_e2m1"  # a new value of a result's field: that result too
    return data


def _post(served: Collector, data: dict[str, Any] | bytes) -> httpx.Response:
    body = data if isinstance(data, bytes) else json.dumps(data).encode()
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip", **served.auth}
    return httpx.post(f"{served.url}/api/v1/runs", content=gzip.compress(body), headers=headers)


def _sql(served: Collector, sql: str) -> list[list[Any]]:
    answer = httpx.post(f"{served.url}/api/v1/sql", json={"sql": sql})
    assert answer.status_code == 200, answer.text
    rows: list[list[Any]] = answer.json()["rows"]
    return rows


def test_a_newer_minor_is_stored_as_far_as_it_is_known_and_whole_as_sent(served: Collector) -> None:
    data = newer_run()
    body = json.dumps(data, indent=1).encode()
    answer = _post(served, body)
    assert answer.status_code == 201, answer.text
    receipt = answer.json()
    assert receipt["results"] == 2  # the two results it can read
    notes = receipt["not_understood"]
    assert "field fleet_zone: kept in the stored run only" in notes
    # three: the fourth result is of a kind not known here, left whole
    assert "field results.*.timing.gpu_busy_share: kept in the stored run only (3 results)" in notes
    assert ("flag 'cold_cache' of results.*.flags: stored; results carrying it are left out of figures (1 result)"
            in notes)  # fmt: skip
    assert "benchmark 'attention': its results kept in the stored run only (1 result)" in notes
    assert "value 'fp4_e2m1' of results.*.params.dtype: those results kept in the stored run only (1 result)" in notes

    run_id = data["run_id"]
    stored = httpx.get(f"{served.url}/api/v1/runs/{run_id}", headers=served.auth)
    assert stored.content == body  # nothing the agent sent is lost
    rows = _sql(served, f"SELECT seq, n, flags, schema_minor, not_understood FROM results JOIN runs USING (run_id) "
                        f"WHERE run_id = '{run_id}' ORDER BY seq")  # fmt: skip
    assert [(r[1], r[2]) for r in rows] == [(2048, None), (4096, ["cold_cache"])]
    assert rows[0][3] == THIS.minor + 1 and rows[0][4] == notes
    figures = _sql(served, f"SELECT figure, value FROM figures WHERE run_id = '{run_id}' AND figure = 'matmul_bf16'")
    assert figures == [["matmul_bf16", 600.0]]  # 650, flagged with a flag it does not know, makes no figure

    listed = httpx.get(f"{served.url}/api/v1/runs", headers=served.auth).json()["data"]
    mine = next(r for r in listed if r["run_id"] == run_id)
    assert (mine["contract"], mine["not_understood"]) == (NEWER, notes)
    page = httpx.get(f"{served.url}/runs/{run_id}").text
    assert f"This run is contract {NEWER}, newer than this collector's {THIS}" in page
    assert "benchmark &#39;attention&#39;: its results kept in the stored run only (1 result)" in page

    again = _post(served, json.dumps(data).encode())  # the same run, spaced otherwise: a duplicate, not a conflict
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    data["fleet_zone"] = "us-2"
    assert _post(served, data).status_code == 409


def test_a_run_of_this_version_stays_strict(served: Collector) -> None:
    """What a newer minor may carry is refused in a run of this version, naming the field, as before."""
    data = newer_run()
    data["schema_minor"] = THIS.minor
    answer = _post(served, data)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "validation_error"
    assert {"results.0.matmul.timing.gpu_busy_share", "results.2", "fleet_zone"} <= {d["loc"] for d in error["details"]}
    plain = run_dict([matmul(2048, "bf16", 600.0)])
    plain["results"][0]["flags"] = ["cold_cache"]
    assert _post(served, plain).json()["error"]["details"][0]["loc"] == "results.0.matmul.flags.0"


def test_a_newer_minor_with_a_bad_field_is_refused_naming_it_where_it_was_sent(served: Collector) -> None:
    data = newer_run()
    data["results"][3]["timing"]["median_s"] = -1.0  # results[2] (a kind not known here) comes before it
    data["results"][3]["params"]["dtype"] = "bf16"
    answer = _post(served, data)
    assert answer.status_code == 422
    assert [d["loc"] for d in answer.json()["error"]["details"]] == ["results.3.matmul.timing.median_s"]


def test_a_run_of_another_major_is_refused_saying_what_this_collector_reads(served: Collector) -> None:
    data = run_dict([matmul(2048, "bf16", 600.0)])
    data["schema_version"] = THIS.major + 1
    answer = _post(served, data)
    assert answer.status_code == 422
    assert (answer.headers[CONTRACT_HEADER], answer.headers[MAJORS_HEADER]) == (str(THIS), str(THIS.major))
    error = answer.json()["error"]
    assert error["code"] == "unsupported_version"
    reads = f"this run is contract {THIS.major + 1}.x and this collector reads contract {THIS.major}.x"
    assert reads in error["message"]
    assert "upgrade the collector" in error["message"]
    token = httpx.get(f"{served.url}/api/v1/token", headers=served.auth)  # every answer says the contract
    assert token.headers[CONTRACT_HEADER] == str(THIS)


def test_ingest_stores_a_newer_minor_s_file_whole_and_says_what_it_did_not_understand(tmp_path: Path) -> None:
    data = newer_run()
    path = tmp_path / "run.json"
    path.write_text(json.dumps(data))
    db = tmp_path / "ingest.duckdb"
    done = collector_cli("ingest", "--db", str(db), "--create", str(path), str(path))
    assert done.returncode == 0, done.stderr
    assert f"run {data['run_id']} created (2 results)" in done.stdout
    assert f"run {data['run_id']} duplicate (2 results)" in done.stdout
    assert "not understood: benchmark 'attention': its results kept in the stored run only (1 result)" in done.stdout
    with Store(db, read_only=True) as store:
        assert store.run_payload(data["run_id"]) == path.read_text()  # the file as it was, not what was understood
        assert "field fleet_zone: kept in the stored run only" in store.reads().not_understood(data["run_id"])

"""Schemathesis against the collector's own OpenAPI spec, on a real server: no input gets a 5xx.

Every operation gets valid and invalid generated requests (both generation modes), with and without a token.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.servers import Collector, serve_collector

EXAMPLES = 25


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    with serve_collector(Path(tmp_path_factory.mktemp("fuzz")) / "db.duckdb", sql_timeout_s=2.0) as collector:
        yield collector


def _operations(served: Collector) -> list[schemathesis.APIOperation]:
    schema = schemathesis.openapi.from_url(f"{served.url}/openapi.json")
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_generated_request_gets_a_server_error(served: Collector, mode: GenerationMode) -> None:
    failures: list[str] = []
    statuses: dict[str, set[int]] = {}
    operations = _operations(served)
    assert {op.path for op in operations} >= {"/api/v1/runs", "/api/v1/sql", "/api/v1/runs/{run_id}"}
    for operation in operations:

        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None,
                  derandomize=True)  # fmt: skip
        @given(case=operation.as_strategy(generation_mode=mode))
        def check(case: schemathesis.Case) -> None:
            for headers in (served.auth, {}):
                response = case.call(headers=headers, timeout=30)
                statuses.setdefault(f"{case.method} {case.path}", set()).add(response.status_code)
                if response.status_code >= 500:
                    failures.append(
                        f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}"
                    )
                elif response.status_code >= 400 and "json" in response.headers.get("content-type", ""):
                    assert set(response.json()) == {"error"}, response.text[:300]

        try:
            check()
        except Unsatisfiable:
            assert mode is GenerationMode.NEGATIVE  # an operation without inputs has no invalid ones
    assert failures == []
    assert statuses["POST /api/v1/runs"] & {201, 422}, statuses
    assert 400 in statuses["POST /api/v1/sql"] or 422 in statuses["POST /api/v1/sql"]

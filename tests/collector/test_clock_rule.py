"""The clock rule: a run from the future (past the collector's clock and a tolerance) or from a clock never set is
refused with the field named, over HTTP and by ``ingest`` alike, and the agent keeps it with the reason."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx
import pytest

from agent.run.config import UploadConfig
from agent.run.spool import spooled
from agent.run.upload import deliver, new_client
from collector.analysis.parse import MAX_AHEAD
from tests.conftest import collector_cli
from tests.factories import make_run, matmul
from tests.servers import Collector

NOW = datetime.now(timezone.utc)
WRONG = {
    "a clock a year ahead": (NOW + timedelta(days=365), "started_at", "365 days after the collector's clock"),
    "year 9999": (datetime(9999, 1, 1, tzinfo=timezone.utc), "started_at", "after the collector's clock"),
    "a clock never set": (datetime(1970, 1, 1, tzinfo=timezone.utc), "started_at", "the agent's clock was never set"),
}


@pytest.mark.parametrize("case", WRONG)
def test_a_run_with_a_wrong_clock_is_refused_naming_the_field(collector: Collector, case: str) -> None:
    started, field, words = WRONG[case]
    run = make_run([matmul(64, "fp32", 1.0)], started=started)
    answer = httpx.post(f"{collector.url}/api/v1/runs", content=run.model_dump_json(), headers=collector.auth)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["details"][0]["loc"] == field and words in error["message"], error
    assert httpx.get(f"{collector.url}/api/v1/runs", headers=collector.auth).json()["count"] == 0


def test_clocks_a_little_apart_are_tolerated_and_a_refused_run_stays_spooled(
    collector: Collector, tmp_path: Path
) -> None:
    config = UploadConfig(collector_url=collector.url, token=collector.token, spool_dir=tmp_path / "spool")
    ahead = make_run([matmul(64, "fp32", 1.0)], started=NOW + MAX_AHEAD - timedelta(minutes=5))
    future = make_run([matmul(64, "fp32", 2.0)], started=NOW + timedelta(days=365))
    with new_client() as client:
        assert deliver(ahead, config, client).status == "sent"
        kept = deliver(future, config, client)
    assert kept.status == "spooled" and "HTTP 422" in kept.detail and "agent's clock is wrong" in kept.detail
    assert spooled(config.spool_dir) == [kept.path]


def test_ingest_applies_the_same_rule(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(make_run([matmul(64, "fp32", 1.0)], started=datetime(9999, 1, 1, tzinfo=timezone.utc))
                    .model_dump_json())  # fmt: skip
    done = collector_cli("ingest", str(path), "--db", str(tmp_path / "db.duckdb"))
    assert done.returncode == 1 and "started_at" in done.stderr and "after the collector's clock" in done.stderr

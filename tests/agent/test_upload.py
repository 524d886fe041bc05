"""Delivery to a real collector, and the spool that keeps runs the collector did not take."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from agent.config import UploadConfig, default_spool_dir
from agent.spool import spooled
from agent.upload import backoff, deliver, new_client, push
from tests.factories import make_run, matmul
from tests.servers import Collector


def _closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _no_sleep(_: float) -> None:
    return None


def test_spool_honours_xdg_cache_home(tmp_path: Path) -> None:
    assert default_spool_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "flopfleet" / "spool"
    assert default_spool_dir({"HOME": "/home/u"}) == Path("/home/u/.cache/flopfleet/spool")


def test_backoff_grows_and_is_capped() -> None:
    import random

    rng = random.Random(1)
    assert all(0 <= backoff(0, rng) <= 0.5 for _ in range(100))
    assert all(0 <= backoff(10, rng) <= 8.0 for _ in range(100))


def test_a_run_is_sent_once(collector: Collector, tmp_path: Path) -> None:
    run = make_run([matmul(64, "fp32", 1.0)])
    config = UploadConfig(collector_url=collector.url, token=collector.token, spool_dir=tmp_path / "spool")
    with new_client() as client:
        first = deliver(run, config, client, sleep=_no_sleep)
        again = deliver(run, config, client, sleep=_no_sleep)
    assert (first.status, again.status) == ("sent", "duplicate")
    assert spooled(config.spool_dir) == []


def test_an_unreachable_collector_spools_the_run_and_push_sends_it_later(collector: Collector, tmp_path: Path) -> None:
    run = make_run([matmul(64, "fp32", 1.0)])
    down = UploadConfig(collector_url=_closed_port(), spool_dir=tmp_path / "spool", retries=2)
    sleeps: list[float] = []
    with new_client() as client:
        delivery = deliver(run, down, client, sleep=sleeps.append)
    assert delivery.status == "spooled"
    assert "could not be reached" in delivery.detail
    assert len(sleeps) == 2  # retried with backoff before giving up
    (path,) = spooled(down.spool_dir)
    assert json.loads(path.read_text())["run_id"] == str(run.run_id)

    up = UploadConfig(collector_url=collector.url, token=collector.token, spool_dir=down.spool_dir)
    with new_client() as client:
        (sent,) = push(up, client, sleep=_no_sleep)
        listed = client.get(f"{collector.url}/api/v1/runs").json()
    assert sent.status == "sent"
    assert spooled(up.spool_dir) == []
    assert [r["run_id"] for r in listed["data"]] == [str(run.run_id)]


def test_a_spool_file_that_is_not_a_run_stays_and_the_others_still_go(collector: Collector, tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    good = make_run([matmul(64, "fp32", 1.0)])
    (spool / "bad.json").write_text('{"schema_version": 1}')
    (spool / "good.json").write_text(good.model_dump_json())
    config = UploadConfig(collector_url=collector.url, token=collector.token, spool_dir=spool)
    with new_client() as client:
        deliveries = push(config, client, sleep=_no_sleep)
    assert sorted(d.status for d in deliveries) == ["failed", "sent"]
    assert [p.name for p in spooled(spool)] == ["bad.json"]


def test_a_run_the_collector_refuses_stays_spooled_with_its_message(collector: Collector, tmp_path: Path) -> None:
    run = make_run([matmul(64, "fp32", 1.0)])
    config = UploadConfig(collector_url=collector.url, token="not-a-token", spool_dir=tmp_path / "spool")
    with new_client() as client:
        delivery = deliver(run, config, client, sleep=_no_sleep)
        (kept,) = push(config, client, sleep=_no_sleep)
    assert (delivery.status, kept.status) == ("spooled", "spooled")
    assert delivery.detail.startswith("HTTP 401: ") and kept.detail == delivery.detail
    assert spooled(config.spool_dir) == [delivery.path]


def test_a_spool_that_cannot_be_written_is_a_failure_that_says_both_reasons(tmp_path: Path) -> None:
    run = make_run([matmul(64, "fp32", 1.0)])
    (tmp_path / "a-file").write_text("")
    config = UploadConfig(collector_url=_closed_port(), spool_dir=tmp_path / "a-file" / "spool", retries=0)
    with new_client() as client:
        delivery = deliver(run, config, client, sleep=_no_sleep)
    assert (delivery.status, delivery.path) == ("failed", None)
    assert "could not be reached" in delivery.detail
    assert "the run could not be written to the spool at" in delivery.detail and "Not a directory" in delivery.detail

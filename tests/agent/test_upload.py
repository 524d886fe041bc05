"""Delivery to a real collector, and the spool that keeps runs the collector did not take."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from agent.errors import ConfigError
from agent.run.config import UploadConfig, default_spool_dir
from agent.run.spool import spooled
from agent.run.upload import backoff, deliver, new_client, push
from tests.conftest import agent_cli
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


BAD_URLS = {
    "http://[::1": "Invalid IPv6 URL",  # httpx would raise InvalidURL only once the run was measured
    "http://exa mple": "a space",  # a host that cannot exist: the run would wait in the spool forever
    "http://h:99999": "Port out of range",
    "http://a..b:8000": "not a host name",
    "ftp://h": "not http or https",
    "http://user:secret@h": "credentials",
    "http://h/?x=1": "no query",
}


def test_collector_urls_are_parsed_whole() -> None:
    for url, why in BAD_URLS.items():
        with pytest.raises(ConfigError, match=re.escape(why)):
            UploadConfig(collector_url=url)
    for url in ("http://127.0.0.1:8000", "https://collector.example.org/flopfleet/", "http://[::1]:8000",
                "http://flopfleet_collector:8000", "http://ünï.example"):  # fmt: skip
        assert UploadConfig(collector_url=url).collector_url == url


@pytest.mark.parametrize("url", ["http://[::1", "http://exa mple"])
def test_a_bad_collector_url_measures_nothing_and_loses_nothing(url: str, tmp_path: Path) -> None:
    out, spool = tmp_path / "run.json", tmp_path / "spool"
    done = agent_cli("run", "--suite", "quick", "--device", "cpu", "-q", "--collector", url,
                     "--output", str(out), "--spool-dir", str(spool))  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"error: --collector {url!r} is not an http(s) URL"), done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""  # refused before the suite: no summary
    assert not out.exists() and spooled(spool) == []


def test_any_error_while_sending_leaves_the_run_in_the_spool(tmp_path: Path) -> None:
    run = make_run([matmul(64, "fp32", 1.0)])
    config = UploadConfig(collector_url=_closed_port(), spool_dir=tmp_path / "spool", retries=0)
    client = new_client()
    client.close()  # a real client that raises RuntimeError, not a transport error, on every request
    delivery = deliver(run, config, client, sleep=_no_sleep)
    assert delivery.status == "spooled" and "sending failed (RuntimeError: " in delivery.detail, delivery
    (kept,) = push(config, client, sleep=_no_sleep)
    assert (kept.status, kept.detail) == ("spooled", delivery.detail)
    assert spooled(config.spool_dir) == [delivery.path]

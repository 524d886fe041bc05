"""An overloaded collector sheds load: past ``max_posts_in_flight`` a post is answered 429 with Retry-After before
its body is read, the posts in flight finish, and an agent turned away waits as asked and then delivers."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx

from agent.run.config import UploadConfig
from agent.run.upload import deliver, new_client
from tests.factories import make_run, matmul
from tests.servers import serve_collector


def _stalled_post(url: str, token: str) -> socket.socket:
    """A post whose headers arrive and whose body never does: it stays in flight."""
    host, port = url.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)))
    conn.sendall(f"POST /api/v1/runs HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {token}\r\n"
                 "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{".encode())  # fmt: skip
    return conn


def test_past_the_limit_a_post_is_told_to_come_back_and_then_gets_in(tmp_path: Path) -> None:
    run = make_run([matmul(1024, "bf16", 500.0)])
    with serve_collector(tmp_path / "c.duckdb", max_posts_in_flight=1) as site:
        stalled = _stalled_post(site.url, site.token)
        time.sleep(0.5)  # the stalled post is in its handler, reading its body
        answer = httpx.post(f"{site.url}/api/v1/runs", content=run.model_dump_json(),
                            headers={"Authorization": f"Bearer {site.token}"}, timeout=10)  # fmt: skip
        assert answer.status_code == 429 and answer.headers["retry-after"] == "5"
        assert answer.json()["error"]["code"] == "busy"
        sleeps: list[float] = []

        def release(_: float) -> None:  # the agent's wait: the stalled client gives up meanwhile
            sleeps.append(_)
            stalled.close()
            time.sleep(0.5)

        config = UploadConfig(collector_url=site.url, token=site.token, spool_dir=tmp_path / "spool", retries=2)
        with new_client() as client:
            delivery = deliver(run, config, client, sleep=release)
        assert delivery.status == "sent", delivery
        assert sleeps and sleeps[0] >= 5.0  # it waited at least what the collector asked
    assert not (tmp_path / "spool").exists()  # delivered, never spooled

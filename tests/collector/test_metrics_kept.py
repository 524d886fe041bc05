"""A collector that stops keeps each GPU's series in its file, with what they were judged from; the next one answers
its first scrapes with them while it judges the fleet, where it judges from the same (``web.metrics.KeptLines``),
and never where the file changed meanwhile."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx

from collector.read.views import judged_from
from collector.store import Store
from collector.web.metrics import KeptLines
from tests.factories import gpu, make_run, matmul
from tests.fixture_db import build_fixture_db
from tests.servers import serve_collector

#: Where each GPU's series begin on /metrics, after the collector's own.
GPU_SERIES = "# HELP flopfleet_gpu_figure "


def _gpu_series(url: str) -> str:
    text = httpx.get(url + "/metrics", timeout=60).text
    return GPU_SERIES + text.split(GPU_SERIES, 1)[1]


def _kept(db: Path) -> bytes | None:
    with Store(db, read_only=True) as store:
        reads = store.reads()
        return reads.kept_metrics(judged_from(reads))


def test_a_stopped_collector_keeps_its_metrics_for_the_next_until_the_file_changes(tmp_path: Path) -> None:
    db = tmp_path / "fleet.duckdb"
    build_fixture_db(db).close()
    assert _kept(db) is None  # no collector has served it yet
    with serve_collector(db) as site:
        served = _gpu_series(site.url)
    assert (_kept(db) or b"").decode() == served
    with serve_collector(db) as site:  # the next one answers the same, judged or kept
        assert _gpu_series(site.url) == served
    host = "stored-offline"
    with Store(db) as store:  # as `ingest` stores runs with no collector serving the file
        store.add_run(make_run([matmul(8192, "bf16", 700.0)], gpus=[gpu(host=host)], hostname=host))
    assert _kept(db) is None  # judged from less than the file holds now: never answered
    with serve_collector(db) as site:
        assert f'host="{host}"' in _gpu_series(site.url)
    assert f'host="{host}"'.encode() in (_kept(db) or b"")


def test_kept_lines_are_answered_only_while_the_fleet_is_judged() -> None:
    kept = KeptLines()
    assert kept.answer() is None  # a collector not judging at start: its own lines
    kept.start()
    threading.Timer(0.2, kept.loaded, [b"kept"]).start()
    assert kept.answer() == b"kept"  # read from the file meanwhile: waited for
    kept.judged()
    assert kept.answer() is None
    kept.start()
    kept.loaded(None)  # none kept, or not from what this collector judges from
    assert kept.answer() is None

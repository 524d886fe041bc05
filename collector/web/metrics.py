"""Prometheus metrics for one app (its own registry, so several apps can live in one process, as tests do)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, Metric

from ..render.prometheus import GpuExposition
from ..store import Store


class _WriterCounts:
    """The writer's commits and the runs they stored, read from the store when scraped (the store keeps plain
    counts and knows nothing of Prometheus): ``rate(runs) / rate(commits)`` is the mean group, which sets what a
    run costs the writer (docs/results/collector.md, "Cores and agents posting at once")."""

    def __init__(self) -> None:
        self.store: Store | None = None

    def collect(self) -> Iterator[Metric]:
        if self.store is None:
            return
        commits = self.store.commits
        yield CounterMetricFamily("flopfleet_commits", "Commits that stored runs", value=commits.commits_made)
        yield CounterMetricFamily(
            "flopfleet_runs_committed", "Runs stored by those commits (over flopfleet_commits_total: the mean group)",
            value=commits.runs_committed,
        )  # fmt: skip


#: How long a scrape waits for the kept lines to be read as the collector starts (a fraction of a second at 10,000
#: GPUs) before it waits for the fleet's judgement instead.
LOAD_WAIT_S = 10


class KeptLines:
    """Each GPU's series as the last collector on this file wrote them as it stopped (``Store.keep_metrics``), where
    this one judges from what that one did (``read.views.judged_from``): answered while this one judges the fleet at
    start, seconds at 10,000 GPUs that a scrape would otherwise wait; none once it has."""

    def __init__(self) -> None:
        self._body: bytes | None = None
        self._loaded = threading.Event()
        self._judged = threading.Event()
        self._loaded.set()
        self._judged.set()  # nothing to wait for until the collector starts judging

    def start(self) -> None:
        """The collector starts judging its fleet: the kept lines are being read (``loaded``)."""
        self._loaded.clear()
        self._judged.clear()

    def loaded(self, body: bytes | None) -> None:
        """What was kept, or None where nothing was, or not from what this collector judges from."""
        self._body = body
        self._loaded.set()

    def judged(self) -> None:
        """The fleet is judged (or could not be): scrapes answer this collector's own lines from now on."""
        self._judged.set()
        self._loaded.set()
        self._body = None

    def answer(self) -> bytes | None:
        """The kept lines while the fleet is being judged at start; None when there are none to answer."""
        if self._judged.is_set():
            return None
        self._loaded.wait(LOAD_WAIT_S)
        body = self._body
        return None if self._judged.is_set() else body


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "flopfleet_http_requests", "HTTP requests by route and status", ["method", "route", "status"],
            registry=self.registry,
        )  # fmt: skip
        self.latency = Histogram(
            "flopfleet_http_request_duration_seconds", "HTTP request latency", ["method", "route"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10), registry=self.registry,
        )  # fmt: skip
        self.runs = Counter("flopfleet_runs_ingested", "Runs stored, by outcome", ["status"], registry=self.registry)
        self.results = Counter("flopfleet_results_ingested", "Result rows stored", registry=self.registry)
        self.rejected = Counter(
            "flopfleet_payloads_rejected", "Posted runs refused, by reason", ["reason"], registry=self.registry
        )
        self.db_size = Gauge("flopfleet_db_size_bytes", "DuckDB file plus write-ahead log", registry=self.registry)
        self.sql = Counter("flopfleet_sql_queries", "SQL queries, by outcome", ["outcome"], registry=self.registry)
        self.shed = Counter(
            "flopfleet_http_connections_shed", "Idle or stalled connections closed to make room for new ones",
            registry=self.registry,
        )  # fmt: skip
        self.storage_failed = Gauge(
            "flopfleet_storage_failed", "1 while the database cannot be written (see /healthz)", registry=self.registry
        )
        self._writer = _WriterCounts()
        self.registry.register(self._writer)
        #: Each GPU's series, kept between scrapes (``render.prometheus``), and those kept in the file meanwhile.
        self.gpus = GpuExposition()
        self.kept = KeptLines()

    def refusal(self, reason: str, status: int) -> None:
        """A request refused before it reached the app (``http_limits``), counted with the app's own answers."""
        if status:
            self.requests.labels("-", f"(refused: {reason})", str(status)).inc()
        else:
            self.shed.inc()

    def render(self, store: Store) -> bytes:
        self.db_size.set(store.size_bytes())
        self.storage_failed.set(1 if store.failure is not None else 0)
        self._writer.store = store
        return generate_latest(self.registry)

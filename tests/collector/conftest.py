from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixture_db import build_fixture_db
from tests.servers import Collector, serve_collector

SXM = "NVIDIA H100 80GB HBM3 80 GiB · 700 W"
A100 = "NVIDIA A100-SXM4-80GB 80 GiB · 700 W"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Debian's chromium through Playwright, one per test file (the browser tests' files share nothing else)."""
    if CHROMIUM is None:
        if os.environ.get("FLOPFLEET_BROWSER_TESTS") == "required":
            pytest.fail("browser tests need chromium (apt-get install chromium)", pytrace=False)
        pytest.skip("chromium is not installed; .ci/run installs it (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--no-first-run", "--disable-quic"],
        )  # fmt: skip
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """A collector serving the fixture database (tests.fixture_db)."""
    db = Path(tmp_path_factory.mktemp("site")) / "site.duckdb"
    build_fixture_db(db).close()
    with serve_collector(db) as served:
        yield served


class Answer:
    """A reader's SQL answer, read as a DuckDB cursor's would be (tests only)."""

    def __init__(self, rows: list[tuple[object, ...]]) -> None:
        self.rows = rows

    def fetchall(self) -> list[tuple[object, ...]]:
        return self.rows

    def fetchone(self) -> tuple[object, ...] | None:
        return self.rows[0] if self.rows else None


def query(store: object, sql: str) -> Answer:
    """``sql`` through the store's guarded read path, the way a SQL user's query goes."""
    return Answer(store.sql(sql, max_rows=1_000_000).rows)  # type: ignore[attr-defined]


@contextlib.contextmanager
def held_open(db: Path) -> Iterator[None]:
    """``db`` opened for writing by another process, as a running collector holds it, while the block runs."""
    script = f"import duckdb, time; c = duckdb.connect({str(db)!r}); print('ok', flush=True); time.sleep(60)"
    with subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "ok"
            yield
        finally:
            holder.kill()

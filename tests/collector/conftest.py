from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixture_db import build_fixture_db
from tests.servers import Collector, serve_collector

SXM = "NVIDIA H100 80GB HBM3 80 GiB · 700 W"
A100 = "NVIDIA A100-SXM4-80GB 80 GiB · 700 W"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """A collector serving the fixture database (tests.fixture_db)."""
    db = Path(tmp_path_factory.mktemp("site")) / "site.duckdb"
    build_fixture_db(db).close()
    with serve_collector(db) as served:
        yield served

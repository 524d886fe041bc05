"""Report and web-page speed over a large fleet database (default 10,000 runs of 300 results). Prints figures:

    .venv/bin/python benchmarks/collector_pages.py [--runs 10000]

The database is cloned in SQL from 50 real-shaped runs over five GPU models, with the published reference table.
Report times are in-process (best of 3); page times are requests to a running collector on loopback (median of 5
after one warm-up), so they include the server's whole work for a page.
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote, urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fleet_data import fleet_database, make_bodies  # noqa: E402
from benchmarks.serving import CollectorProcess  # noqa: E402
from collector.read.report import build_report  # noqa: E402
from collector.store import Store  # noqa: E402


def timed_get(port: int, path: str, repeats: int = 5) -> tuple[float, int, int]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    times, status, size = [], 0, 0
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        conn.request("GET", path)
        answer = conn.getresponse()
        body = answer.read()
        if i:  # the first request warms caches
            times.append(time.perf_counter() - t0)
        status, size = answer.status, len(body)
    conn.close()
    return statistics.median(times), status, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--db", type=Path, help="keep the fleet database here (built if missing, reused if there)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or Path(tmp) / "fleet.duckdb"
        if not db.exists():
            db.parent.mkdir(parents=True, exist_ok=True)  # a store never creates its folder
            began = time.perf_counter()
            fleet_database(db, make_bodies(50, 300), args.runs)
            print(f"fleet database: built in {time.perf_counter() - began:.0f} s")
        with Store(db, read_only=True) as store:
            runs, results = store.sql("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM results)").rows[0]
            card, device, run_id = store.sql(
                "SELECT card, device_id, run_id FROM device_latest WHERE gpu_name LIKE '%H100 80GB%' LIMIT 1"
            ).rows[0]
            other = store.sql(f"SELECT card FROM cards WHERE card <> '{card}' ORDER BY card LIMIT 1").rows[0]
            print(f"{runs:,} runs, {results:,} results")
            for fmt in ("html", "md"):
                times = []
                for _ in range(3):
                    t0 = time.perf_counter()
                    build_report(store.reads(), fmt)
                    times.append(time.perf_counter() - t0)
                print(f"report --format {fmt:4}  {min(times) * 1000:8.0f} ms  (best of 3; target 1000 ms)")
        server = CollectorProcess(db)
        try:
            compare = urlencode([("cards", card), ("cards", other[0]), ("cards", "A100 (published)")])
            pages = ["/", "/cards", f"/cards/{quote(card)}", f"/gpus/{quote(str(device))}", f"/runs/{run_id}",
                     f"/compare?{compare}", "/health", "/sql?" + urlencode({"sql": "SELECT * FROM cards"}),
                     "/cards.csv", "/health.csv"]  # fmt: skip
            for page in pages:
                median, status, size = timed_get(server.port, page)
                print(f"GET {page[:60]:60} {status} {median * 1000:7.1f} ms  {size / 1024:6.0f} KiB  (target 100 ms)")
        finally:
            server.stop()


if __name__ == "__main__":
    main()

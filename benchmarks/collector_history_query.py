"""What the verdicts' own-history query costs as a fleet database grows, before and after it kept each GPU's history
to the suite of its newest measurement (the suite kept with each value, db_version 4). Prints figures:

    .venv/bin/python benchmarks/collector_history_query.py --runs 10000 100000

Each database is cloned in SQL from 50 real-shaped runs over five GPU models (``fleet_data.fleet_database``, made
once under ``--dir`` and reused); both queries run in one process on the same file, alternating, best of 7.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fleet_data import fleet_database, make_bodies  # noqa: E402
from collector.analysis.health import FIGURE_KEYS  # noqa: E402
from collector.store import Store  # noqa: E402

#: The query before the change: every kept measurement, whichever suite took it.
BEFORE = """SELECT device_id, figure, list(value ORDER BY started_at DESC) FROM health_history
            WHERE figure IN (SELECT unnest(?::VARCHAR[])) GROUP BY device_id, figure"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/fleet"))
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    keys = list(FIGURE_KEYS)
    print("runs     history rows   before (ms)   after (ms)   after/before")
    for runs in args.runs:
        db = args.dir / f"history-{runs}.duckdb"
        if not db.exists():
            fleet_database(db, make_bodies(50, 300), runs)
        with Store(db) as store:
            reads = store.reads()
            rows = reads._rows("SELECT count(*) FROM health_history", [])[0][0]
            before, after = [], []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                reads._rows(BEFORE, [keys])
                before.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                reads.health_history(keys)
                after.append(time.perf_counter() - t0)
        b, a = min(before) * 1e3, min(after) * 1e3
        print(f"{runs:<8d} {rows:>12,d}   {b:11.1f}   {a:10.1f}   {a / b:12.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How long `baseline export`'s healthy query takes over a fleet database (`FleetReads.baseline_measurements`: every
figure of every healthy run, the rows a baseline is built from), and how it grows with the runs kept.

The database is cloned in SQL from a real H200 run (benchmarks/fleet_data.py: five cards, 216 results a run) and kept
at --db, so that another checkout can time the same file side by side (run it from that checkout's root):

    .venv/bin/python benchmarks/baseline_export.py --db /tmp/fleet5k.duckdb --runs 5000
    (cd ../old && /path/to/.venv/bin/python /path/to/benchmarks/baseline_export.py --db /tmp/fleet5k.duckdb)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))  # the checkout timed: the one it is run from

from benchmarks.fleet_data import fleet_database, make_bodies
from collector.store import Store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="built when missing, else reused as it is")
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if not args.db.exists():
        began = time.perf_counter()
        fleet_database(args.db, make_bodies(50, 216), args.runs)
        print(f"built {args.runs} runs in {time.perf_counter() - began:.1f} s")
    with Store(args.db, read_only=True) as store:
        times, rows = [], 0
        for _ in range(args.rounds):
            began = time.perf_counter()
            rows = len(store.reads().baseline_measurements())
            times.append(time.perf_counter() - began)
    print(f"{rows} rows; the healthy query: median {statistics.median(times):.3f} s, "
          f"min {min(times):.3f}, max {max(times):.3f} ({args.rounds} rounds)")  # fmt: skip


if __name__ == "__main__":
    main()

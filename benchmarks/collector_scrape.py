"""``GET /metrics`` of a fleet of N GPUs through a served collector, this checkout's against another's, taking turns.
Prints figures; run on demand:

    .venv/bin/python benchmarks/collector_scrape.py --against ../old                 # 10,000 GPUs, one run each
    .venv/bin/python benchmarks/collector_scrape.py --gpus 1000 3000 10000 --against ../old --dir /tmp/fleets

The fleet is built as benchmarks/collector_million.py builds it (each GPU one health run, figures and summaries
computed), once per size (kept in ``--dir``), and copied for each collector. Each collector (its own process, default
settings) is scraped once right after it starts, when it judges the fleet for the first time, as after every
refresh of a collector taking runs, then ``--repeats`` times more with the verdicts kept: what the exposition itself
costs. A fleet's collector takes runs all day, so in practice most scrapes come after a refresh.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.collector_million import fleet_file  # noqa: E402
from benchmarks.serving import CollectorProcess  # noqa: E402


def scrapes(db: Path, root: Path | None, repeats: int) -> tuple[float, list[float], int]:
    """The first scrape's seconds, the later ones', and the body's bytes."""
    server = CollectorProcess(db, root=root)
    try:
        times = []
        for _ in range(repeats + 1):
            began = time.perf_counter()
            answer = httpx.get(f"{server.url}/metrics", timeout=300)
            times.append(time.perf_counter() - began)
            answer.raise_for_status()
        return times[0], times[1:], len(answer.content)
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, nargs="+", default=[10_000])
    parser.add_argument("--against", type=Path, help="another checkout: its collector takes every other turn")
    parser.add_argument("--rounds", type=int, default=2, help="collectors started per checkout and size")
    parser.add_argument("--repeats", type=int, default=3, help="scrapes after the first, per collector")
    parser.add_argument("--dir", type=Path, help="keep the fleet databases here, and use those found there")
    args = parser.parse_args()
    trees = [("this", None)] + ([("against", args.against.resolve())] if args.against else [])
    with tempfile.TemporaryDirectory() as tmp:
        for gpus in args.gpus:
            fleet = fleet_file(args.dir or Path(tmp), gpus, gpus)
            firsts: dict[str, list[float]] = {name: [] for name, _ in trees}
            later: dict[str, list[float]] = {name: [] for name, _ in trees}
            size = 0
            for i in range(args.rounds * len(trees)):
                name, root = trees[i % len(trees)]
                db = Path(tmp) / f"{name}-{i}.duckdb"
                shutil.copy(fleet, db)
                first, rest, size = scrapes(db, root, args.repeats)
                firsts[name].append(first)
                later[name].extend(rest)
                db.unlink()
            for name, _ in trees:
                print(f"{gpus:>7,} GPUs, {name:7}: first scrape {', '.join(f'{t:.2f}' for t in firsts[name])} s; "
                      f"later {min(later[name]):.2f} / {statistics.median(later[name]):.2f} s (min / median of "
                      f"{len(later[name])}); {size / 1e6:.1f} MB")  # fmt: skip


if __name__ == "__main__":
    main()

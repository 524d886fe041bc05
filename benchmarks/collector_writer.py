"""The collector's writer alone: what one commit of G runs costs DuckDB, without HTTP or validation. Prints figures;
run on demand:

    .venv/bin/python benchmarks/collector_writer.py                      # groups of 1, 2, 4, 8, 16; 1 and 2 threads
    .venv/bin/python benchmarks/collector_writer.py --groups 8 --threads 1 --runs 400

Each line stores ``--runs`` runs of 300 results (built as in collector_ingest.py) in commits of G runs through the
store's own group commit, with the figures computed every FIGURES_EVERY commits as under continuous load, on a
fresh database file, and reports runs/s and the milliseconds per commit. A fit of
those gives the fixed cost of a commit and the cost per run that set the HTTP ingest rate.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fleet_data import make_bodies  # noqa: E402
from collector.store import Store  # noqa: E402
from collector.store.refresher import FIGURES_EVERY  # noqa: E402


def commits(bodies: list[bytes], group: int, threads: int) -> float:
    """Seconds to store ``bodies`` in commits of ``group`` runs."""
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "writer.duckdb", threads=threads) as store:
        began = time.perf_counter()
        for commit, i in enumerate(range(0, len(bodies), group), 1):
            store.add_group(bodies[i : i + group])
            if commit % FIGURES_EVERY == 0:  # as the writer does under continuous load
                store.refresh()
        store.refresh()
        return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--groups", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    bodies = make_bodies(args.runs, 300)
    for threads in args.threads:
        for group in args.groups:
            wall = commits(bodies, group, threads)
            per_commit = wall / (args.runs / group) * 1e3
            print(f"DuckDB threads {threads}, {group:3} runs per commit: {args.runs / wall:7.1f} runs/s, "
                  f"{per_commit:6.1f} ms per commit")  # fmt: skip


if __name__ == "__main__":
    main()

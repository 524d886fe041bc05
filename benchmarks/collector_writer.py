"""The collector's writer alone: what one commit of G runs costs DuckDB, without HTTP or validation. Prints figures;
run on demand:

    .venv/bin/python benchmarks/collector_writer.py                      # groups of 1, 2, 4, 8, 16; 1 and 2 threads
    .venv/bin/python benchmarks/collector_writer.py --groups 8 --threads 1 --runs 400
    .venv/bin/python benchmarks/collector_writer.py --groups 8 --threads 1 --prefill 0 300000   # runs kept before

Each line stores ``--runs`` runs of 300 results (built as in collector_ingest.py) in commits of G runs through the
store's own group commit, with the figures computed every FIGURES_EVERY commits as under continuous load, on a
fresh database file, and reports runs/s and the milliseconds per commit. A fit of
those gives the fixed cost of a commit and the cost per run that set the HTTP ingest rate. What the HTTP path does
before a run reaches the writer (reading its JSON for its id, hashing and compressing it: the validation worker's
and the agent's work) is done before the clock starts.

Each line is followed by collector_ingest.py's raw DuckDB bulk insert of the same runs (one commit, every core),
and gives its rate as a share of that: the most HTTP ingest could reach with a free front end, since every run
it stores goes through this writer.

``--prefill N``: the commits go into a copy of a fleet database already holding N runs (10,000 GPUs' health
runs, generated as benchmarks/collector_million.py does), so a cost that grows with the runs kept shows.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.collector_ingest import raw_insert  # noqa: E402
from benchmarks.collector_million import fleet_file  # noqa: E402
from benchmarks.fleet_data import make_bodies  # noqa: E402
from collector.store import Store  # noqa: E402
from collector.store.commits import Pending  # noqa: E402
from collector.store.refresher import FIGURES_EVERY  # noqa: E402


def commits(bodies: list[bytes], group: int, threads: int, prefilled: Path | None = None) -> float:
    """Seconds to store ``bodies`` in commits of ``group`` runs (into a copy of ``prefilled``, if given)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "writer.duckdb"
        if prefilled is not None:
            shutil.copy(prefilled, db)
        with Store(db, threads=threads) as store:
            return _timed(store, bodies, group)


def _timed(store: Store, bodies: list[bytes], group: int) -> float:
    now = datetime.now(timezone.utc)
    groups = [[Pending.of(b, source="agent", received_at=now) for b in bodies[i : i + group]]
              for i in range(0, len(bodies), group)]  # fmt: skip
    cur = store.connection().cursor()
    began = time.perf_counter()
    for commit, pending in enumerate(groups, 1):
        store.commits.commit(cur, pending)
        if commit % FIGURES_EVERY == 0:  # as the writer does under continuous load
            store.refresh()
    store.refresh()
    took = time.perf_counter() - began
    if failed := [p.run_id for g in groups for p in g if p.done.result().status != "created"]:
        raise SystemExit(f"{len(failed)} runs were not created")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--groups", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--prefill", type=int, nargs="+", default=[0], help="runs in the database before (each)")
    parser.add_argument("--dir", type=Path, help="keep the prefilled databases here, and use those found there")
    args = parser.parse_args()
    bodies = make_bodies(args.runs, 300)
    with tempfile.TemporaryDirectory() as tmp:
        for prefill in args.prefill:
            prefilled = fleet_file(args.dir or Path(tmp), prefill) if prefill else None
            for threads in args.threads:
                for group in args.groups:
                    wall = commits(bodies, group, threads, prefilled)
                    per_commit = wall / (args.runs / group) * 1e3
                    raw = raw_insert(Path(tmp) / f"raw-{prefill}-{threads}-{group}.duckdb", bodies)
                    print(f"{prefill:>9,} runs kept, DuckDB threads {threads}, {group:3} runs per commit: "
                          f"{args.runs / wall:7.1f} runs/s, {per_commit:6.1f} ms per commit; raw bulk right after "
                          f"{args.runs / raw:6.1f} runs/s: the writer at {raw / wall:.0%} of it")  # fmt: skip


if __name__ == "__main__":
    main()

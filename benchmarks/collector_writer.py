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
import json
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fleet_data import make_bodies  # noqa: E402
from collector.store import FIGURES_EVERY, Store, _Pending  # noqa: E402
from collector.validation import compress, digest  # noqa: E402


def commits(bodies: list[bytes], group: int, threads: int) -> float:
    """Seconds to store ``bodies`` in commits of ``group`` runs."""
    pending = [
        _Pending(run_id=json.loads(b)["run_id"], results=300, document=b, payload=compress(b),
                 sha256=digest(b), received_at=datetime.now(timezone.utc), source="agent", token_name=None)
        for b in bodies
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "writer.duckdb", threads=threads) as store:
        cur = store.cursor()
        began = time.perf_counter()
        for commit, i in enumerate(range(0, len(pending), group), 1):
            store._commit_group(cur, pending[i : i + group])
            if commit % FIGURES_EVERY == 0:  # as the writer does under continuous load
                store._compute_figures(cur)
        store._compute_figures(cur)
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

"""What archiving gives back of the database file, and what ``flopfleet-collector compact`` does: a generated
fleet's history archived down to ``--retention-days``, then the file after DuckDB's own ``CHECKPOINT``, ``VACUUM``
and ``FORCE CHECKPOINT``, then after ``compact``. Prints figures; run on demand:

    .venv/bin/python benchmarks/collector_compact.py --fleet 100000:10000 --retention-days 5 --dir /tmp/fleets

The fleet is ``collector_million.fleet_file``'s (built once, kept in ``--dir``), copied before it is archived.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import duckdb

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.collector_million import fleet_file  # noqa: E402
from collector.store import Store  # noqa: E402
from collector.store.compact import compact, free_bytes  # noqa: E402

MiB = 2**20


def _state(db: Path, label: str, began: float | None = None) -> None:
    with duckdb.connect(str(db), read_only=True) as con:
        free = free_bytes(con)
    took = f", {time.perf_counter() - began:.1f} s" if began is not None else ""
    print(f"| {label} | {db.stat().st_size / MiB:,.0f} MiB | {free / MiB:,.0f} MiB{took} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fleet", default="100000:10000", help="RUNS:GPUS")
    parser.add_argument("--retention-days", type=int, default=5)
    parser.add_argument("--dir", type=Path, help="keep the generated fleet here (default: a temporary folder)")
    args = parser.parse_args()
    runs, gpus = (int(n) for n in args.fleet.split(":"))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        db = Path(tmp) / "fleet.duckdb"
        shutil.copyfile(fleet_file(args.dir or Path(tmp), runs, gpus), db)
        print(f"{runs:,} runs of {gpus:,} GPUs, {args.retention_days} days kept\n")
        print("| the file | size | free inside it |\n|---|---:|---:|")
        _state(db, "as generated")
        began = time.perf_counter()
        with Store(db, retention_days=args.retention_days) as store:
            moved = store.archive()
        _state(db, f"{moved:,} runs archived (closed: checkpointed)", began)
        for statement in ("CHECKPOINT", "VACUUM", "FORCE CHECKPOINT"):
            began = time.perf_counter()
            with duckdb.connect(str(db)) as con:
                con.execute(statement)
            _state(db, f"after `{statement}`", began)
        began = time.perf_counter()
        done = compact(db)
        _state(db, f"after `compact` ({done.before / MiB:,.0f} → {done.after / MiB:,.0f} MiB)", began)
        with Store(db, read_only=True) as store:
            kept, every = store.sql("SELECT (SELECT count(*) FROM runs), (SELECT count(*) FROM all_results)").rows[0]
        print(f"\nafter: {kept:,} runs, {every:,} results live and archived (all_results)")


if __name__ == "__main__":
    main()

"""A commit's statements alone, this checkout's against another's, alternating in one process: what a change to the
generated SQL (``collector/store/tables.py``) costs or saves, without HTTP, validation or the writer's thread. Prints
figures; run on demand:

    .venv/bin/python benchmarks/collector_commit_sql.py --against ../old                  # commits of 8 runs
    .venv/bin/python benchmarks/collector_commit_sql.py --against ../old --group 16 --prefill 1000000 --dir /tmp/fleet

Each commit is a group of standard runs (built as in collector_ingest.py) registered as the writer registers them,
then the parse, the four INSERTs and the run summary (the statements of ``GroupCommit``, one call, before its
COMMIT, which is timed apart: the disk's fsync is not the SQL's); the two checkouts' statements take turns, commit by
commit, on one database file (a copy of a fleet of ``--prefill`` runs, if given). The other checkout's statements are
read from it by a child process, so any older commit that has ``parse_sql``, ``insert_sql`` and ``TABLES`` works.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import duckdb
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.collector_million import fleet_file  # noqa: E402
from benchmarks.fleet_data import make_bodies  # noqa: E402
from collector.store import Store  # noqa: E402

#: Printed by a child in a checkout: that checkout's statements of one commit, as JSON.
STATEMENTS = """
import json
from collector.store import aggregates
from collector.store.tables import TABLES, insert_sql, parse_sql
print(json.dumps([parse_sql(new_only=True), *(insert_sql(t) for t in TABLES), aggregates.RUN_SUMMARIES_AT_INSERT]))
"""


def statements(checkout: Path) -> str:
    """The statements of one commit in ``checkout``, joined as the writer sends them (one call)."""
    out = subprocess.run([sys.executable, "-c", STATEMENTS], cwd=checkout, capture_output=True, text=True, check=True)
    return ";\n".join(json.loads(out.stdout))


def incoming(group: list[bytes], seq: int) -> pa.Table:
    """A group as the writer registers it (``GroupCommit.insert``)."""
    now = datetime.now(timezone.utc)
    return pa.table(
        {
            "run_id": pa.array([json.loads(b)["run_id"] for b in group], type=pa.string()),
            "document": pa.array(group, type=pa.string()),
            "payload": pa.array([gzip.compress(b, 1) for b in group], type=pa.binary()),
            "payload_sha256": pa.array(["-"] * len(group), type=pa.string()),
            "received_at": pa.array([now] * len(group), type=pa.timestamp("us", tz="UTC")),
            "source": pa.array(["agent"] * len(group), type=pa.string()),
            "token_name": pa.array([None] * len(group), type=pa.string()),
            "commit_seq": pa.array([seq] * len(group), type=pa.int64()),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", type=Path, required=True, help="another checkout (a worktree of an older commit)")
    parser.add_argument("--group", type=int, default=8, help="runs a commit")
    parser.add_argument("--commits", type=int, default=60, help="commits in all, taking turns")
    parser.add_argument("--prefill", type=int, default=0, help="runs in the database before")
    parser.add_argument("--dir", type=Path, help="keep the prefilled database here, and use one found there")
    args = parser.parse_args()
    sets = {"this": statements(ROOT), "against": statements(args.against.resolve())}
    if sets["this"] == sets["against"]:
        print("(the two checkouts' statements are the same)")
    bodies = make_bodies(args.commits * args.group, 300)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "commits.duckdb"
        if args.prefill:
            shutil.copy(fleet_file(args.dir or Path(tmp), args.prefill), db)
        with Store(db):  # the tables (and a migration's first-open work out of the timing)
            pass
        con = duckdb.connect(str(db))
        con.execute("SET threads = 1")  # the writer's
        sql_s: dict[str, list[float]] = {name: [] for name in sets}
        commit_s: dict[str, list[float]] = {name: [] for name in sets}
        for k in range(args.commits):
            name = ("this", "against")[k % 2]
            con.register("incoming", incoming(bodies[k * args.group : (k + 1) * args.group], 10**9 + k))
            con.begin()
            began = time.perf_counter()
            con.execute(sets[name])
            parsed = time.perf_counter()
            con.commit()
            sql_s[name].append(parsed - began)
            commit_s[name].append(time.perf_counter() - parsed)
            con.unregister("incoming")
        con.close()
    for name in sets:
        sql_ms, commit_ms = statistics.median(sql_s[name]) * 1e3, statistics.median(commit_s[name]) * 1e3
        print(f"{name:8} commits of {args.group} runs beside {args.prefill:,} kept: statements {sql_ms:6.1f} ms, "
              f"COMMIT {commit_ms:5.1f} ms (medians of {len(sql_s[name])})")  # fmt: skip


if __name__ == "__main__":
    main()

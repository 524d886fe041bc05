"""How much memory one reader's SQL query takes, and what bounds it. Prints figures; run on demand:

    .venv/bin/python benchmarks/collector_query_memory.py            # a 20M-row DISTINCT and a 20M-row sort
    .venv/bin/python benchmarks/collector_query_memory.py --rows 5000000

Each line is a child process: a store opened and hardened as ``serve`` does (``db_memory_limit``, external access
off, configuration locked), its writer storing a small run every 50 ms, and one reader's query through the SQL
guard (``Store.sql``) beside it. It reports the process's peak memory growth (ru_maxrss), the query's time, whether
it spilled to ``<db>.tmp``, and the runs the writer could not store meanwhile. The last line asks DuckDB's
per-connection ``operator_memory_limit`` (new in 2.0) on a plain connection, since a hardened store's locked
configuration refuses it on readers' cursors.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERIES = {
    "DISTINCT": "SELECT count(*) FROM (SELECT DISTINCT md5(range::VARCHAR) FROM range({rows}))",
    "ORDER BY": "SELECT sum(length(x)) FROM (SELECT md5(range::VARCHAR) AS x FROM range({rows}) ORDER BY x)",
}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def through_store(limit: str, query: str) -> dict[str, object]:
    from collector.store import Store
    from collector.store.commits import compress, digest
    from collector.web.settings import Settings
    from tests.factories import make_run, matmul

    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "db.duckdb", threads=1) as store:
        store.harden(Settings(db_memory_limit=limit).duckdb_memory_limit())  # auto: 40 % of this machine's memory
        store.warm()
        before, failed, stop = _peak_mb(), [], threading.Event()

        def writer() -> None:
            while not stop.is_set():
                doc = make_run([matmul(64, "fp32", 1.0)]).model_dump_json().encode()
                future = store.submit(doc, run_id=json.loads(doc)["run_id"], results=1, sha256=digest(doc),
                                      payload=compress(doc))  # fmt: skip
                try:
                    future.result(60)
                except Exception as exc:
                    failed.append(type(exc).__name__)
                time.sleep(0.05)

        feeding = threading.Thread(target=writer)
        feeding.start()
        began = time.perf_counter()
        try:
            answer = store.sql(query, timeout_s=600).rows[0][0]
        except Exception as exc:
            answer = f"{type(exc).__name__}: {str(exc)[:80]}"
        took = time.perf_counter() - began
        spilled = (Path(tmp) / "db.duckdb.tmp").exists()
        stop.set()
        feeding.join()
        return {"answer": answer, "peak_mb": _peak_mb() - before, "s": took, "spilled": spilled,
                "failed": len(failed)}  # fmt: skip


def operator_limit(limit: str, query: str) -> dict[str, object]:
    import duckdb

    with tempfile.TemporaryDirectory() as tmp:
        con = duckdb.connect(str(Path(tmp) / "db.duckdb"), config={"threads": 1})
        con.execute(f"SET operator_memory_limit = '{limit}'")
        before, began = _peak_mb(), time.perf_counter()
        answer = con.execute(query).fetchone()[0]  # type: ignore[index]
        took = time.perf_counter() - began
        spilled = (Path(tmp) / "db.duckdb.tmp").exists()
        con.close()
    return {"answer": answer, "peak_mb": _peak_mb() - before, "s": took, "spilled": spilled, "failed": 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--limits", nargs="+", default=["auto", "1GB", "512MB"], help="db_memory_limit values")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)  # kind, limit, query name: a line in a child
    args = parser.parse_args()
    if args.one:
        kind, limit, name = args.one
        query = QUERIES[name].format(rows=args.rows)
        print(json.dumps((through_store if kind == "store" else operator_limit)(limit, query)))
        return
    sys.path.insert(0, str(ROOT))
    from collector.web.settings import Settings

    lines = [("store", limit) for limit in args.limits] + [("operator", "256MB")]
    print(f"one reader's query over {args.rows:,} generated rows, a small run stored every 50 ms beside it")
    print(f"{'':44} {'query':9} {'peak':>8} {'time':>7}  spilled  runs refused")
    for kind, limit in lines:
        for name in QUERIES:
            command = [sys.executable, __file__, "--rows", str(args.rows), "--one", kind, limit, name]
            env = {**os.environ, "PYTHONPATH": str(ROOT)}
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, check=True)
            r = json.loads(done.stdout.strip().splitlines()[-1])
            shown = f"{limit} ({Settings().duckdb_memory_limit()})" if limit == "auto" else limit
            label = f"db_memory_limit {shown}" if kind == "store" else f"plain DuckDB, operator_memory_limit {limit}"
            print(f"{label:44} {name:9} {r['peak_mb']:6.0f}MB {r['s']:6.1f}s  {'yes' if r['spilled'] else 'no':7}"
                  f"  {r['failed']}")  # fmt: skip


if __name__ == "__main__":
    main()

"""How much memory one reader's SQL query takes, and what bounds it. Prints figures; run on demand:

    .venv/bin/python benchmarks/collector_query_memory.py                       # served collectors, posts beside
    .venv/bin/python benchmarks/collector_query_memory.py --compare /tmp/orig   # and another checkout's, alternating
    .venv/bin/python benchmarks/collector_query_memory.py --store               # through the store, no server
    .venv/bin/python benchmarks/collector_query_memory.py --store --rows 5000000

Served (the default): each line is a collector of its own (``flopfleet-collector serve``, its settings as given,
the rest defaults) on a new database, agents posting a run of 300 results every 50 ms over HTTP with a write
token, and one reader's query through ``GET /api/v1/sql`` beside them. It reports the answer (or the error's code),
its time, the collector process's peak memory growth (VmHWM over VmRSS at the start) and the posts answered 201
and not while the query ran. ``--compare DIR`` runs the same lines on the collector of another checkout (e.g.
``git archive <commit> | tar -x -C DIR``), alternating, for a side-by-side figure.

``--store``: each line is a child process: a store opened and hardened as ``serve`` does (``db_memory_limit``,
external access off, configuration locked), its writer storing a small run every 50 ms, and one reader's query
through the SQL guard (``Store.sql``) beside it. It reports the process's peak memory growth (ru_maxrss), the
query's time, whether it spilled to ``<db>.tmp``, and the runs the writer could not store meanwhile. The last line
asks DuckDB's per-connection ``operator_memory_limit`` (new in 2.0) on a plain connection, since a hardened store's
locked configuration refuses it on readers' cursors.
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
#: Served lines' queries: the sort that took about +2.8 GB of a collector's memory in issue 42 (reconstructed: its
#: query was not kept), a DISTINCT of the same kind, and what a page-sized query costs beside them.
SERVED = {
    "sort 100M": "SELECT * FROM range(100000000) ORDER BY random()",
    "DISTINCT 30M": "SELECT count(*) FROM (SELECT DISTINCT md5(range::VARCHAR) FROM range(30000000))",
    "small": "SELECT dtype, count(*), max(tflops) FROM matmul GROUP BY dtype",
}
#: How often agents post beside the query, and the run they post (a new run_id each time).
POST_EVERY_S = 0.05
RESULTS_PER_RUN = 300


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


def _status_mb(pid: int, field: str) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(status.split(f"{field}:")[1].split()[0]) / 1024


def served(root: Path | None, env: dict[str, str], query: str) -> dict[str, object]:
    """One reader's query over HTTP to a collector of ``root``'s checkout while agents post runs beside it."""
    import httpx

    from benchmarks.serving import CollectorProcess
    from collector.web.tokens import TokenStore
    from tests.factories import make_run, matmul

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "db.duckdb"
        token = TokenStore(db).create("bench", ("write", "read"))
        server = CollectorProcess(db, env=env, root=root)
        try:
            pid, stop, posts = server.proc.pid, threading.Event(), []  # (status, seconds, during the query)
            querying = threading.Event()
            before = _status_mb(pid, "VmRSS")

            def agent() -> None:
                with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=300) as client:
                    while not stop.is_set():
                        body = make_run([matmul(64 + i, "fp32", 1.0 + i) for i in range(RESULTS_PER_RUN)])
                        began = time.perf_counter()
                        try:
                            status = client.post(
                                f"{server.url}/api/v1/runs", content=body.model_dump_json()
                            ).status_code
                        except httpx.HTTPError:
                            status = 0
                        posts.append((status, time.perf_counter() - began, querying.is_set()))
                        time.sleep(POST_EVERY_S)

            feeding = threading.Thread(target=agent)
            feeding.start()
            time.sleep(1.0)  # agents posting before the query starts
            querying.set()
            began = time.perf_counter()
            answer = httpx.get(f"{server.url}/api/v1/sql", params={"sql": query}, timeout=900)
            took = time.perf_counter() - began
            querying.clear()
            peak = _status_mb(pid, "VmHWM") - before
            time.sleep(1.0)  # and after it
            stop.set()
            feeding.join()
        finally:
            server.stop()
    body = answer.json()
    said = body["error"]["code"] if answer.status_code != 200 else f"{body['row_count']:,} row(s)"
    during = [p for p in posts if p[2]]
    stored = sum(1 for p in during if p[0] in (200, 201))
    return {"answer": f"{answer.status_code} {said}", "s": took, "peak_mb": peak, "posted": stored,
            "refused": len(during) - stored, "slowest_post_s": max((p[1] for p in during), default=0.0),
            "all_posts_ok": all(p[0] in (200, 201) for p in posts)}  # fmt: skip


def main_served(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(ROOT))
    every = {"FLOPFLEET_SQL_TIMEOUT_S": args.timeout_s} if args.timeout_s else {}
    lines: list[tuple[str, Path | None, dict[str, str]]] = [("this checkout", None, every)]
    if args.compare:
        lines.append((f"{args.compare}", args.compare, every))
    lines += [(f"this checkout, FLOPFLEET_SQL_MEMORY_LIMIT={limit}", None,
               {**every, "FLOPFLEET_SQL_MEMORY_LIMIT": limit}) for limit in args.sql_memory_limits]  # fmt: skip
    if args.timeout_s:
        print(f"every collector with FLOPFLEET_SQL_TIMEOUT_S={args.timeout_s}")
    print(f"one reader's query over HTTP beside agents posting a run of {RESULTS_PER_RUN} results every "
          f"{POST_EVERY_S * 1000:.0f} ms; collector process peak memory over its start (VmHWM - VmRSS)")  # fmt: skip
    print(f"{'collector':52} {'query':13} {'answer':26} {'time':>6} {'peak':>9}  posts 201 / not  slowest post")
    for _ in range(args.repeat):
        for label, root, env in lines:
            for name in args.queries:
                r = served(root, env, SERVED[name])
                print(f"{label:52} {name:13} {r['answer']:26} {r['s']:5.1f}s {r['peak_mb']:+7.0f}MiB "
                      f"{r['posted']:>9} / {r['refused']:<3}  {r['slowest_post_s']:.2f}s"
                      + ("" if r["all_posts_ok"] else "  (posts outside it refused)"), flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", action="store_true", help="through the store in a child process, no server")
    parser.add_argument("--rows", type=int, default=20_000_000, help="--store: generated rows")
    parser.add_argument("--limits", nargs="+", default=["auto", "1GB", "512MB"], help="--store: db_memory_limit values")
    parser.add_argument("--compare", type=Path, help="served: another checkout's collector, alternating with this one")
    parser.add_argument("--queries", nargs="+", choices=list(SERVED), default=list(SERVED), help="served: which")
    parser.add_argument("--sql-memory-limits", nargs="*", default=[], help="served: more lines with these limits")
    parser.add_argument("--repeat", type=int, default=1, help="served: rounds of every line")
    parser.add_argument("--timeout-s", help="served: FLOPFLEET_SQL_TIMEOUT_S of every line (default: the setting's)")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)  # kind, limit, query name: a line in a child
    args = parser.parse_args()
    if not args.store and not args.one:
        main_served(args)
        return
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

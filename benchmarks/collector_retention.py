"""Retention under a steady load: how many due runs the writer archives while runs keep arriving, the share of the
writer's time archiving takes, and what it costs the runs being stored. Prints figures; run on demand:

    .venv/bin/python benchmarks/collector_retention.py                          # 10 runs/s for 16 s, 1,000 due
    .venv/bin/python benchmarks/collector_retention.py --rate 28 --seconds 30
    .venv/bin/python benchmarks/collector_retention.py --compare /tmp/orig     # another checkout, side by side

A database of ``--due`` runs started 40 days ago (300 results each, as collector_ingest.py builds them) is built
once and copied for each line. Each line opens the copy with a 30-day retention (or none, for the baseline) and
submits a new run every 1/``--rate`` s for ``--seconds`` s through the store's own writer (no HTTP, no
validation: the writer's share alone), timing each run from submit to its commit. "archiving" is the time spent in
``retention.archive_batch`` over the load's wall time. Each line is a child process, so ``--compare ROOT`` runs
ROOT's collector (e.g. ``git archive HEAD | tar -x -C /tmp/orig``) in the same invocation.

"archiving" includes writing a batch's files to staging, synced to disk, and publishing them after its commit
(``store/archive``, every run once at every moment): 16-19 % against 13-17 % before that, three rounds of the
first command with ``--compare`` on 2026-12-03 (2 cores), and 15 % against 14 % with ``--rate 28 --seconds 20``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _bodies(count: int, started: datetime, step_s: float) -> list[bytes]:
    from benchmarks.fleet_data import make_bodies

    bodies = []
    for i, body in enumerate(make_bodies(count, 300)):
        run = json.loads(body)
        begin = started + timedelta(seconds=i * step_s)
        run["started_at"], run["finished_at"] = begin.isoformat(), (begin + timedelta(seconds=60)).isoformat()
        bodies.append(json.dumps(run).encode())
    return bodies


def build(db: Path, due: int) -> None:
    """``due`` runs 40 days old, spread over two days (so batches of one day at a time)."""
    from collector.store import Store

    with Store(db) as store:
        old = _bodies(due, datetime.now(timezone.utc) - timedelta(days=41), 2 * 86_400 / max(1, due))
        for i in range(0, len(old), 32):
            store.add_group(old[i : i + 32])
        store.refresh()


def one(db: Path, rate: float, seconds: float, retention: bool, batch: int | None) -> dict[str, float]:
    """One line, in this process: the load, its latencies, what was archived meanwhile."""
    from collector.store import Store
    from collector.store import retention as kept
    from collector.store.commits import compress, digest

    spent = [0.0]
    archive_batch = kept.archive_batch

    def timed(*args: object, **kwargs: object) -> int:
        began = time.perf_counter()
        try:
            return archive_batch(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            spent[0] += time.perf_counter() - began

    kept.archive_batch = timed  # type: ignore[assignment]
    new = _bodies(int(rate * seconds) + 1, datetime.now(timezone.utc) - timedelta(hours=1), 1.0)
    latencies: list[float] = []
    if batch:
        kept.BATCH_RUNS = batch
    with Store(db, retention_days=30 if retention else 0, threads=1) as store:
        store.warm()  # the first archiving pass is due 5 s from here (ARCHIVE_FIRST_S): under the load
        began = time.perf_counter()
        lock = threading.Lock()

        def store_one(body: bytes) -> None:
            sent = time.perf_counter()
            run_id = json.loads(body)["run_id"]
            store.submit(body, run_id=run_id, results=300, sha256=digest(body), payload=compress(body)).result()
            with lock:
                latencies.append(time.perf_counter() - sent)

        waiting = []
        for i, body in enumerate(new):
            pause = began + i / rate - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            t = threading.Thread(target=store_one, args=(body,))
            t.start()
            waiting.append(t)
        for t in waiting:
            t.join()
        wall = time.perf_counter() - began
        archived_in_load = store.sql("SELECT count(*) FROM archived_runs").rows[0][0]
        share = spent[0] / wall
        after = time.perf_counter()
        due = store.sql("SELECT count(*) FROM runs WHERE started_at < now() - INTERVAL 30 DAY").rows[0][0]
        while retention and store.sql("SELECT count(*) FROM archived_runs").rows[0][0] < due:
            if time.perf_counter() - after > 120:
                break
            time.sleep(0.1)
        backlog_s = time.perf_counter() - after
    latencies.sort()
    return {
        "stored": len(latencies),
        "wall_s": wall,
        "archived": archived_in_load,
        "due": due,
        "share": share,
        "p50_ms": 1e3 * statistics.median(latencies),
        "p99_ms": 1e3 * latencies[int(0.99 * (len(latencies) - 1))],
        "max_ms": 1e3 * latencies[-1],
        "rest_s": backlog_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=10.0, help="runs per second")
    parser.add_argument("--seconds", type=float, default=16.0)
    parser.add_argument("--due", type=int, default=1000, help="runs past retention when the load starts")
    parser.add_argument("--compare", type=Path, help="another checkout, measured in the same invocation")
    parser.add_argument("--batch", type=int, nargs="*", default=[], help="runs per archive batch to try")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # a line in a child process
    parser.add_argument("--no-retention", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        batch = args.batch[0] if args.batch else None
        print(json.dumps(one(args.one, args.rate, args.seconds, not args.no_retention, batch)))
        return
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template.duckdb"
        build(template, args.due)
        lines = [
            ("this checkout, no retention", ROOT, False, None),
            ("this checkout, 30-day retention", ROOT, True, None),
        ]
        lines += [(f"this checkout, batches of {b}", ROOT, True, b) for b in args.batch]
        if args.compare:
            lines.append((f"{args.compare}, 30-day retention", args.compare.resolve(), True, None))
        print(f"{args.rate:g} runs/s of 300 results for {args.seconds:g} s; {args.due} runs due at the start")
        print(f"{'':38} {'stored':>6} {'archived':>8} {'archiving':>9} {'p50':>7} {'p99':>7} {'max':>7}  rest")
        for label, root, retention, batch in lines:
            db = Path(tmp) / f"line-{time.monotonic_ns()}.duckdb"
            shutil.copy(template, db)
            command = [sys.executable, str(ROOT / "benchmarks" / "collector_retention.py"), "--one", str(db),
                       "--rate", str(args.rate), "--seconds", str(args.seconds)]  # fmt: skip
            if not retention:
                command.append("--no-retention")
            if batch:
                command += ["--batch", str(batch)]
            env = {**os.environ, "PYTHONPATH": str(root)}
            done = subprocess.run(command, capture_output=True, text=True, cwd=root, env=env, check=True)
            r = json.loads(done.stdout.strip().splitlines()[-1])
            rest = f"{r['rest_s']:.1f} s for the other {r['due'] - r['archived']}" if retention else ""
            print(f"{label:38} {r['stored']:6} {r['archived']:8} {r['share']:9.0%} {r['p50_ms']:5.0f}ms "
                  f"{r['p99_ms']:5.0f}ms {r['max_ms']:5.0f}ms  {rest}")  # fmt: skip


if __name__ == "__main__":
    main()

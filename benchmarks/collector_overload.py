"""The collector past its capacity: many agents posting at once against ``FLOPFLEET_MAX_POSTS_IN_FLIGHT``. Each
client posts its runs one after another and, on 429, waits Retry-After spread by up to half again, as the agent
does (agent/run/upload.py). Per load (clients as a multiple of the limit): how many posts were told to wait, how fast
that answer came, how long accepted posts took, how long the slowest run took to land, and that every run landed.
The same load against a collector without the limit (``--unlimited``, in-flight limit 10,000) shows what the limit
buys: accepted posts stay fast instead of all of them slowing together.

    .venv/bin/python benchmarks/collector_overload.py --limit 4 --loads 1,4,16 --runs 160 --results 100
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fleet_data import make_bodies  # noqa: E402
from benchmarks.serving import CollectorProcess  # noqa: E402
from collector.store import Store  # noqa: E402
from collector.web.tokens import TokenStore  # noqa: E402


def overload(db: Path, bodies: list[bytes], clients: int, limit: int) -> dict[str, float]:
    token = TokenStore(db).create("bench")
    server = CollectorProcess(db, env={"FLOPFLEET_MAX_POSTS_IN_FLIGHT": str(limit)})
    compressed = [gzip.compress(b, 6) for b in bodies]
    accepted: list[float] = []
    refused: list[float] = []
    landed: list[float] = []
    other: list[int] = []
    lock = threading.Lock()

    def client(share: list[bytes]) -> None:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Content-Encoding": "gzip"}
        for body in share:
            first = time.perf_counter()
            while True:
                conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
                t0 = time.perf_counter()
                conn.request("POST", "/api/v1/runs", body=body, headers=headers)
                answer = conn.getresponse()
                answer.read()
                took = time.perf_counter() - t0
                conn.close()
                if answer.status == 429:
                    with lock:
                        refused.append(took)
                    time.sleep(float(answer.getheader("Retry-After") or 1) * random.uniform(1.0, 1.5))
                    continue
                with lock:
                    if answer.status == 201:
                        accepted.append(took)
                    else:
                        other.append(answer.status)
                    landed.append(time.perf_counter() - first)
                break

    threads = [threading.Thread(target=client, args=(compressed[i::clients],)) for i in range(clients)]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - began
    server.stop()
    with Store(db, read_only=True) as store:
        stored = store.sql("SELECT count(*) FROM runs").rows[0][0]
    q = statistics.quantiles(accepted, n=100)
    r = statistics.quantiles(refused, n=100) if len(refused) >= 2 else [float("nan")] * 99
    return {
        "wall_s": wall, "stored": stored, "other": len(other), "refused": len(refused),
        "accepted_p50_ms": q[49] * 1e3, "accepted_p99_ms": q[98] * 1e3,
        "refused_p50_ms": r[49] * 1e3, "refused_p99_ms": r[98] * 1e3, "slowest_landing_s": max(landed),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=4, help="FLOPFLEET_MAX_POSTS_IN_FLIGHT of the limited collector")
    parser.add_argument("--loads", default="1,4,16", help="clients, as multiples of the limit")
    parser.add_argument("--runs", type=int, default=160)
    parser.add_argument("--results", type=int, default=100)
    parser.add_argument("--unlimited", action="store_true", help="also each load against a collector without it")
    args = parser.parse_args()
    bodies = make_bodies(args.runs, args.results)
    print(f"{args.runs} runs x {args.results} results, {statistics.mean(map(len, bodies)) / 1024:.0f} KiB JSON each; "
          f"in-flight limit {args.limit}; clients retry 429 after Retry-After x U(1, 1.5)")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for i, load in enumerate(int(x) for x in args.loads.split(",")):
            clients = load * args.limit
            for limit in (args.limit, *((10_000,) if args.unlimited else ())):
                m = overload(Path(tmp) / f"o{i}-{limit}.duckdb", bodies, clients, limit)
                print(json.dumps({"clients": clients, "limit": limit, **{k: round(v, 2) for k, v in m.items()}}))
                if m["stored"] != args.runs or m["other"]:
                    raise SystemExit(f"runs lost: {m['stored']} of {args.runs} stored, {m['other']} other answers")


if __name__ == "__main__":
    main()

"""``GET /metrics`` of a fleet of N GPUs through a served collector, this checkout's against another's, taking turns.
Prints figures; run on demand:

    .venv/bin/python benchmarks/collector_scrape.py --against ../old                 # 10,000 GPUs, one run each
    .venv/bin/python benchmarks/collector_scrape.py --gpus 1000 3000 10000 --against ../old --dir /tmp/fleets
    .venv/bin/python benchmarks/collector_scrape.py --runs 100000 --posts 50 --against ../old --dir /tmp/fleets
    .venv/bin/python benchmarks/collector_scrape.py --runs 1000000 --restarted --against ../old --dir /tmp/fleets

The fleet is built as benchmarks/collector_million.py builds it (``--runs`` runs over the GPUs, one health run per
GPU by default; figures and summaries computed), once per size (kept in ``--dir``), copied once per checkout and
served once by it, untimed (an older file is brought up to its layout), then copied for each collector. Each
collector (its own process, default settings) is scraped once right after it starts (or ``--wait`` seconds
after), when the fleet is judged for the first time, then ``--repeats`` times more with nothing new. With
``--restarted`` it starts on the file as that first collector left it, the metrics it kept as it stopped in it (a
collector restarted); without, those are removed first (a file no collector of its version stopped on). A fleet
built by this checkout is in its layout, which an older ``--against`` may refuse: build the fleets with the older
checkout's ``collector_million.py`` (this one brings them up to date). Then,
``--refreshes`` times: ``--posts`` runs of GPUs of the fleet picked at random (the template's health run with the
GPU's own id, host and time, every figure a few percent off, the fleet's slow GPUs slow again) are posted with a
writer's token, and after ``--pause`` seconds (the refresher has summarised them) it is scraped: a fleet's collector
takes runs all day, so most scrapes come after a refresh.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.collector_million import (  # noqa: E402
    MODELS,
    SLOW_EVERY,
    document_formats,
    fleet_file,
    fleet_templates,
    gpu_uuid,
)
from benchmarks.serving import CollectorProcess  # noqa: E402
from collector.web.tokens import TokenStore  # noqa: E402
from schemas.api import RUNS_PATH  # noqa: E402

#: How far a posted run's figures are off the template (uniformly, either way), as the fleet's own runs are.
NOISE = 0.02
#: A slow GPU's matmul, as a share of the template's (as the fleet has it: ``collector_million``).
SLOW = 0.6


def fleet_runs(gpus: int, count: int, rng: random.Random) -> list[bytes]:
    """``count`` new health runs of GPUs of a ``gpus``-GPU fleet picked at random, gzip-compressed as the agent
    posts them: the fleet's template for the GPU's model with its own run id, host, GPU and time (now), each figure
    ``NOISE`` off at random, matmul at ``SLOW`` for the fleet's slow GPUs."""
    formats = document_formats(fleet_templates())
    out = []
    for _ in range(count):
        g = rng.randrange(gpus)
        now = datetime.now(timezone.utc)
        run = json.loads(formats[g % len(MODELS)] % {
            "r": str(uuid.uuid4()), "s": now.isoformat(), "e": (now + timedelta(seconds=83)).isoformat(),
            "h": f"node{g // 8:05d}", "u": gpu_uuid(g)})  # fmt: skip
        noise = 1 + rng.uniform(-NOISE, NOISE)
        for result in run["results"]:
            metrics = result.get("metrics") or {}
            for key in ("tflops", "gbps"):
                if metrics.get(key):
                    slow = SLOW if g % SLOW_EVERY == 5 and result["benchmark"] == "matmul" else 1.0
                    metrics[key] *= noise * slow
        out.append(gzip.compress(json.dumps(run).encode()))
    return out


def scrapes(
    db: Path, root: Path | None, repeats: int, posts: list[list[bytes]], pause: float, wait: float = 0.0
) -> tuple[float, list[float], list[float], int]:
    """The first scrape's seconds (``wait`` seconds after the collector is ready), the later ones', those after
    each batch of ``posts``, and the body's bytes."""
    token = TokenStore(db).create("bench") if posts else None
    server = CollectorProcess(db, root=root)
    time.sleep(wait)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Content-Encoding": "gzip"}
    try:
        with httpx.Client(base_url=server.url, timeout=300) as client:
            times = []
            for _ in range(repeats + 1):
                began = time.perf_counter()
                answer = client.get("/metrics")
                times.append(time.perf_counter() - began)
                answer.raise_for_status()
            after = []
            for batch in posts:
                for body in batch:
                    client.post(RUNS_PATH, content=body, headers=headers).raise_for_status()
                time.sleep(pause)
                began = time.perf_counter()
                answer = client.get("/metrics")
                after.append(time.perf_counter() - began)
                answer.raise_for_status()
        return times[0], times[1:], after, len(answer.content)
    finally:
        server.stop()


def served_once(fleet: Path, base: Path, root: Path | None, restarted: bool) -> Path:
    """A copy of ``fleet`` served once by the checkout at ``root`` and stopped: in its layout, and with the metrics
    that collector kept as it stopped (``restarted``) or without them."""
    shutil.copy(fleet, base)
    CollectorProcess(base, root=root).stop()
    if not restarted:
        with duckdb.connect(str(base)) as con:
            if con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'kept_metrics'").fetchone()[0]:  # type: ignore[index]
                con.execute("DELETE FROM kept_metrics")
    return base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, nargs="+", default=[10_000])
    parser.add_argument("--runs", type=int, help="runs in each fleet (default: one per GPU)")
    parser.add_argument("--against", type=Path, help="another checkout: its collector takes every other turn")
    parser.add_argument("--rounds", type=int, default=2, help="collectors started per checkout and size")
    parser.add_argument("--repeats", type=int, default=3, help="scrapes after the first, per collector")
    parser.add_argument("--posts", type=int, default=0, help="runs posted before each scrape after a refresh")
    parser.add_argument("--refreshes", type=int, default=3, help="scrapes after posting, per collector")
    parser.add_argument("--pause", type=float, default=2.0, help="seconds between posting and scraping")
    parser.add_argument(
        "--wait", type=float, default=0.0, help="seconds between a collector's start and its first scrape"
    )
    parser.add_argument("--dir", type=Path, help="keep the fleet databases here, and use those found there")
    parser.add_argument(
        "--restarted", action="store_true", help="start each collector on the metrics the last one kept as it stopped"
    )
    args = parser.parse_args()
    trees = [("this", None)] + ([("against", args.against.resolve())] if args.against else [])
    rng = random.Random(20261206)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for gpus in args.gpus:
            fleet = fleet_file(args.dir or Path(tmp), args.runs or gpus, gpus)
            bases = {name: served_once(fleet, Path(tmp) / f"{name}-base.duckdb", root, args.restarted)
                     for name, root in trees}  # fmt: skip
            firsts: dict[str, list[float]] = {name: [] for name, _ in trees}
            later: dict[str, list[float]] = {name: [] for name, _ in trees}
            refreshed: dict[str, list[float]] = {name: [] for name, _ in trees}
            size = 0
            for i in range(args.rounds * len(trees)):
                name, root = trees[i % len(trees)]
                db = Path(tmp) / f"{name}-{i}.duckdb"
                shutil.copy(bases[name], db)
                posts = [fleet_runs(gpus, args.posts, rng) for _ in range(args.refreshes)] if args.posts else []
                first, rest, after, size = scrapes(db, root, args.repeats, posts, args.pause, args.wait)
                firsts[name].append(first)
                later[name].extend(rest)
                refreshed[name].extend(after)
                for leftover in Path(tmp).glob(db.name + "*"):
                    leftover.unlink()
            for name, _ in trees:
                line = (f"{gpus:>7,} GPUs, {name:7}: first scrape {', '.join(f'{t:.2f}' for t in firsts[name])} s; "
                        f"later {min(later[name]):.2f} / {statistics.median(later[name]):.2f} s (min / median of "
                        f"{len(later[name])})")  # fmt: skip
                if refreshed[name]:
                    line += (f"; after {args.posts} runs posted {min(refreshed[name]):.2f} / "
                             f"{statistics.median(refreshed[name]):.2f} / {max(refreshed[name]):.2f} s (min / median / "
                             f"max of {len(refreshed[name])})")  # fmt: skip
                print(f"{line}; {size / 1e6:.1f} MB")
            for base in bases.values():
                base.unlink()


if __name__ == "__main__":
    main()

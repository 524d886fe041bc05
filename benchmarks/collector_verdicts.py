"""What a refresh costs the kept verdicts, in process: a fleet judged once, then runs stored a batch at a time, and
after each refresh the verdicts brought up to date (``read.verdicts``) and ``/metrics``' per-GPU lines written
(``render.prometheus.GpuExposition``); at the end the kept verdicts against a judgement of the fleet anew. Prints
figures; run on demand:

    .venv/bin/python benchmarks/collector_verdicts.py                             # 10,000 GPUs, 10 runs each
    .venv/bin/python benchmarks/collector_verdicts.py --runs 1000000 --posts 200 --dir /tmp/fleets

The fleet is ``collector_million``'s (``fleet_file``, kept in ``--dir``), copied; the runs are
``collector_scrape.fleet_runs`` (random GPUs of the fleet, a few percent off), stored through ``Store.add_run``.
"""

from __future__ import annotations

import argparse
import gzip
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.collector_million import fleet_file  # noqa: E402
from benchmarks.collector_scrape import fleet_runs  # noqa: E402
from collector.read import views  # noqa: E402
from collector.read.verdicts import KeptVerdicts, kept  # noqa: E402
from collector.render.prometheus import GpuExposition  # noqa: E402
from collector.store import Store  # noqa: E402
from schemas import RunSubmission  # noqa: E402
from schemas.judgement import GpuJudgement  # noqa: E402


def compared(mine: dict[str, GpuJudgement], anew: dict[str, GpuJudgement]) -> str:
    """How kept verdicts differ from verdicts judged anew: levels, failing counts, numbers."""
    levels = failing = differ = 0
    largest = 0.0
    for device, v in anew.items():
        k = mine[device]
        levels += k.level != v.level
        moved = False
        for key, f in k.figures.items():
            g = v.figures[key]
            failing += f.failing != g.failing
            for a, b in zip(f.references, g.references, strict=True):
                largest = max(largest, abs(a.value / b.value - 1), abs(a.line / b.line - 1) if b.line else 0.0)
                moved |= a.value != b.value or a.margin != b.margin
        differ += moved
    return (f"{levels} levels and {failing} counts of failing measurements differ; {differ} verdicts carry other "
            f"numbers, the largest difference {largest:.3%}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=100_000, help="runs in the fleet")
    parser.add_argument("--posts", type=int, default=50, help="runs stored before each refresh")
    parser.add_argument("--refreshes", type=int, default=20)
    parser.add_argument("--dir", type=Path, help="keep the fleet database here, and use the one found there")
    args = parser.parse_args()
    rng = random.Random(20261206)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "verdicts.duckdb"
        shutil.copy(fleet_file(args.dir or Path(tmp), args.runs, args.gpus), db)
        lines = GpuExposition()
        with Store(db) as store:
            began = time.perf_counter()
            data = views.fleet_metrics(store.reads())
            judged = time.perf_counter()
            lines.render(data)
            print(f"{args.gpus:,} GPUs, {args.runs:,} runs: the fleet judged in {judged - began:.2f} s, its metrics "
                  f"written in {time.perf_counter() - judged:.2f} s")  # fmt: skip
            judging, writing, gpus, whole = [], [], [], 0
            for _ in range(args.refreshes):
                for body in fleet_runs(args.gpus, args.posts, rng):
                    store.add_run(RunSubmission.model_validate_json(gzip.decompress(body)))
                store.settle()
                began = time.perf_counter()
                data = views.fleet_metrics(store.reads())
                judged = time.perf_counter()
                lines.render(data)
                judging.append(judged - began)
                writing.append(time.perf_counter() - judged)
                judge = kept(store.reads(), views.baseline_index(store.reads())).judge
                gpus.append(judge.judged)
                whole += judge.whole
            print(f"after each {args.posts} runs ({args.refreshes} refreshes): judged again {min(gpus)}–{max(gpus)} "
                  f"GPUs (median {statistics.median(gpus):.0f}; {whole} models whole) in {min(judging) * 1e3:.0f} / "
                  f"{statistics.median(judging) * 1e3:.0f} / {max(judging) * 1e3:.0f} ms, metrics written in "
                  f"{min(writing) * 1e3:.0f} / {statistics.median(writing) * 1e3:.0f} / {max(writing) * 1e3:.0f} ms "
                  "(min / median / max)")  # fmt: skip
            reads = store.reads()
            fresh = KeptVerdicts(views.baseline_index(reads))
            fresh.follow(reads)
            anew = {v.device: v for v in fresh.verdicts()}
            mine = {v.device: v for v in views.fleet_health(reads)}
            print(f"kept against judged anew after {args.refreshes * args.posts:,} runs: {compared(mine, anew)}")


if __name__ == "__main__":
    main()

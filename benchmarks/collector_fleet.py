"""A generated fleet's pages, report, SQL examples and start, this checkout beside another one (``--against``),
the two collectors taking turns on copies of the same database: what each costs, and how it grows with the GPUs and
with the runs kept. Prints figures; run on demand:

    .venv/bin/python benchmarks/collector_fleet.py --fleets 10000:10000 100000:10000 1000000:10000 \\
        --against ../before --dir /tmp/fleets                          # with the runs kept, at 10,000 GPUs
    .venv/bin/python benchmarks/collector_fleet.py --fleets 10000:1000 30000:3000 100000:10000 \\
        --against ../before --dir /tmp/fleets                          # with the GPUs, at 10 runs a GPU

Each fleet ``RUNS:GPUS`` is ``collector_million.fleet_file``'s (built once and kept in ``--dir``), served from a
copy per checkout made once per invocation (and opened once by that checkout before anything is timed: a first open
brings an older file up to its layout, which the other checkout may not read): ``flopfleet-collector serve`` in its
own process, default settings, one checkout then the other, their order swapped each round (``--rounds``). Each
start is timed to ``/readyz``; each request is made once untimed (the first judges the fleet), then ``--repeats``
times: min and median over all rounds.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlencode

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.collector_million import fleet_file  # noqa: E402
from benchmarks.serving import CollectorProcess  # noqa: E402
from collector.store import Store  # noqa: E402
from collector.store.queries import EXAMPLES  # noqa: E402


@dataclass
class Timed:
    """One request's times (seconds) over every round, its last status and body size."""

    times: list[float] = field(default_factory=list)
    status: int = 0
    size: int = 0

    def cell(self) -> str:
        flag = "" if self.status == 200 else f" ({self.status})"
        lo, med = min(self.times) * 1e3, statistics.median(self.times) * 1e3
        return f"{lo:,.0f} / {med:,.0f} ms{flag}, {self.size / 1024:,.0f} KiB"


#: Per checkout ("before", "after"): each request's times, and each start's seconds to ready.
Sides = dict[str, tuple[dict[str, Timed], list[float]]]


def requests(db: Path) -> list[tuple[str, str]]:
    """(label, path) of what is measured, with a card, GPU, run and host of the fleet."""
    with Store(db, read_only=True) as store:
        card, device, run, host = store.sql(
            "SELECT card, device_id, run_id, hostname FROM device_latest WHERE gpu_name = 'NVIDIA H200' "
            "ORDER BY device_id LIMIT 1"
        ).rows[0]
    sql = [(f"/api/v1/sql: {name}", "/api/v1/sql?" + urlencode({"sql": query})) for name, query in EXAMPLES]
    return [
        ("/", "/"), ("/cards", "/cards"), ("/health", "/health"), ("/health?level=slow", "/health?level=slow"),
        ("/health?host=", "/health?" + urlencode({"host": host})), ("/health?page=50", "/health?page=50"),
        ("/cards/{card}", f"/cards/{quote(card)}"), ("/cards/{card}?page=10", f"/cards/{quote(card)}?page=10"),
        ("/gpus/{uuid}", f"/gpus/{quote(str(device))}"), ("/runs/{id}", f"/runs/{run}"), ("/report", "/report"),
        ("/report.md", "/report.md"), ("/metrics", "/metrics"),
        ("/api/v1/verdicts?host=", "/api/v1/verdicts?" + urlencode({"host": host})),
        ("/sql", "/sql"), *sql,
    ]  # fmt: skip


def measure(db: Path, root: Path, wanted: list[tuple[str, str]], repeats: int, into: dict[str, Timed]) -> float:
    """Serve ``db`` with the checkout at ``root``, time each request into ``into``; the seconds to ready."""
    began = time.perf_counter()
    server = CollectorProcess(db, root=root)
    ready = time.perf_counter() - began
    try:
        with httpx.Client(base_url=server.url, timeout=600) as client:
            for label, path in wanted:
                timed = into.setdefault(label, Timed())
                for n in range(repeats + 1):
                    t0 = time.perf_counter()
                    answer = client.get(path)
                    if n:
                        timed.times.append(time.perf_counter() - t0)
                    timed.status, timed.size = answer.status_code, len(answer.content)
    finally:
        server.stop()
    return ready


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fleets", nargs="+", default=["10000:10000", "100000:10000"], help="RUNS:GPUS each")
    parser.add_argument("--against", type=Path, help="another checkout (its own benchmarks/serving.py serves it)")
    parser.add_argument("--rounds", type=int, default=2, help="times each checkout serves each fleet, in turn")
    parser.add_argument("--repeats", type=int, default=3, help="timed requests per page and round, after one")
    parser.add_argument("--dir", type=Path, help="keep the generated fleets here (default: a temporary folder)")
    args = parser.parse_args()
    sides = [("before", args.against.resolve())] if args.against else []
    sides.append(("after", ROOT))
    fleets = [tuple(int(n) for n in f.split(":")) for f in args.fleets]
    results: dict[tuple[int, ...], Sides] = {}
    labels: list[str] = []
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = args.dir or Path(tmp)
        for runs, gpus in fleets:
            works = {name: Path(tmp) / f"work-{name}-{runs}-{gpus}.duckdb" for name, _ in sides}
            for name, root in sides:  # a first open brings an older file up to its layout: once, untimed
                shutil.copyfile(fleet_file(folder, runs, gpus), works[name])
                if root == ROOT:
                    Store(works[name]).close()  # in this process: a long migration may outlast a server's deadline
                else:
                    CollectorProcess(works[name], root=root).stop()
            wanted = requests(works["after"])
            labels = [label for label, _ in wanted]
            got: Sides = {name: ({}, []) for name, _ in sides}
            results[(runs, gpus)] = got
            for r in range(args.rounds):
                for name, root in sides if r % 2 == 0 else sides[::-1]:
                    timed, ready = got[name]
                    ready.append(measure(works[name], root, wanted, args.repeats, timed))
                    print(f"{runs:,} runs, {gpus:,} GPUs, round {r + 1}, {name}: ready in {ready[-1]:.2f} s",
                          flush=True)  # fmt: skip
            for work in works.values():
                work.unlink()
            report(runs, gpus, got, labels)
            size = fleet_file(folder, runs, gpus).stat().st_size
            print(f"database file: {size / 2**20:,.0f} MiB ({size / runs / 1024:.1f} KiB a run)\n", flush=True)
    if len(fleets) > 1:
        growth(fleets, results, labels)


def report(runs: int, gpus: int, got: Sides, labels: list[str]) -> None:
    names = list(got)
    print(f"\n{runs:,} runs of {gpus:,} GPUs: min / median, body")
    print("| | " + " | ".join(names) + (" | after / before (median) |" if len(names) > 1 else " |"))
    print("|---|" + "---:|" * (len(names) + (len(names) > 1)))
    for label in labels:
        cells = [got[name][0][label].cell() for name in names]
        if len(names) > 1:
            meds = [statistics.median(got[name][0][label].times) for name in names]
            cells.append(f"{meds[-1] / meds[0]:.2f}")
        print(f"| `GET {label}` | " + " | ".join(cells) + " |")
    ready = [", ".join(f"{s:.1f}" for s in got[name][1]) + " s" for name in names]
    print("| `serve` start to ready | " + " | ".join(ready) + (" | |" if len(names) > 1 else " |"))


def growth(fleets: list[tuple[int, ...]], results: dict[tuple[int, ...], Sides], labels: list[str]) -> None:
    """Each request's median, before and after, at each fleet, and the largest fleet's over the smallest's."""
    heads = " | ".join(f"{r:,} runs, {g:,} GPUs" for r, g in fleets)
    print(f"how it grows (median ms, before → after)\n| | {heads} | largest / smallest, before → after |")
    print("|---|" + "---:|" * (len(fleets) + 1))
    for label in labels:
        cells, ratios = [], []
        for side in ("before", "after"):
            lo, hi = _median(results[fleets[0]], side, label), _median(results[fleets[-1]], side, label)
            if lo and hi:
                ratios.append(f"{hi / lo:.1f}x")
        for fleet in fleets:
            b, a = _median(results[fleet], "before", label), _median(results[fleet], "after", label)
            cells.append(f"{b:,.0f} → {a:,.0f}" if b is not None else f"{a:,.0f}")
        print(f"| `GET {label}` | " + " | ".join(cells) + " | " + " → ".join(ratios) + " |")


def _median(got: Sides, side: str, label: str) -> float | None:
    """The median in ms of one request by one checkout; None where that checkout was not measured."""
    timed = got[side][0].get(label) if side in got else None
    return statistics.median(timed.times) * 1e3 if timed else None


if __name__ == "__main__":
    main()

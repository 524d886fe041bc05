"""What a collector's validation costs for a run of a newer minor against one of its own version (docs/contract.md).
Prints figures; run on demand:

    .venv/bin/python benchmarks/contract_newer.py                       # docs/results/h200/standard1.json, 30 rounds
    .venv/bin/python benchmarks/contract_newer.py --run FILE --rounds 50

The same real run is read as sent (this version: strict, one pydantic parse) and as a newer minor's, carrying a field
in every result's timing, a flag on every tenth result and a result of a kind this collector does not know (the
tolerant path: the strict parse fails, the JSON is read again, what is not known left out, the rest validated again
and written out for the store). Both in one process, alternating, medians of ``--rounds``: the figure is their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from collector.analysis.parse import read_run  # noqa: E402
from schemas.contract import THIS  # noqa: E402
from scripts.results_files import read_text  # noqa: E402


def newer(body: bytes) -> bytes:
    data = json.loads(body)
    data["schema_minor"] = THIS.minor + 1
    for i, result in enumerate(data["results"]):
        if result.get("timing"):
            result["timing"]["gpu_busy_share"] = 0.97
        if i % 10 == 0:
            result["flags"] = [*result.get("flags", []), "cold_cache"]
    data["results"].append({**data["results"][0], "benchmark": "attention"})
    return json.dumps(data).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, default=ROOT / "docs" / "results" / "h200" / "standard1.json")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    plain = read_text(args.run).encode()  # the file as committed, gzipped or not: its compact JSON
    later = newer(plain)
    now = read_run(plain).run.started_at  # the clock rule at the run's own time: a stored run may be old
    checked = read_run(later, now=now)
    times: dict[str, list[float]] = {"as sent": [], "newer minor": []}
    for _ in range(args.rounds):
        for name, body in (("as sent", plain), ("newer minor", later)):
            started = time.perf_counter()
            read_run(body, now=now)
            times[name].append(time.perf_counter() - started)
    results = len(read_run(plain, now=now).run.results)
    print(f"{args.run.name}: {results} results, {len(plain) / 1024:.0f} KiB; newer minor: {len(later) / 1024:.0f} KiB, "
          f"{len(checked.not_understood)} kinds of things not understood")  # fmt: skip
    medians = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    for name, ms in medians.items():
        print(f"  {name:12s} {ms:7.2f} ms (median of {args.rounds})")
    print(f"  newer minor / as sent: {medians['newer minor'] / medians['as sent']:.2f}")


if __name__ == "__main__":
    main()

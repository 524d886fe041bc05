"""The cost of one refresh of the figures and summaries (``collector/store/aggregates.py``). Prints figures:

    .venv/bin/python benchmarks/collector_refresh.py [--runs 256] [--group 8]

Stores ``--runs`` real-shaped runs of 300 results in commits of ``--group`` (``Store.add_group``, as the writer
commits them), then times ``Store.refresh`` over all of them; then as many again, so the second refresh merges
into summaries that already hold rows for the same GPUs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.fleet_data import make_bodies  # noqa: E402
from collector.store import Store  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=256)
    parser.add_argument("--group", type=int, default=8)
    args = parser.parse_args()
    bodies = make_bodies(2 * args.runs, 300)
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "refresh.duckdb", threads=1) as store:
        for label, part in (("into empty summaries", bodies[: args.runs]), ("merged", bodies[args.runs :])):
            for i in range(0, len(part), args.group):
                store.add_group(part[i : i + args.group])
            began = time.perf_counter()
            store.refresh()
            took = time.perf_counter() - began
            print(f"refresh of {len(part)} runs {label}: {took * 1000:.0f} ms ({took * 1000 / len(part):.2f} ms/run)")


if __name__ == "__main__":
    main()

"""What each run's windows got of the host: per run file, the cells with a host wait and a device idle share, their
median and largest values, and how many were flagged ``starved`` (agent/timing/starvation.py).

    python benchmarks/host_shares.py RUN.json [RUN.json ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # scripts.results_files: the committed files

from scripts.results_files import read


def shares(path: Path) -> str:
    run = read(path)
    if "results" not in run:
        return f"{path.name}: not a run file"
    ok = [r for r in run["results"] if r["status"] == "ok" and r.get("timing")]
    parts = [f"{path.name}: {len(ok)} ok cells, {sum('starved' in r['flags'] for r in ok)} starved"]
    for key in ("host_wait", "device_idle"):
        values = sorted(r["timing"][key] for r in ok if r["timing"].get(key) is not None)
        if values:
            parts.append(f"{key} in {len(values)}: median {statistics.median(values):.3f}, "
                         f"90th {values[int(0.9 * (len(values) - 1))]:.3f}, max {values[-1]:.3f}")  # fmt: skip
    skipped = [r for r in run["results"] if r["status"] == "skipped"]
    if skipped:
        parts.append(f"{len(skipped)} skipped ({skipped[0]['reason'][:100]})")
    if run.get("interrupted"):
        parts.append(f"interrupted: {run['interrupted']}")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, nargs="+")
    for path in parser.parse_args().runs:
        print(shares(path))


if __name__ == "__main__":
    main()

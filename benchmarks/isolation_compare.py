"""Inline against process isolation, from run files of the same suite on the same GPU (benchmarks/h200_isolation.sh
writes them): the cells each pair of runs agree on, and how far apart the two launchers' figures are beside how far
apart two runs of the same launcher are. Prints Markdown:

    python benchmarks/isolation_compare.py docs/results/h200/isolation
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # scripts.results_files: the committed files

from scripts.results_files import read

Row = dict[str, Any]
#: The figure compared per kind of result.
FIGURE = {"matmul": "tflops", "mamf": "tflops", "layer": "tflops", "bandwidth": "gbps", "transfer": "gbps",
          "training": "tokens_per_s"}  # fmt: skip


def _figures(path: Path) -> dict[tuple[str, str], float]:
    run = read(path)
    out = {}
    for r in run["results"]:
        metric = FIGURE.get(r["benchmark"])
        if r["status"] == "ok" and metric and r.get("metrics"):
            out[(r["name"], json.dumps(r["params"], sort_keys=True))] = float(r["metrics"][metric])
    return out


def _differences(a: dict[tuple[str, str], float], b: dict[tuple[str, str], float]) -> list[float]:
    return [abs(b[k] / a[k] - 1) for k in a.keys() & b.keys() if a[k] > 0]


def _line(label: str, diffs: list[float]) -> str:
    if not diffs:
        return f"| {label} | 0 | | | |"
    within = sum(d <= 0.02 for d in diffs) / len(diffs)
    return f"| {label} | {len(diffs)} | {statistics.median(diffs):.1%} | {max(diffs):.1%} | {within:.0%} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    inline = sorted(args.folder.glob("standard-inline*.json"))
    process = sorted(args.folder.glob("standard-process*.json"))
    runs = {p.stem: _figures(p) for p in (*inline, *process)}
    print("| pair | cells | median difference | largest | within 2 % |")
    print("|---|---:|---:|---:|---:|")
    for a in inline:
        for p in process:
            print(_line(f"{a.stem} vs {p.stem}", _differences(runs[a.stem], runs[p.stem])))
    for group in (inline, process):
        for i in range(len(group) - 1):
            x, y = group[i].stem, group[i + 1].stem
            print(_line(f"{x} vs {y} (same launcher)", _differences(runs[x], runs[y])))


if __name__ == "__main__":
    main()

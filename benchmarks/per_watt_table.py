"""Every figure of one or more run files per watt: the headline, the board's mean power while it was measured (its
energy counter, agent/machine/energy.py), the figure per watt, and the SM clock; a Markdown table for the docs.

    python benchmarks/per_watt_table.py RUN.json [RUN.json ...] [--benchmarks matmul,layer]

With several run files, each cell's per-watt figure is the median over them and the spread (max/min - 1) is shown.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from schemas import RunSubmission  # noqa: E402
from schemas.labels import describe, headline, per_watt  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--benchmarks", default="", help="comma-separated: only these benchmarks")
    args = parser.parse_args()
    wanted = {b for b in args.benchmarks.split(",") if b}
    cells: dict[tuple[str, str], list[tuple[float, str, float, float, str, int | None]]] = defaultdict(list)
    unmeasured: dict[str, int] = defaultdict(int)
    for path in args.runs:
        run = RunSubmission.model_validate_json(path.read_bytes())
        for r in run.results:
            if r.status != "ok" or (wanted and r.benchmark not in wanted):
                continue
            shown, efficiency = headline(r), per_watt(r)
            if shown is None:
                continue
            if efficiency is None or r.timing is None or r.timing.power_w is None:
                unmeasured[r.benchmark] += 1
                continue
            clock = r.state.sm_clock_mhz_median if r.state is not None else None
            cells[(r.benchmark, describe(r))].append(
                (shown[0], shown[1], r.timing.power_w, efficiency[0], efficiency[1], clock)
            )
    print("| benchmark | cell | figure | power W | per watt | spread | SM MHz |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for (benchmark, label), seen in cells.items():
        figure = statistics.median(s[0] for s in seen)
        power = statistics.median(s[2] for s in seen)
        values = [s[3] for s in seen]
        spread = max(values) / min(values) - 1 if len(values) > 1 else 0.0
        clocks = [s[5] for s in seen if s[5] is not None]
        clock_text = f"{statistics.median(clocks):.0f}" if clocks else "-"
        print(f"| {benchmark} | {label} | {figure:,.4g} {seen[0][1]} | {power:.0f} | "
              f"{statistics.median(values):.4g} {seen[0][4]} | {spread:.1%} | {clock_text} |")  # fmt: skip
    if unmeasured:
        print("\nno per-watt figure (no counter update fell in the window, or no headline per watt): "
              + ", ".join(f"{b} {n}" for b, n in sorted(unmeasured.items())))  # fmt: skip


if __name__ == "__main__":
    main()

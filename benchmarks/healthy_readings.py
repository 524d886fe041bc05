"""Healthy readings against the thresholds verdicts hold them to: how often a healthy GPU's figure reads further below
its own other runs, or below GPUs it could share a node with, than the threshold allows.

The spreads that set thresholds (``schemas.verdicts.relative_spread``, a baseline's ``within_gpu``) are medians of
absolute deviations: they do not see a tail of low readings. This prints that tail, and what it does to the two
references a fleet's periodic checks meet besides a baseline (``benchmarks/baseline_leave_one_out.py`` judges that
one). From the runs committed under docs/results/<card>/ that the bundled baseline keeps (``scripts/bundle_baselines``'
rule), on the CPU:

    python benchmarks/healthy_readings.py              # the H200
    python benchmarks/healthy_readings.py --card h100

For each health figure of each suite, GPUs with at least ``SPREAD_MIN_RUNS`` runs:

- spread: the median over GPUs of each one's MAD (relative to its median), and the lowest reading and the 5th
  percentile of every reading's deviation from its GPU's median;
- history: readings more than the threshold below the median of the same GPU's other runs;
- peers: ``--nodes`` nodes of 8 distinct GPUs (of every GPU with a run) drawn at random, one run each: readings more
  than the threshold below the other seven's median, and of those whose GPU has a next run, how many it fails too
  (a re-measurement would confirm them: `slow`).

Each at the rule's least threshold (``MIN_THRESHOLD``) and at the figure's own (``minimum_threshold``).
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.baseline_leave_one_out import used  # noqa: E402
from schemas.health_figures import HEALTH_FIGURES, figure_values  # noqa: E402
from schemas.verdicts import MIN_THRESHOLD, SPREAD_MIN_RUNS, median, minimum_threshold  # noqa: E402
from scripts.bundle_baselines import SHIPPED, SUITES, as_bundled, committed, left_out, stored  # noqa: E402

NODE_GPUS = 8

#: (suite, figure) -> GPU UUID -> its healthy readings, oldest first.
Readings = dict[tuple[str, str], dict[str, list[float]]]


def readings(card: str) -> Readings:
    """Every healthy reading of each health figure, per GPU, in the order the runs started."""
    runs = [as_bundled(c.run) for c in sorted(committed(SHIPPED[card].results), key=lambda c: c.run.started_at)]
    found = stored([run for run in runs if left_out(run) is None])
    out: Readings = {}
    for run in runs:
        if len(run.gpus) != 1 or run.gpus[0].uuid is None or not used(run, found):
            continue
        for (_, figure), value in figure_values(run.results).items():
            out.setdefault((run.suite, figure), {}).setdefault(run.gpus[0].uuid, []).append(value)
    return out


def spread(by_gpu: dict[str, list[float]]) -> tuple[float, float, float] | None:
    """The median over GPUs of each one's MAD, the lowest deviation and the 5th percentile of all deviations."""
    mads, deviations = [], []
    for values in by_gpu.values():
        if len(values) >= SPREAD_MIN_RUNS:
            mid = median(values)
            mads.append(median([abs(v - mid) for v in values]) / mid)
            deviations += [v / mid - 1 for v in values]
    if not mads:
        return None
    deviations.sort()
    return median(mads), deviations[0], deviations[len(deviations) // 20]


def history(by_gpu: dict[str, list[float]], threshold: float) -> tuple[int, int]:
    """Readings more than ``threshold`` below the median of their GPU's other runs, of how many."""
    failing = total = 0
    for values in by_gpu.values():
        if len(values) >= SPREAD_MIN_RUNS:
            for i, v in enumerate(values):
                total += 1
                failing += v < median(values[:i] + values[i + 1 :]) * (1 - threshold)
    return failing, total


def peers(by_gpu: dict[str, list[float]], threshold: float, nodes: int, seed: int) -> tuple[int, int, int, int]:
    """Over ``nodes`` random nodes of ``NODE_GPUS`` GPUs: readings failing their peers' median, of how many; and of
    the failing ones with a next run, how many that run fails too."""
    rng = random.Random(seed)
    gpus = sorted(by_gpu)
    failing = total = confirmable = confirmed = 0
    for _ in range(nodes):
        node = rng.sample(gpus, NODE_GPUS)
        pick = {g: rng.randrange(len(by_gpu[g])) for g in node}
        for g in node:
            line = median([by_gpu[o][pick[o]] for o in node if o != g]) * (1 - threshold)
            total += 1
            if by_gpu[g][pick[g]] < line:
                failing += 1
                if pick[g] + 1 < len(by_gpu[g]):
                    confirmable += 1
                    confirmed += by_gpu[g][pick[g] + 1] < line
    return failing, total, confirmed, confirmable


def table(data: Readings, nodes: int, seed: int) -> list[str]:
    lines = [f"{'suite':8} {'figure':16} {'GPUs':>4} {'MAD':>6} {'lowest':>7} {'p5':>6} {'threshold':>9} "
             f"{'history':>9} {'peers':>12} {'confirmed':>9}"]  # fmt: skip
    for suite in SUITES:
        for key in HEALTH_FIGURES:
            by_gpu = data.get((suite, key), {})
            spreads = spread(by_gpu)
            if spreads is None:
                continue
            mad, low, p5 = spreads
            for threshold in sorted({MIN_THRESHOLD, minimum_threshold(key)}):
                h_fail, h_total = history(by_gpu, threshold)
                if len(by_gpu) > NODE_GPUS:
                    p_fail, p_total, c_fail, c_total = peers(by_gpu, threshold, nodes, seed)
                    peer = f"{p_fail / p_total:6.1%} of {p_total}"
                    again = f"{c_fail}/{c_total}"
                else:
                    peer, again = "—", "—"
                lines.append(f"{suite:8} {key:16} {len(by_gpu):4} {mad:6.2%} {low:+7.1%} {p5:+6.1%} {threshold:9.0%} "
                             f"{f'{h_fail}/{h_total}':>9} {peer:>12} {again:>9}")  # fmt: skip
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--card", choices=sorted(SHIPPED), default="h200", help="whose committed runs")
    parser.add_argument("--nodes", type=int, default=200, help="random nodes of 8 GPUs for the peers")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(
        f"healthy readings of the {args.card.upper()}'s committed runs against the thresholds (history: GPUs "
        f"with {SPREAD_MIN_RUNS}+ runs; peers: {args.nodes} random nodes of {NODE_GPUS} GPUs, seed {args.seed}):"
    )
    print("\n".join(table(readings(args.card), args.nodes, args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

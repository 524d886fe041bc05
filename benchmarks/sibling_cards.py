"""Leave one card out: how a card with no baseline of its own fares against its sibling cards' (schemas/siblings.py).

Each card flopfleet ships a baseline of (``scripts/bundle_baselines.SHIPPED``) is judged as if it had none: with only
the other cards' bundled baselines (the H100 with the H200's, the H200 with the H100's), each of its figures is held
against its siblings' share of the datasheet figure it depends on, times its own. Judged as ``flopfleet-agent check``
judges a first check without a collector (``agent.run.check.judge_locally``: no peers, no history):

1. every GPU's first healthy run of each suite committed under docs/results/<card>/: a level other than ``ok`` is a
   false alarm;
2. every first check made beside a competing process (``benchmarks/baseline_first_checks.py --shares`` or
   ``--duties``: a health profile run with another process on the GPU and its re-measurement), each figure as a
   slowdown from that GPU's healthy median and whether it failed: the smallest slowdown caught, the largest missed.

    python benchmarks/sibling_cards.py        # on the CPU, from the committed runs; exit 1 on a false alarm
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.run.check import judge_locally  # noqa: E402
from schemas import RunSubmission  # noqa: E402
from schemas.baselines import BaselineIndex, parse_bundle  # noqa: E402
from schemas.health_figures import HEALTH_FIGURES, figure_values  # noqa: E402
from schemas.verdicts import GpuVerdict, Level  # noqa: E402
from scripts.bundle_baselines import SHIPPED, Committed, Shipped, as_bundled, committed, left_out  # noqa: E402


def siblings_only(card: Shipped) -> BaselineIndex:
    """The other shipped cards' bundled baselines, as a GPU of ``card`` would meet them with none of its own."""
    others = [s for s in SHIPPED.values() if s.key != card.key and s.output.exists()]
    return BaselineIndex((parse_bundle(s.output.read_bytes()), "bundled") for s in others)


def _uuid(run: RunSubmission) -> str | None:
    return run.gpus[0].uuid if len(run.gpus) == 1 else None


def _busy(run: RunSubmission) -> bool:
    return any((g.other_processes or 0) > 0 for g in run.gpus)


def _figures(run: RunSubmission) -> dict[str, float]:
    return {figure: value for (_, figure), value in figure_values(run.results).items()}


def _cells(verdict: GpuVerdict) -> str:
    return "  ".join(
        f"{f.figure} {f.value / f.baseline - 1:+.1%}/{f.baseline_threshold:.0%}{'!' if f.level is not Level.ok else ''}"
        for f in verdict.figures
        if f.baseline and f.baseline_threshold is not None
    )


def healthy_first(runs: Sequence[Committed], index: BaselineIndex) -> list[tuple[str, GpuVerdict]]:
    """Each GPU's first healthy run of each suite, judged against ``index`` alone."""
    out, seen = [], set()
    for c in runs:
        uuid = _uuid(c.run)
        if uuid is None or left_out(c.run) or _busy(c.run) or (uuid, c.run.suite) in seen:
            continue
        if c.run.tags.get("check") == "remeasure" or not _figures(c.run):
            continue
        seen.add((uuid, c.run.suite))
        (verdict,) = judge_locally([as_bundled(c.run)], index)
        out.append((f"{uuid[-8:]} {c.run.suite:8} {c.path}", verdict))
    return out


def slowed_checks(runs: Sequence[Committed], index: BaselineIndex) -> list[tuple[str, GpuVerdict, dict[str, float]]]:
    """Each first check beside a competing process (its profile run and the re-measurement after it), judged against
    ``index`` alone, with each figure's slowdown from its GPU's healthy median (0.05: 5 % slower)."""
    healthy: dict[tuple[str, str], list[float]] = {}
    for c in runs:
        uuid = _uuid(c.run)
        if uuid and c.run.suite == "health" and not _busy(c.run) and not left_out(c.run):
            for figure, value in _figures(c.run).items():
                healthy.setdefault((uuid, figure), []).append(value)
    out = []
    for i, c in enumerate(runs):
        uuid = _uuid(c.run)
        if uuid is None or c.run.suite != "health" or not _busy(c.run) or c.run.tags.get("check") != "profile":
            continue
        after = next((d.run for d in runs[i + 1 :] if _uuid(d.run) == uuid and d.run.tags.get("check") == "remeasure"
                      and d.run.started_at >= c.run.started_at), None)  # fmt: skip
        check = [as_bundled(c.run)] + ([as_bundled(after)] if after is not None and _busy(after) else [])
        (verdict,) = judge_locally(check, index)
        slower = {f: 1 - v / statistics.median(healthy[(uuid, f)]) for f, v in _figures(c.run).items()
                  if healthy.get((uuid, f))}  # fmt: skip
        out.append((f"{uuid[-8:]} {c.path}", verdict, slower))
    return out


def main() -> int:
    alarms = 0
    for card in SHIPPED.values():
        index = siblings_only(card)
        runs = committed(card.results)
        print(f"\n{card.key}: judged with only {', '.join(sorted(index.cards())) or 'nothing'}")
        first = healthy_first(runs, index)
        for name, verdict in first:
            print(f"  healthy {name:58} {verdict.level.value:7} {_cells(verdict)}")
        bad = sum(v.level is not Level.ok for _, v in first)
        alarms += bad
        print(f"  false alarms: {bad} of {len(first)} healthy first runs")
        caught: list[float] = []
        missed: list[float] = []
        for name, verdict, slower in slowed_checks(runs, index):
            failed = {f.figure for f in verdict.figures if f.level is not Level.ok}
            for figure, by in slower.items():
                if by > 0:  # slower than its healthy median (h2d read faster beside the load on one H100 host)
                    (caught if figure in failed else missed).append(by)
            shown = "  ".join(f"{f} {-by:+.1%}{'!' if f in failed else ''}" for f, by in slower.items()
                              if f in HEALTH_FIGURES)  # fmt: skip
            print(f"  slowed  {name:58} {verdict.level.value:7} exit-level {shown}")
        if caught or missed:
            print(f"  smallest slowdown caught: {min(caught, default=float('nan')):.1%}; largest missed: "
                  f"{max(missed, default=float('nan')):.1%}")  # fmt: skip
    print(f"\nfalse alarms in all: {alarms}")
    return 1 if alarms else 0


if __name__ == "__main__":
    sys.exit(main())

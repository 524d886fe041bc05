"""Leave one GPU out: is a bundled baseline's threshold honest for a GPU of its card it has never seen?

Each GPU's first healthy run of each suite is judged as ``flopfleet-agent check`` judges a first check without a
collector (``agent.run.check.judge_locally``: no peers, no history, only the baseline and the floors) against a
baseline built by ``scripts/bundle_baselines.py`` from the same committed runs less every run of that GPU. A level
other than ``ok`` is a false alarm: every run here is healthy. The checks kept as figures without a UUID
(health-*.json, the H200's), in no baseline, are judged against the whole bundle too. On the CPU, from
docs/results/<card>/ (``scripts/bundle_baselines.SHIPPED``):

    python benchmarks/baseline_leave_one_out.py              # the H200
    python benchmarks/baseline_leave_one_out.py --card h100

Prints, in order: the bundle's health figures with the threshold verdicts hold a GPU to; each GPU's runs, used or
why not; the leave-one-out table; the checks without a UUID; the count of false alarms; then every healthy run of
each GPU judged the same way, each as if it were that GPU's first (the lent machines' checks were each a first check,
against a fresh collector): how often a healthy GPU's later check would alarm (exit 1 if anything alarmed).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.run.check import judge_locally  # noqa: E402
from collector.analysis.baselines import Measurement  # noqa: E402
from schemas import RunSubmission  # noqa: E402
from schemas.baselines import BaselineBundle, BaselineIndex, card_key, gpu_model  # noqa: E402
from schemas.health_figures import HEALTH_FIGURES, figure_values  # noqa: E402
from schemas.judgement import GpuFacts, Measured, judge_gpu  # noqa: E402
from schemas.verdicts import GpuVerdict, Level, baseline_reference  # noqa: E402
from scripts.bundle_baselines import (  # noqa: E402
    SHIPPED,
    SUITES,
    Committed,
    as_bundled,
    bundle_of,
    committed,
    left_out,
    stored,
)
from scripts.results_files import json_files, read  # noqa: E402


def short(uuid: str | None) -> str:
    """A GPU as the tables name it: its UUID's last 8 digits."""
    return (uuid or "?")[-8:]


def used(run: RunSubmission, found: Sequence[Measurement]) -> bool:
    """Whether the export's query kept ``run``: some health figure of it is among the measurements read back (the
    query returns no run id; a figure's value, to twelve digits, is its run's)."""
    kept: dict[tuple[str, str], list[float]] = {}
    for m in found:
        kept.setdefault((m.device, m.figure), []).append(m.value)
    uuid_of: dict[int | None, str | None] = {g.index: g.uuid for g in run.gpus}
    return any(
        any(math.isclose(value, v, rel_tol=1e-12) for v in kept.get((str(uuid_of.get(index)), figure), []))
        for (index, figure), value in figure_values(run.results).items()
    )


@dataclass(frozen=True)
class Judged:
    """One first check (a GPU's first healthy run of a suite), judged against a baseline none of it is from."""

    gpu: str
    suite: str
    path: str
    baseline_gpus: int  # the most GPUs any of its health figures' baselines stands on; 0: none
    level: Level
    #: figure -> (value over the baseline, the baseline's threshold); absent where the figure has no baseline.
    figures: dict[str, tuple[float, float]]

    @property
    def tested(self) -> bool:
        """Whether a baseline judged it at all (a GPU alone in its suite has none once it is left out)."""
        return self.baseline_gpus > 0

    @property
    def false_alarm(self) -> bool:
        return self.tested and self.level is not Level.ok


def _judged(gpu: str, suite: str, path: str, verdict: GpuVerdict, bundle: BaselineBundle | None) -> Judged:
    figures = {f.figure: (f.value / f.baseline, f.baseline_threshold) for f in verdict.figures
               if f.baseline and f.baseline_threshold is not None}  # fmt: skip
    gpus = [f.gpus for card in (bundle.cards if bundle else ()) if card.suite == suite for f in card.figures
            if f.figure in figures]  # fmt: skip
    return Judged(gpu, suite, path, max(gpus, default=0), verdict.level, figures)


def leave_one_out(runs: Sequence[Committed], found: Sequence[Measurement], *, every: bool = False) -> list[Judged]:
    """Each GPU's first healthy run of each suite (``runs`` oldest first; runs of one GPU, as every lent machine's
    here), judged against the baseline of the measurements ``found`` of every other GPU; with ``every``, each of its
    healthy runs, each as if it were its first (a check against a fresh collector, as the lent machines' were)."""
    out, seen = [], set()
    bundles: dict[str, BaselineBundle | None] = {}
    for c in runs:
        uuid = c.run.gpus[0].uuid if len(c.run.gpus) == 1 else None
        if uuid is None or (not every and (uuid, c.run.suite) in seen) or not used(c.run, found):
            continue
        seen.add((uuid, c.run.suite))
        if uuid not in bundles:
            bundles[uuid], _ = bundle_of([m for m in found if m.device != uuid])
        bundle = bundles[uuid]
        (verdict,) = judge_locally([as_bundled(c.run)], BaselineIndex([(bundle, "file")] if bundle else []))
        out.append(_judged(short(uuid), c.run.suite, c.path, verdict, bundle))
    return out


def recorded(bundle: BaselineBundle, folder: Path) -> list[Judged]:
    """The checks kept as figures without their run files (health-*.json: no UUID, so in no baseline): each file's
    first healthy one, judged by the one judge against the whole bundle."""
    if not (folder / "info.json").exists():
        return []
    info = read(folder / "info.json")["gpus"][0]
    model = gpu_model(info["name"], info["memory_bytes"])
    card = card_key(info["name"], info["memory_bytes"], info["power_limit_w"])
    index = BaselineIndex([(bundle, "bundled")])
    out = []
    for path in json_files([folder], "health-*.json"):
        first = next(iter(read(path).get("healthy", [])), None)
        if first is None:
            continue
        facts = GpuFacts(None, 0, info["name"], model, card, "vm", path.name, "health")
        found = {k: Measured((float(v),), "health") for k, v in first["figures"].items() if k in HEALTH_FIGURES}
        verdict = judge_gpu(facts, found, index).wire("agent")
        out.append(_judged("no UUID", "health", path.name, verdict, bundle))
    return out


def thresholds(bundle: BaselineBundle) -> list[str]:
    """Each health figure of the bundle, per suite: value, GPUs, runs, spreads and the threshold verdicts use."""
    index = BaselineIndex([(bundle, "bundled")])
    lines = [f"{'suite':9} {'figure':16} {'value':>9} {'GPUs':>4} {'runs':>4} {'low':>9} {'high':>9} "
             f"{'between':>7} {'within':>7} {'threshold':>9}"]  # fmt: skip
    for card in bundle.cards:
        for f in card.figures:
            if f.figure not in HEALTH_FIGURES or card.suite is None:
                continue
            reference, _ = baseline_reference(index, f.figure, card.card, None, card.suite, {})
            assert reference is not None
            between = "—" if f.between_gpus is None else f"{f.between_gpus:.2%}"
            within = "—" if f.within_gpu is None else f"{f.within_gpu:.2%}"
            lines.append(f"{card.suite:9} {f.figure:16} {f.value:9.1f} {f.gpus:4} {f.runs:4} {f.low or 0:9.1f} "
                         f"{f.high or 0:9.1f} {between:>7} {within:>7} {reference.margin:9.1%}")  # fmt: skip
    return lines


def _why_not(run: RunSubmission, found: Sequence[Measurement]) -> str | None:
    if used(run, found):
        return None
    return left_out(run) or ("no health figure" if not figure_values(run.results) else "left out by the export rule")


def gpus_table(runs: Sequence[Committed], found: Sequence[Measurement]) -> list[str]:
    """Each GPU of the committed runs: how many of its runs of each suite went into the baseline, and which files
    did not, with why (a run with no health figure is not judged here, whatever else it gives the baseline)."""
    lines = []
    for uuid in sorted({g.uuid for c in runs for g in c.run.gpus}, key=str):
        mine = [c for c in runs if any(g.uuid == uuid for g in c.run.gpus)]
        counts = Counter(c.run.suite for c in mine if used(c.run, found))
        why = Counter(f"{c.path} ({reason})" for c in mine if (reason := _why_not(c.run, found)))
        kept = ", ".join(f"{counts[s]} {s}" for s in SUITES if counts[s]) or "none"
        out = "; ".join(f"{what}{f' x{n}' if n > 1 else ''}" for what, n in why.items())
        lines.append(f"{short(uuid)}  runs used: {kept}" + (f"; not: {out}" if out else ""))
    return lines


def table(rows: Sequence[Judged]) -> list[str]:
    """The judged first checks: each figure as its distance from the baseline / the baseline's threshold."""
    lines = [f"{'GPU':8} {'suite':8} {'first healthy run':38} {'GPUs':>4} {'level':7}"
             + "".join(f" {k:>16}" for k in HEALTH_FIGURES)]  # fmt: skip
    for r in rows:
        cells = "".join(f" {f'{r.figures[k][0] - 1:+.1%} / {r.figures[k][1]:.0%}' if k in r.figures else '—':>16}"
                        for k in HEALTH_FIGURES)  # fmt: skip
        level = r.level.value if r.tested else f"({r.level.value})"
        lines.append(f"{r.gpu:8} {r.suite:8} {r.path:38} {r.baseline_gpus:>4} {level:7}{cells}")
    return lines


def failing(row: Judged) -> str:
    """The figures a judged run fails, with how far below the baseline each read and the threshold."""
    below = [f"{k} {ratio - 1:+.1%} / {threshold:.1%}" for k, (ratio, threshold) in row.figures.items()
             if ratio < 1 - threshold]  # fmt: skip
    return ", ".join(below) or "no figure below its threshold"


def lowest(rows: Sequence[Judged]) -> list[str]:
    """Per suite and figure, the judged run that read it lowest against its baseline: how close a healthy GPU came to
    the threshold (or how far past it)."""
    lines = []
    for suite in SUITES:
        for key in HEALTH_FIGURES:
            found = [(r.figures[key], r) for r in rows if r.suite == suite and key in r.figures]
            if found:
                (ratio, threshold), r = min(found, key=lambda x: x[0][0])
                lines.append(f"  {suite:8} {key:16} {ratio - 1:+.1%} / {threshold:.1%}  {r.gpu} {r.path}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--card", choices=sorted(SHIPPED), default="h200", help="whose committed runs")
    args = parser.parse_args()
    card = SHIPPED[args.card]
    runs = committed(card.results)
    found = stored([as_bundled(c.run) for c in runs if left_out(c.run) is None])
    bundle, _ = bundle_of(found, card)
    if bundle is None:
        print("no baseline: no card has enough healthy runs")
        return 1
    print(f"baseline {bundle.name!r} ({bundle.id}), health figures:")
    print("\n".join(thresholds(bundle)))
    print("\nGPUs (UUID's last 8 digits):")
    print("\n".join(gpus_table(runs, found)))
    rows = leave_one_out(runs, found)
    print("\nleave one GPU out: each figure over the baseline of the other GPUs / that baseline's threshold; GPUs: "
          "how many it stands on ((level): none, not a test)")  # fmt: skip
    print("\n".join(table(rows)))
    kept = recorded(bundle, card.results)
    print("\nchecks kept without their run files (no UUID, in no baseline), against the whole bundle:")
    print("\n".join(table(kept)))
    tested = [r for r in rows if r.tested]
    alarms = [r for r in [*tested, *kept] if r.false_alarm]
    print(
        f"\nfalse alarms: {sum(r.false_alarm for r in tested)} of {len(tested)} first runs judged against a "
        f"baseline without their GPU; {sum(r.false_alarm for r in kept)} of {len(kept)} checks kept without a UUID"
    )
    for r in alarms:
        print(f"  {r.gpu} {r.suite} {r.path}: {r.level.value} on {failing(r)}")
    every = [r for r in leave_one_out(runs, found, every=True) if r.tested]
    again = [r for r in every if r.false_alarm]
    print(f"every healthy run, each judged as a first check: {len(again)} false alarms of {len(every)}")
    for r in again:
        print(f"  {r.gpu} {r.suite} {r.path}: {r.level.value} on {failing(r)}")
    print("the lowest healthy run of each figure, over its baseline / that baseline's threshold:")
    print("\n".join(lowest(every)))
    return 1 if alarms or again else 0


if __name__ == "__main__":
    sys.exit(main())

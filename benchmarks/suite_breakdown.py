"""Where one run's wall time went: start-up, each measuring process's start, and per benchmark the cases' set-up,
warm-up, graph capture and timed repeats, and the hand-offs between cases.

    python benchmarks/suite_breakdown.py RUN.json [--launched EPOCH --exited EPOCH] [--top 10] [--short]
    python benchmarks/suite_breakdown.py COLD.json --beside WARM.json [--top 10]   # two runs side by side

``--launched`` and ``--exited`` (seconds since the epoch, e.g. ``date +%s.%N`` around the agent's command) add the
moments the run file cannot know: the command's launch and its exit after posting. A run file from an agent with
the run timeline (``timeline``, each result's ``started_s``/``finished_s``, the timing phases) is broken down
exactly; an older one from its cases' durations and timing statistics alone (warm-up and capture then together:
what is not ``repeats x calls x median`` of a measurement).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # scripts.results_files: the committed files

from scripts.results_files import read

Doc = dict[str, Any]


@dataclass
class Family:
    """One benchmark's cases, their time split by phase (seconds, summed over cases)."""

    name: str
    cases: int = 0
    case_s: float = 0.0  # in the measuring process, from receiving the case to its answer
    setup_s: float = 0.0  # building inputs and models, checking results: the case outside its measurement
    warmup_s: float = 0.0
    capture_s: float = 0.0
    repeats_s: float = 0.0
    wait_s: float = 0.0  # handed over before its measuring process was ready (still importing, setting up)
    handoff_s: float = 0.0  # the rest of the agent's side beyond the case: pipes, finishing the result


@dataclass
class Breakdown:
    wall_s: float | None  # launch to exit
    startup_s: float | None  # launch (or the process's start) to the run's clock
    run_s: float
    after_s: float | None  # the run's clock stopped to exit (posting, the process's end)
    families: list[Family]
    processes: list[dict[str, Any]] = field(default_factory=list)
    between_s: float | None = None  # in the run, neither in a case nor handing one over
    launch_to_process_s: float | None = None
    slowest: list[tuple[float, str]] = field(default_factory=list)
    exact: bool = False  # the run carried its timeline

    @property
    def cases_s(self) -> float:
        return sum(f.case_s for f in self.families)


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _label(r: Doc) -> str:
    p = r["params"]
    keys = ("model", "dtype", "op", "direction", "pinned", "mode", "phase", "batch", "seq_len", "n", "elements",
            "implementation")  # fmt: skip
    return str(r["name"]) + " " + " ".join(f"{k}={p[k]}" for k in keys if k in p)


def _waited(started: float, finished: float, processes: list[Doc]) -> float:
    """How long a case handed over at ``started`` waited for a measuring process that became ready meanwhile."""
    ready = [p["ready_s"] for p in processes if p.get("ready_s") is not None and started < p["ready_s"] < finished]
    return max(ready) - started if ready else 0.0


def breakdown(run: Doc, launched: float | None = None, exited: float | None = None, top: int = 10) -> Breakdown:
    started, finished = _epoch(run["started_at"]), _epoch(run["finished_at"])
    timeline = run.get("timeline")
    processes = list(timeline.get("processes", ())) if timeline else []
    families: dict[str, Family] = {}
    slowest = []
    for r in run["results"]:
        f = families.setdefault(r["name"], Family(r["name"]))
        f.cases += 1
        duration = r.get("duration_s") or 0.0
        f.case_s += duration
        t = r.get("timing")
        if t:
            measured = t["total_s"]
            if t.get("warmup_s") is not None:
                f.warmup_s += t["warmup_s"]
                f.capture_s += t.get("capture_s") or 0.0
                f.repeats_s += max(measured - t["warmup_s"] - (t.get("capture_s") or 0.0), 0.0)
            else:
                repeats = t["repeats"] * t["calls_per_repeat"] * t["median_s"]
                f.repeats_s += repeats
                f.warmup_s += max(measured - repeats, 0.0)
            f.setup_s += max(duration - measured, 0.0)
        else:
            f.setup_s += duration
        if r.get("started_s") is not None and r.get("finished_s") is not None:
            waited = _waited(r["started_s"], r["finished_s"], processes)
            f.wait_s += waited
            f.handoff_s += max(r["finished_s"] - r["started_s"] - duration - waited, 0.0)
        slowest.append((duration, _label(r)))
    slowest.sort(reverse=True)
    run_s = finished - started
    result = Breakdown(
        wall_s=exited - launched if launched is not None and exited is not None else None,
        startup_s=started - launched if launched is not None else None,
        run_s=run_s,
        after_s=exited - finished if exited is not None else None,
        families=list(families.values()),
        slowest=slowest[:top],
    )
    if timeline:
        result.exact = True
        result.startup_s = timeline["run_started_s"]
        if launched is not None:
            result.launch_to_process_s = (started - timeline["run_started_s"]) - launched
            result.startup_s = started - launched
        result.processes = processes
        handed = sum(f.case_s + f.wait_s + f.handoff_s for f in result.families)
        result.between_s = max(run_s - handed, 0.0)
    else:
        result.between_s = max(run_s - result.cases_s, 0.0)
    return result


def _s(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


_PHASES = ("case_s", "setup_s", "warmup_s", "capture_s", "repeats_s", "wait_s", "handoff_s")
_HEADS = ("case s", "set-up", "warm-up", "capture", "repeats", "waiting", "hand-off")


def render(b: Breakdown, short: bool = False) -> str:
    phases = by_phase(b)
    lines = [
        f"wall {_s(b.wall_s)} s = start-up {_s(b.startup_s)} + run {b.run_s:.2f} + after the run {_s(b.after_s)} "
        f"(posting, exit); in the run: cases {b.cases_s:.2f} s, waiting for a measuring process "
        f"{phases['wait_s']:.2f} s, hand-offs {phases['handoff_s']:.2f} s, elsewhere {_s(b.between_s)} s"
        + ("" if b.exact else " (no timeline in this run: waits and hand-offs are in 'elsewhere')"),
    ]
    for p in b.processes:
        lines.append(
            f"  {p['name']}: started {_s(p['started_s'])} s, imported {_s(p.get('imported_s'))}, ready "
            f"{_s(p.get('ready_s'))}, stopped {_s(p.get('stopped_s'))} (from the agent's start; "
            f"{len(p.get('modules', ()))} modules to import)"
        )
    lines.append(f"  {'benchmark':18s} {'cases':>5s} " + " ".join(f"{h:>8s}" for h in _HEADS))
    rows = [(f.name, f.cases, [getattr(f, k) for k in _PHASES]) for f in b.families]
    rows.append(("all", sum(f.cases for f in b.families), [phases[k] for k in _PHASES]))
    lines += [f"  {name:18s} {cases:5d} " + " ".join(f"{v:8.2f}" for v in values) for name, cases, values in rows]
    if not b.exact:
        lines.append("  (warm-up column: warm-up and graph capture together)")
    if not short:
        lines.append("slowest cases:")
        lines += [f"  {seconds:6.2f} s  {what}" for seconds, what in b.slowest]
    return "\n".join(lines)


def by_phase(b: Breakdown) -> dict[str, float]:
    """The run's seconds per phase, summed over benchmarks (for tables and tests)."""
    out: dict[str, float] = defaultdict(float)
    for f in b.families:
        for key in _PHASES:
            out[key] += getattr(f, key)
    return {key: out[key] for key in _PHASES}


def _case_seconds(run: Doc) -> dict[str, float]:
    """Each case's seconds in its measuring process, by label (a label twice: summed)."""
    out: dict[str, float] = defaultdict(float)
    for r in run["results"]:
        out[_label(r)] += r.get("duration_s") or 0.0
    return dict(out)


def side_by_side(first: Doc, second: Doc, top: int = 10) -> str:
    """Where two runs' time went, beside each other (a cold run and a warm one, say): the run's parts, each measuring
    process's milestones, each benchmark's phases, and the cases whose time differs most."""
    a, b = breakdown(first), breakdown(second)

    def row(name: str, x: float | None, y: float | None) -> str:
        diff = f"{y - x:+8.2f}" if x is not None and y is not None else ""
        return f"  {name:34s} {_s(x):>8s} {_s(y):>8s} {diff:>8s}"

    lines = [f"  {'seconds':34s} {'first':>8s} {'second':>8s} {'diff':>8s}", row("start-up", a.startup_s, b.startup_s),
             row("run", a.run_s, b.run_s), row("cases", a.cases_s, b.cases_s)]  # fmt: skip
    theirs = {p["name"]: p for p in b.processes}
    for p in a.processes:
        q = theirs.get(p["name"], {})
        lines += [row(f"{p['name']} {what}", p.get(f"{what}_s"), q.get(f"{what}_s")) for what in ("imported", "ready")]
    families = {f.name: f for f in b.families}
    for f in a.families:
        g = families.get(f.name)
        if not f.case_s and not (g and g.case_s):  # skipped or absent in both (one GPU: no collectives)
            continue
        for key, head in zip(_PHASES[:3], _HEADS[:3], strict=True):
            lines.append(row(f"{f.name} {head}", getattr(f, key), getattr(g, key) if g else None))
    x, y = _case_seconds(first), _case_seconds(second)
    moved = sorted(((y[k] - x[k], k) for k in x.keys() & y.keys()), key=lambda d: -abs(d[0]))[:top]
    lines.append("cases whose time differs most (first, second, diff):")
    lines += [f"  {x[k]:6.2f} {y[k]:6.2f} {d:+6.2f} s  {k}" for d, k in moved]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run", type=Path)
    parser.add_argument("--launched", type=float, help="when the agent's command was launched (epoch seconds)")
    parser.add_argument("--exited", type=float, help="when it exited, the run posted (epoch seconds)")
    parser.add_argument("--top", type=int, default=10, help="how many of the slowest cases to list")
    parser.add_argument("--short", action="store_true", help="leave out the slowest cases")
    parser.add_argument("--beside", type=Path, help="a second run (a warm one beside a cold one): both, side by side")
    args = parser.parse_args()
    run = read(args.run)
    if args.beside is not None:
        print(side_by_side(run, read(args.beside), args.top))
        return
    print(render(breakdown(run, args.launched, args.exited, args.top), args.short))


if __name__ == "__main__":
    main()

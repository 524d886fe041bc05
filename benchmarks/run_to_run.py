"""The run-to-run table of two run files: every cell measured in both that took at least ``--min-ms``, its median in
each and the difference, worst first, with the flags that say why a cell cannot be held to the limit (a pageable
copy is ``host_bound``: the host's memory and scheduler set its pace), then a summary line.

    python benchmarks/run_to_run.py RUN_A.json RUN_B.json [--min-ms 1] [--limit 3] [--top 20]

Reads the run files as plain JSON (any agent version's), so it compares runs of the code before and after a change.
A flag explains a difference only where both runs carry it. ``--power-cap-rule`` applies the agent's own
``power_capped`` rule (agent/machine/nvml.py) to each result's GPU state, for runs posted before the flag existed:
the data the rule was chosen on (docs/methodology.md, "Cells the power limit sets").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the agent's rule, for --power-cap-rule; run files

from scripts.results_files import read

#: Flags that explain a difference: the cell measures something besides the GPU (a busy host: starved), its warm-up
#: never settled, or the board's power limit set its clock (power_capped).
EXPLAINED = ("host_bound", "unsettled", "busy", "parallel", "throttled", "starved", "power_capped")
#: Param keys that name a cell for people, in this order.
LABEL_KEYS = ("model", "dtype", "op", "direction", "pinned", "mode", "phase", "implementation", "batch", "seq_len",
              "n", "elements", "bytes")  # fmt: skip


@dataclass(frozen=True)
class Cell:
    """One cell measured in both runs."""

    name: str
    label: str
    a_s: float
    b_s: float
    flags: tuple[str, ...]  # in either run
    in_both: tuple[str, ...]
    methods: tuple[str, str]
    clocks: tuple[int | None, int | None]

    @property
    def difference(self) -> float:
        """B against A, relative to the faster of the two (as h200_report's repeatability)."""
        return (self.b_s - self.a_s) / min(self.a_s, self.b_s)

    @property
    def explained(self) -> tuple[str, ...]:
        return tuple(f for f in self.in_both if f in EXPLAINED)


@dataclass(frozen=True)
class Comparison:
    cells: list[Cell]  # worst first
    limit: float
    only_in_one: int

    @property
    def above(self) -> list[Cell]:
        return [c for c in self.cells if abs(c.difference) > self.limit]

    @property
    def unexplained(self) -> list[Cell]:
        return [c for c in self.above if not c.explained]

    def summary(self) -> str:
        if not self.cells:
            return "no cell of the size asked for was measured in both runs"
        diffs = sorted(abs(c.difference) for c in self.cells)
        p90 = diffs[min(len(diffs) - 1, int(0.9 * len(diffs)))]
        return (
            f"{len(self.cells)} cells in both runs; median difference {statistics.median(diffs):.2%}, 90th percentile "
            f"{p90:.2%}, worst {diffs[-1]:.2%}; {len(self.above)} above {self.limit:.0%}, of which "
            f"{len(self.above) - len(self.unexplained)} flagged with why ({', '.join(EXPLAINED)}) and "
            f"{len(self.unexplained)} not"
        )


def label(params: dict[str, Any]) -> str:
    parts = []
    for key in LABEL_KEYS:
        if key not in params or params[key] is None:
            continue
        value = params[key]
        if key == "pinned":
            parts.append("pinned" if value else "pageable")
        elif key in ("batch", "seq_len", "n"):
            parts.append(f"{ {'batch': 'b', 'seq_len': 's', 'n': 'n'}[key] }={value}")
        elif key in ("elements", "bytes"):
            parts.append(f"{value * (4 if key == 'elements' else 1) / 2**20:g} MiB")
        else:
            parts.append(str(value))
    return " ".join(parts)


def cell_key(result: dict[str, Any]) -> tuple[str, Any, str]:
    """What names a cell in both runs: its benchmark, its GPU and its params."""
    return result["name"], result.get("gpu_index"), json.dumps(result["params"], sort_keys=True)


def with_power_cap_rule(run: dict[str, Any]) -> dict[str, Any]:
    """The run with ``power_capped`` worked out again by the agent's rule from each result's GPU state."""
    from agent.machine.nvml import power_capped
    from schemas import Gpu, StateSummary

    gpus = {g["index"]: Gpu.model_construct(**g) for g in run.get("gpus", ())}  # any version's: read, not validated
    results = []
    for r in run["results"]:
        state, gpu = r.get("state"), gpus.get(r.get("gpu_index"))
        flags = [f for f in r.get("flags", ()) if f != "power_capped"]
        summary = StateSummary.model_validate_json(json.dumps(state)) if state else None
        if summary is not None and power_capped(summary, gpu) and "throttled" not in flags:
            flags.append("power_capped")
        results.append({**r, "flags": flags})
    return {**run, "results": results}


def compare(a: dict[str, Any], b: dict[str, Any], *, min_s: float = 1e-3, limit: float = 0.03) -> Comparison:
    """The cells of two run documents (``RunSubmission`` JSON) that are ``ok`` in both and took ``min_s`` or more."""
    others = {cell_key(r): r for r in b["results"] if r["status"] == "ok"}
    cells, only = [], 0
    for r in a["results"]:
        if r["status"] != "ok":
            continue
        s = others.get(cell_key(r))
        if s is None:
            only += 1
            continue
        t1, t2 = r["timing"]["median_s"], s["timing"]["median_s"]
        if min(t1, t2) < min_s:
            continue
        clocks = tuple((x.get("state") or {}).get("sm_clock_mhz_median") for x in (r, s))
        cells.append(Cell(
            name=r["name"], label=label(r["params"]), a_s=t1, b_s=t2,
            flags=tuple(dict.fromkeys((*r.get("flags", ()), *s.get("flags", ())))),
            in_both=tuple(f for f in r.get("flags", ()) if f in s.get("flags", ())),
            methods=(r["timing"]["method"], s["timing"]["method"]), clocks=(clocks[0], clocks[1]),
        ))  # fmt: skip
    cells.sort(key=lambda c: abs(c.difference), reverse=True)
    return Comparison(cells, limit, only)


def render(comparison: Comparison, top: int | None = None) -> str:
    head = (
        "| benchmark | cell | ms (A) | ms (B) | B vs A | flags | timing A / B | SM MHz A / B |\n"
        "|---|---|---:|---:|---:|---|---|---|"
    )
    rows = [
        f"| {c.name} | {c.label} | {c.a_s * 1e3:.3f} | {c.b_s * 1e3:.3f} | {c.difference:+.2%}"
        f"{' **' if abs(c.difference) > comparison.limit and not c.explained else ''} | {', '.join(c.flags)} | "
        f"{c.methods[0]} / {c.methods[1]} | {c.clocks[0] or ''} / {c.clocks[1] or ''} |"
        for c in comparison.cells[:top]
    ]
    return "\n".join([head, *rows, "", comparison.summary()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--min-ms", type=float, default=1.0, help="leave out cells faster than this (default 1)")
    parser.add_argument("--limit", type=float, default=3.0, help="percent difference called out (default 3)")
    parser.add_argument("--top", type=int, default=None, help="print only the worst N rows (the summary counts all)")
    parser.add_argument("--power-cap-rule", action="store_true", help="work power_capped out again from the states")
    args = parser.parse_args()
    runs = [read(p) for p in (args.a, args.b)]
    if args.power_cap_rule:
        runs = [with_power_cap_rule(run) for run in runs]
    print(render(compare(*runs, min_s=args.min_ms / 1e3, limit=args.limit / 100), args.top))


if __name__ == "__main__":
    main()

"""A graded competing process's first checks, judged again against the bundled baseline as it stands now.

``baseline_first_checks.py --shares`` keeps every run its checks made (``--runs``) and which runs each check was
(``--out``: a check's first run and its re-measurement). A bundle that grew since (more GPUs: tighter thresholds)
judges the same figures differently; this judges each check's runs again by the one judge, as a first check without a
collector does (``agent.run.check.judge_locally``: the re-measurement confirms or clears the first run), against the
card's bundle in schemas/data/. On the CPU, from the committed files:

    cd docs/results/h100/call2-runs && python ../../../../benchmarks/shares_judged.py shares.json shares-runs.json

Prints, per check (the healthy ones, then each share with and without a collector): the level and exit code now, and
each health figure against the baseline with its threshold (``!`` where it fails). baseline_first_checks.py keeps
no run of a check made without a collector: those lines say so.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent.run.check import judge_locally  # noqa: E402
from schemas import RunSubmission  # noqa: E402
from schemas.baselines import BaselineIndex, bundled  # noqa: E402
from schemas.health_figures import HEALTH_FIGURES  # noqa: E402
from schemas.verdicts import EXIT_CODES, GpuVerdict  # noqa: E402
from scripts.bundle_baselines import as_bundled  # noqa: E402
from scripts.results_files import read  # noqa: E402


def _field(saved: dict[str, Any], name: str) -> Any:
    """A field of the checks' file (baseline_first_checks.py wrote some as Python reprs)."""
    value = saved.get(name)
    return ast.literal_eval(value) if isinstance(value, str) else value


def checks(saved: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """Each check's label and its run ids, first run first: the healthy ones, the lone ones, then each share's."""
    out = [(f"healthy {i + 1}", c["run_ids"]) for i, c in enumerate(_field(saved, "healthy") or [])]
    out += [(f"lone {i + 1}", c["run_ids"]) for i, c in enumerate(_field(saved, "lone") or [])]
    for share, by in (_field(saved, "shares") or {}).items():
        out += [(f"{float(share):.1%} {mode}", by[mode]["run_ids"]) for mode in ("collector", "agent") if mode in by]
    return out


def judged(checks_file: Path, runs_file: Path, index: BaselineIndex) -> list[tuple[str, GpuVerdict | None]]:
    """Each check of ``checks_file`` (its label) judged again from its runs in ``runs_file`` against ``index``; None
    where its runs were not kept."""
    saved = read(checks_file)
    runs = {str(r.run_id): r for r in (RunSubmission.model_validate_json(json.dumps(d))
                                       for d in read(runs_file))}  # fmt: skip
    out: list[tuple[str, GpuVerdict | None]] = []
    for label, ids in checks(saved):
        found = [as_bundled(runs[i]) for i in reversed(ids) if i in runs]  # newest first
        out.append((label, judge_locally(found, index)[0] if found else None))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checks", type=Path, help="baseline_first_checks.py's --out file")
    parser.add_argument("runs", type=Path, help="baseline_first_checks.py's --runs file")
    args = parser.parse_args(argv)
    index = BaselineIndex([(b, "bundled") for b in bundled()])
    names = list(HEALTH_FIGURES)
    print(f"{'check':<22} {'level':<8} exit " + " ".join(f"{n:>17}" for n in names))
    for label, verdict in judged(args.checks, args.runs, index):
        if verdict is None:
            print(f"{label:<22} (its runs are not in {args.runs.name})")
            continue
        by = {f.figure: f for f in verdict.figures}
        cells = []
        for n in names:
            f = by.get(n)
            if f is None or not f.baseline or f.baseline_threshold is None:
                cells.append(f"{'—':>17}")
                continue
            mark = "!" if f.level.value != "ok" else " "
            cells.append(f"{f.value / f.baseline - 1:+6.1%} / {f.baseline_threshold:4.0%} {mark}".rjust(17))
        print(f"{label:<22} {verdict.level.value:<8} {EXIT_CODES[verdict.level]:>4} " + " ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

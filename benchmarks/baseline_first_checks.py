"""What a GPU's very first ``flopfleet-agent check`` says with nothing but the bundled baseline (run on a GPU machine).

1. ``--healthy N`` first checks, each against a fresh collector of its own (no peers, no history: only the baselines
   bundled with flopfleet), and ``--lone N`` with no collector at all (the agent judges against the bundled
   baseline itself, as on a rented GPU): each one's level, exit code, figures, whether a figure was measured again.
   None should be flagged.
2. For each ``--duties`` duty cycle, a competing process (``benchmarks/gpu_hog.py --duty``) shares the GPU during one
   first check against a fresh collector (``--when-busy measure``): its figures against the healthy checks' median and
   its level, so the smallest slowdown a first check catches is measured. The GPU's settings are never touched.
3. For each ``--shares`` share, the hog that takes that share of the GPU's time (``gpu_hog.py --share``: one kernel of
   ``--kernel-us`` per period), during one first check against a fresh collector and one with no collector: the
   same figures and levels, graded finely where the duty cycles jump from a few percent to 28 %.
4. The healthy checks' runs, stored in one collector and exported (``baseline export``), imported into a second
   collector: the slowed runs judged there and against the bundled baseline alone, level by level.

    python benchmarks/baseline_first_checks.py --healthy 5 --lone 2 --duties 0.3,0.5,0.7,0.9 --out baseline.json
    python benchmarks/baseline_first_checks.py --healthy 3 --lone 1 --duties "" --shares 0.02,0.05,0.08 \
        --out shares.json --runs shares-runs.json

Every run posted is kept in ``--runs`` (one JSON list) for the docs: committed under docs/results/h200/, its healthy
profile runs join the bundled baseline as one more GPU (scripts/bundle_baselines.py; the slowed ones have another
process on the GPU and are left out).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.serving import CollectorProcess  # noqa: E402
from collector.web.tokens import TokenStore  # noqa: E402
from schemas.health_figures import HEALTH_FIGURES  # noqa: E402

FIGURES = tuple(HEALTH_FIGURES)


def _check(url: str | None, token: str | None, spool: Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    start = time.perf_counter()
    target = ("--collector", url, "--token", token or "") if url else ()
    command = [sys.executable, "-m", "agent", "check", "--json", "--spool-dir", str(spool), *target, *extra]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    wall = time.perf_counter() - start
    try:
        body = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"wall_s": round(wall, 2), "exit_code": done.returncode, "error": done.stderr[-2000:]}
    verdict = body["verdicts"][0] if body["verdicts"] else {}
    figures = {f["figure"]: f for f in verdict.get("figures", [])}
    return {
        "wall_s": round(wall, 2),
        "exit_code": done.returncode,
        "level": body["level"],
        "judged_by": verdict.get("judged_by"),
        "remeasured": len(body["runs"]) > 1,
        "run_ids": body["runs"],
        "notes": body["notes"],
        "reasons": verdict.get("reasons", []),
        "baseline": verdict.get("baseline"),
        "figures": {k: figures[k]["value"] for k in FIGURES if k in figures},
        "baseline_values": {k: figures[k].get("baseline") for k in FIGURES if k in figures},
        "baseline_thresholds": {k: figures[k].get("baseline_threshold") for k in FIGURES if k in figures},
    }


class Fresh:
    """A collector on a new, empty database (only the bundled baselines), and its admin token."""

    def __init__(self, work: Path, name: str) -> None:
        self.db = work / f"{name}.duckdb"
        self.token = TokenStore(self.db).create(name)
        self.server = CollectorProcess(self.db, root=ROOT)
        self.url = self.server.url

    def runs(self, run_ids: list[str]) -> list[dict[str, Any]]:
        headers = {"Authorization": f"Bearer {self.token}"}
        return [httpx.get(f"{self.url}/api/v1/runs/{r}", headers=headers, timeout=30).json() for r in run_ids]

    def stop(self) -> None:
        self.server.stop()
        self.server.proc.wait(30)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "collector", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)  # fmt: skip


def _levels(db: Path, runs: list[dict[str, Any]]) -> dict[str, str]:
    """Each run ingested into the collector at ``db`` alone (a copy per run: each is a first run), its level."""
    levels = {}
    for run in runs:
        copy = db.with_name(f"{db.stem}-{run['run_id'][:8]}.duckdb")
        copy.write_bytes(db.read_bytes())
        path = copy.with_suffix(".json")
        path.write_text(json.dumps(run))
        _cli("ingest", "--db", str(copy), str(path))
        done = _cli("health", "--db", str(copy), "--format", "json")
        verdicts = json.loads(done.stdout)
        levels[run["run_id"]] = verdicts[0]["level"] if verdicts else "none"
    return levels


def handed_on(work: Path, healthy: list[dict[str, Any]], slowed: list[dict[str, Any]]) -> dict[str, Any]:
    """The healthy runs as a fleet's baseline (``baseline export``), imported into a second collector: the slowed
    runs judged there and against the bundled baseline alone."""
    fleet = work / "fleet.duckdb"
    for run in healthy:
        path = work / f"{run['run_id']}.json"
        path.write_text(json.dumps(run))
        _cli("ingest", "--db", str(fleet), str(path))
    exported = _cli("baseline", "export", "--db", str(fleet), "--name", "h200-today", "--suite", "health")
    found: dict[str, Any] = {"exit_code": exported.returncode, "stderr": exported.stderr[-1500:]}
    if exported.returncode != 0:
        return found
    bundle = work / "today.baseline.json"
    bundle.write_text(exported.stdout)
    found["bundle"] = json.loads(exported.stdout)
    second, bundled_only = work / "second.duckdb", work / "bundled.duckdb"
    _cli("import-reference", "--db", str(bundled_only))  # a new collector's file: bundled baselines only
    imported = _cli("baseline", "import", "--db", str(second), str(bundle))
    found["import"] = imported.stdout + imported.stderr
    found["levels"] = {"exported": _levels(second, slowed), "bundled": _levels(bundled_only, slowed)}
    return found


def fractions(text: str, *, name: str, whole: bool) -> list[float]:
    """A comma-separated list of fractions (``--duties``, ``--shares``): each in (0, 1), or (0, 1] where ``whole``."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        value = float(item)
        if not (0 < value <= 1 if whole else 0 < value < 1):
            raise ValueError(f"{name}: {item} is not in (0, 1{']' if whole else ')'}")
        out.append(value)
    return out


def healthy_median(checks: list[dict[str, Any]]) -> dict[str, float]:
    """Each figure's median over the healthy first checks (with and without a collector)."""
    found = {k: [c["figures"][k] for c in checks if k in c.get("figures", {})] for k in FIGURES}
    return {k: statistics.median(v) for k, v in found.items() if v}


def against(figures: dict[str, float], reference: dict[str, float | None]) -> dict[str, float]:
    """Each figure over its reference value (the healthy median, or the baseline the check held it against)."""
    return {k: round(v / ref, 4) for k, v in figures.items() if (ref := reference.get(k))}


def hog_command(*, duty: float | None = None, share: float | None = None, n: int = 8192, kernel_us: float = 50.0,
                kernel: str = "spin") -> list[str]:  # fmt: skip
    """``benchmarks/gpu_hog.py`` for a duty cycle (bf16 matmuls of ``n``) or a share (one kernel per period)."""
    hog = [sys.executable, str(ROOT / "benchmarks" / "gpu_hog.py")]
    if share is not None:
        return [*hog, "--share", str(share), "--kernel-us", str(kernel_us), "--kernel", kernel]
    return [*hog, "--duty", str(duty), "--n", str(n)]


class Hog:
    """A competing process, started and ready (what it printed until ``hog ready``: its calibration) and stopped
    (what it printed after: what it launched)."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
        assert self.proc.stdout is not None
        self.said: list[str] = []
        for line in self.proc.stdout:
            if line.strip() == "hog ready":
                break
            self.said.append(line.strip())
        else:
            self.proc.communicate(timeout=30)
            raise RuntimeError(f"the hog ended before it was ready (exit {self.proc.returncode}): {self.said}")

    def stop(self) -> list[str]:
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=30)
        self.said += [x.strip() for x in out.splitlines() if x.strip()]
        return self.said


def slowed_check(
    work: Path, name: str, medians: dict[str, float], collector: bool
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One first check while a hog runs (``--when-busy measure``), against a fresh collector or none: its result,
    with its figures against the healthy median and against its baseline, and the runs the collector kept."""
    runs: list[dict[str, Any]] = []
    if collector:
        site = Fresh(work, name)
        try:
            result = _check(site.url, site.token, work / "spool", ("--when-busy", "measure"))
            runs = site.runs(result.get("run_ids", []))
        finally:
            site.stop()
    else:
        result = _check(None, None, work / "spool", ("--when-busy", "measure"))
    result["vs_healthy"] = against(result.get("figures", {}), dict(medians))
    result["vs_baseline"] = against(result.get("figures", {}), result.get("baseline_values", {}))
    return result, runs


def share_rows(report: dict[str, Any]) -> list[str]:
    """The shares' first checks, one line each: each figure's change from the healthy median, level and exit code,
    whether a figure was measured again, and the hog's calibration."""
    lines = [f"{'share':>6} {'judged by':10}" + "".join(f" {k:>12}" for k in FIGURES) + "  level / exit  again"]
    for share, where in report.get("shares", {}).items():
        for who, r in where.items():
            if who == "hog":
                continue
            vs = r.get("vs_healthy", {})
            cells = "".join(f" {f'{vs[k] - 1:+.1%}' if k in vs else '—':>12}" for k in FIGURES)
            lines.append(f"{float(share):>6.1%} {who:10}{cells}  {r.get('level')} / {r.get('exit_code')}"
                         f"{'':6}{'yes' if r.get('remeasured') else 'no'}")  # fmt: skip
        lines += [f"{'':17}{line}" for line in where.get("hog", []) if line.startswith(("calibration", "hog done"))]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--healthy", type=int, default=5)
    parser.add_argument("--lone", type=int, default=2)
    parser.add_argument("--duties", default="0.3,0.5,0.7,0.9")
    parser.add_argument("--hog-n", type=int, default=8192)
    parser.add_argument("--shares", default="", help="Shares of the GPU's time for gpu_hog.py --share, e.g. 0.02,0.05")
    parser.add_argument("--kernel-us", type=float, default=50.0, help="The share hog's kernel length, in µs.")
    parser.add_argument("--hog-kernel", choices=("spin", "matmul"), default="spin", help="The share hog's kernel.")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=Path, required=True)
    args = parser.parse_args()
    try:
        duties = fractions(args.duties, name="--duties", whole=True)
        shares = fractions(args.shares, name="--shares", whole=False)
    except ValueError as exc:
        parser.error(str(exc))
    work = Path(tempfile.mkdtemp(prefix="flopfleet-baseline-"))
    report: dict[str, Any] = {"healthy": [], "lone": [], "duties": {}, "shares": {}}
    kept: list[dict[str, Any]] = []

    def save() -> None:
        args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")
        args.runs.write_text(json.dumps(kept), encoding="utf-8")

    healthy_runs: list[dict[str, Any]] = []
    for i in range(args.healthy):
        site = Fresh(work, f"healthy{i}")
        try:
            result = _check(site.url, site.token, work / "spool")
            runs = site.runs(result.get("run_ids", []))
        finally:
            site.stop()
        healthy_runs += runs[-1:]  # the profile (a re-measurement would come first)
        kept += runs
        report["healthy"].append(result)
        print(f"healthy first check {i + 1}: {json.dumps(result)}", flush=True)
        save()
    for i in range(args.lone):
        result = _check(None, None, work / "spool")
        report["lone"].append(result)
        print(f"no collector {i + 1}: {json.dumps(result)}", flush=True)
        save()
    medians = healthy_median(report["healthy"] + report["lone"])
    report["healthy_median"] = medians
    slowed: list[dict[str, Any]] = []
    for duty in duties:
        hog = Hog(hog_command(duty=duty, n=args.hog_n))
        try:
            result, runs = slowed_check(work, f"duty{duty}", medians, collector=True)
        finally:
            hog.stop()
        slowed += runs[-1:]
        kept += runs
        report["duties"][str(duty)] = result
        print(f"duty {duty}: {json.dumps(result)}", flush=True)
        save()
    for share in shares:
        hog = Hog(hog_command(share=share, kernel_us=args.kernel_us, kernel=args.hog_kernel))
        print(f"share {share}: {' '.join(hog.said)}", flush=True)
        where: dict[str, Any] = {}
        try:
            for who, collector in (("collector", True), ("agent", False)):
                where[who], runs = slowed_check(work, f"share{share}", medians, collector=collector)
                kept += runs
                print(f"share {share}, {who}: {json.dumps(where[who])}", flush=True)
        finally:
            where["hog"] = hog.stop()
        report["shares"][str(share)] = where
        save()
    report["export"] = handed_on(work, healthy_runs, slowed)
    save()
    print("\nfirst checks (bundled baseline only):")
    for r in report["healthy"] + report["lone"]:
        print(f"  {r.get('level')} exit {r.get('exit_code')} remeasured {r.get('remeasured')} {r.get('judged_by')} "
              f"{r.get('wall_s')} s {r.get('figures')}")  # fmt: skip
    for duty, r in report["duties"].items():
        print(f"  duty {duty}: {r.get('level')} exit {r.get('exit_code')} vs healthy {r.get('vs_healthy')}")
    print("  exported vs bundled:", json.dumps(report.get("export", {}).get("levels")))
    if report["shares"]:
        print("\n".join(["\nshares of the GPU's time (figures against the healthy median):", *share_rows(report)]))


if __name__ == "__main__":
    main()

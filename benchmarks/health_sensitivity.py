"""What ``flopfleet-agent check`` costs and catches on one GPU, measured, not assumed (run on the GPU machine).

1. ``--healthy N`` checks back to back against a fresh collector: each one's wall time from start to posted run
   (and to the verdict), its exit code, and every health figure, whose run-to-run spread (max-min over median and
   MAD over median) it prints. None of them should be flagged: the false alarms.
2. For each ``--duties`` duty cycle, a competing process (``benchmarks/gpu_hog.py``) shares the GPU while
   ``--per-duty`` checks run; each check's level, exit code and figures against the healthy median: the smallest
   slowdown flagged, and after how many checks (``--when-busy measure``: the hog is another process on the GPU,
   which the agent would otherwise skip). The GPU's own settings are never touched.

    python benchmarks/health_sensitivity.py --healthy 6 --duties 0.05,0.1,0.2,0.4 --per-duty 2 --out health.json
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.serving import CollectorProcess  # noqa: E402
from collector.web.tokens import TokenStore  # noqa: E402

FIGURES = ("matmul_bf16", "memory", "h2d", "bert_fwdbwd")


def _check(url: str, token: str, spool: Path, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "agent", "check", "--json", "--collector", url, "--token", token, "--spool-dir",
         str(spool), *extra],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    wall = time.perf_counter() - start
    try:
        body = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {"wall_s": wall, "exit_code": done.returncode, "error": done.stderr[-2000:]}
    verdict = body["verdicts"][0] if body["verdicts"] else {}
    figures = {f["figure"]: f for f in verdict.get("figures", [])}
    return {
        "wall_s": round(wall, 2),
        "exit_code": done.returncode,
        "level": body["level"],
        "runs": len(body["runs"]),
        "notes": body["notes"],
        "reasons": verdict.get("reasons", []),
        "figures": {k: figures[k]["value"] for k in FIGURES if k in figures},
        "thresholds": {k: figures[k]["threshold"] for k in FIGURES if k in figures},
        "seconds": body.get("seconds", {}),
    }


def _spread(values: list[float]) -> dict[str, float]:
    mid = statistics.median(values)
    return {
        "median": round(mid, 2),
        "range_pct": round(100 * (max(values) - min(values)) / mid, 2),
        "mad_pct": round(100 * statistics.median(abs(v - mid) for v in values) / mid, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--healthy", type=int, default=6)
    parser.add_argument("--duties", default="0.05,0.1,0.2,0.4")
    parser.add_argument("--per-duty", type=int, default=2)
    parser.add_argument("--hog-n", type=int, default=8192, help="The competing process's matmul size.")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="flopfleet-health-"))
    db = work / "health.duckdb"
    token = TokenStore(db).create("health")
    server = CollectorProcess(db, root=ROOT)
    report: dict[str, Any] = {"healthy": [], "duties": {}}

    def save() -> None:  # after every check: a run cut short still leaves what it measured
        if args.out:
            args.out.write_text(json.dumps(report, indent=1), encoding="utf-8")

    try:
        for i in range(args.healthy):
            result = _check(server.url, token, work / "spool")
            report["healthy"].append(result)
            print(f"healthy {i + 1}: {json.dumps(result)}", flush=True)
            save()
        values = {k: [r["figures"][k] for r in report["healthy"] if k in r.get("figures", {})] for k in FIGURES}
        report["spread"] = {k: _spread(v) for k, v in values.items() if len(v) >= 2}
        print("spread:", json.dumps(report["spread"]), flush=True)
        for duty in [float(d) for d in args.duties.split(",") if d]:
            hog = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "gpu_hog.py"), "--duty", str(duty),
                                    "--n", str(args.hog_n)],
                                   stdout=subprocess.PIPE, text=True, env=os.environ.copy())  # fmt: skip
            assert hog.stdout is not None
            hog.stdout.readline()  # "hog ready": its tensors are on the GPU and it computes
            runs = []
            try:
                for _ in range(args.per_duty):
                    # measure: the agent would otherwise skip a GPU another process uses (the hog is one)
                    result = _check(server.url, token, work / "spool", ("--when-busy", "measure"))
                    healthy = report["spread"]
                    result["vs_healthy"] = {
                        k: round(v / healthy[k]["median"], 3) for k, v in result["figures"].items() if k in healthy
                    }
                    runs.append(result)
                    print(f"duty {duty}: {json.dumps(result)}", flush=True)
                    report["duties"][str(duty)] = runs
                    save()
            finally:
                hog.terminate()
                hog.wait(30)
            report["duties"][str(duty)] = runs
            # The GPU gets a healthy check after each duty cycle, so the next cycle starts from a clean history.
            settle = _check(server.url, token, work / "spool")
            report["duties"][str(duty) + " after"] = [settle]
            print(f"after duty {duty}: {json.dumps(settle)}", flush=True)
            save()
    finally:
        server.stop()
    save()


if __name__ == "__main__":
    main()

"""The inference results of agent run files, as a table: per case (and implementation: transformers', or the lean
plain-torch one and its kernels) tokens/s, TFLOPS, TTFT, time per output token (median, p90), GB/s read per decode
step and its fraction of the datasheet bandwidth and of the best copy the same run measured on the same GPU, how
it was timed, and the time the family took. Reads the JSON the agent wrote (``--output``); needs nothing but the
standard library.

    python3 benchmarks/inference_report.py RUN.json [RUN.json ...] [--target 0.7]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # scripts.results_files: the committed files

from scripts.results_files import read


def _fmt(value: Any, spec: str, scale: float = 1.0) -> str:
    return format(value * scale, spec) if isinstance(value, (int, float)) else "-"


def report(path: Path, target: float) -> tuple[list[str], bool | None]:
    run = read(path)
    results = [r for r in run["results"] if r["benchmark"] == "inference"]
    gpus = ", ".join(g["name"] for g in run.get("gpus", [])) or "CPU"
    software = run.get("software", {})
    lines = [
        f"## {path.name}: suite {run['suite']} on {gpus} (torch {software.get('torch')}, transformers "
        f"{software.get('transformers')})",
        "",
        "| case | status | tokens/s | TFLOPS | TTFT ms | TPOT ms (p90) | GB/s | of peak | of copy | timing | calls | "
        "flags | s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---:|",
    ]
    copies: dict[Any, float] = {}
    for r in run["results"]:
        if r["benchmark"] == "bandwidth" and r["params"]["op"] == "copy" and r["status"] == "ok":
            key = r.get("gpu_index")
            copies[key] = max(copies.get(key, 0.0), r["metrics"]["gbps"])
    reached: bool | None = None
    for r in results:
        p, m, t = r["params"], r.get("metrics") or {}, r.get("timing") or {}
        what = f"s={p['seq_len']}" if p["phase"] == "prefill" else f"ctx={p['seq_len']}"
        whose = p.get("implementation", "transformers") + (f" ({p['kernels']})" if p.get("kernels") else "")
        case = f"{p['model']} {p['phase']} b={p['batch']} {what} {p['dtype']} {p['attn_implementation']} {whose}"
        status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r.get('reason', '')[:60]}"
        tpot = f"{_fmt(m.get('tpot_s'), '.3f', 1e3)} ({_fmt(m.get('tpot_p90_s'), '.3f', 1e3)})"
        of_peak = r.get("peak_fraction")
        copy = copies.get(r.get("gpu_index"))
        of_copy = m["gbps"] / copy if copy and m.get("gbps") else None
        lines.append(
            f"| {case} | {status} | {_fmt(m.get('tokens_per_s'), ',.0f')} | {_fmt(m.get('tflops'), '.1f')} | "
            f"{_fmt(m.get('ttft_s'), '.2f', 1e3)} | {tpot if m.get('tpot_s') else '-'} | {_fmt(m.get('gbps'), ',.0f')} "
            f"| {_fmt(of_peak, '.1%')} | {_fmt(of_copy, '.1%')} | {t.get('method', '-')} | "
            f"{t.get('calls_per_repeat', '-')} | "
            f"{','.join(r.get('flags', [])) or '-'} | {r.get('duration_s', 0):.2f} |"
        )
        if p["phase"] == "decode" and p["batch"] == 1 and r["status"] == "ok" and of_peak is not None:
            reached = of_peak >= target
    total = sum(r.get("duration_s", 0.0) for r in results)
    lines += ["", f"inference cases: {len(results)}, {total:.1f} s in all (sum of their durations)"]
    if reached is not None:
        answer = "yes" if reached else "NO"
        lines.append(f"decode at batch 1 reaches {target:.0%} of the datasheet memory bandwidth: {answer}")
    return lines, reached


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--target", type=float, default=0.7, help="decode fraction of bandwidth to check at batch 1")
    args = parser.parse_args(argv)
    for path in args.runs:
        lines, _ = report(path, args.target)
        print("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A run file's headline figures, as docs/results/<card>.md tables them: the best trusted result of each family.

python benchmarks/card_figures.py RUN.json [RUN.json ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from schemas.health_figures import UNTRUSTED_FLAGS  # noqa: E402
from scripts.results_files import read  # noqa: E402


def figures(run: dict[str, Any]) -> dict[str, Any]:
    ok = [r for r in run["results"] if r["status"] == "ok" and not UNTRUSTED_FLAGS & set(r.get("flags", []))]

    def best(benchmark: str, metric: str, **match: Any) -> dict[str, Any]:
        found = [
            r for r in ok if r["benchmark"] == benchmark and all(r["params"].get(k) == v for k, v in match.items())
        ]
        return max(found, key=lambda r: r["metrics"][metric])

    out: dict[str, Any] = {}
    for dtype in ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3"):
        b = best("matmul", "tflops", dtype=dtype)
        out[dtype] = (round(b["metrics"]["tflops"], 1), b["params"]["n"])
    b = best("matmul", "tflops", dtype="bf16", n=8192)
    watts = b["timing"].get("power_w")
    out["bf16_8192 (TFLOPS, W, TFLOPS/W)"] = (round(b["metrics"]["tflops"], 1), watts and round(watts),
                                             watts and round(b["metrics"]["tflops"] / watts, 3))  # fmt: skip
    out["memory"] = round(best("bandwidth", "gbps")["metrics"]["gbps"])
    out["bert_fwdbwd_fp16"] = round(best("layer", "tflops", block="bert_layer", mode="fwd+bwd", dtype="fp16")
                                    ["metrics"]["tflops"], 1)  # fmt: skip
    for r in ok:
        p, m = r["params"], r["metrics"]
        if r["benchmark"] == "inference" and p["phase"] == "decode":
            out[f"decode b{p['batch']} {p['implementation']} (tokens/s, ms, GB/s)"] = (
                round(m["tokens_per_s"]),
                round(m["tpot_s"] * 1e3, 2),
                m.get("gbps") and round(m["gbps"]),
            )
        if r["benchmark"] == "inference" and p["phase"] == "prefill" and p["batch"] == 8:
            out[f"prefill 8x{p['seq_len']} {p['implementation']} TFLOPS"] = round(m["tflops"], 1)
        if r["benchmark"] == "training":
            out[f"training {p['model']} (tokens/s, MFU)"] = (round(m.get("tokens_per_s", 0)), round(m.get("mfu", 0), 3))
    return out


def main() -> int:
    for path in sys.argv[1:]:
        run = read(Path(path))
        print(path, run["gpus"][0]["uuid"], run["started_at"], json.dumps(figures(run)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a measuring child's start costs, piece by piece, in fresh interpreters: torch's import, the CUDA context,
transformers' BERT modules (with and without scikit-learn, which transformers before 5.2x imports at module level),
and the CUDA context created in a thread while those modules import (what the child does) against one after the
other. Each variant runs ``--repeats`` times, alternating, so page cache and clocks treat them alike.

    python benchmarks/health_startup.py [--repeats 3] [--importtime]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

BERT = "transformers.models.bert.modeling_bert"
NO_SKLEARN = "import agent.launchers.child as c; c.refuse_unused_imports()"
CONTEXT = "torch.zeros(1, device='cuda').item()"

VARIANTS = {
    "python": "pass",
    "import torch": "import torch",
    "torch + CUDA context": f"import torch; {CONTEXT}",
    "torch + BERT modules": f"import torch, {BERT}",
    "torch + BERT modules, no sklearn": f"{NO_SKLEARN}; import torch, {BERT}",
    "torch + BERT, then context": f"{NO_SKLEARN}; import torch, {BERT}; {CONTEXT}",
    "torch + BERT, context in a thread": (
        f"{NO_SKLEARN}; import torch, threading; t = threading.Thread(target=lambda: {CONTEXT}); t.start(); "
        f"import {BERT}; t.join()"
    ),
}


def timed(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--importtime", action="store_true", help="also print the slowest imports of BERT's modules")
    parser.add_argument("--cpu", action="store_true", help="leave out the variants that need a GPU")
    args = parser.parse_args()
    variants = {k: v for k, v in VARIANTS.items() if not (args.cpu and "cuda" in v)}
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, code in variants.items():
            seconds[name].append(timed(code))
    for name, values in seconds.items():
        print(f"{name:<36} median {statistics.median(values):6.2f} s   runs {' '.join(f'{v:.2f}' for v in values)}")
    if args.importtime:
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import torch, {BERT}"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        rows = [ln.split("|") for ln in done.stderr.splitlines() if ln.startswith("import time:") and "self" not in ln]
        rows.sort(key=lambda r: -int(r[1]))
        print("slowest imports (cumulative ms, module):")
        for r in rows[:30]:
            print(f"  {int(r[1]) / 1000:8.0f}  {r[2].rstrip()}")


if __name__ == "__main__":
    main()

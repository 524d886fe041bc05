"""What the end of an agent process costs once torch is imported: the interpreter's teardown, against
``agent.cli.app.leave`` (flush, then ``os._exit``), each in a fresh interpreter, alternating.

    python benchmarks/agent_exit.py [--rounds 5]

Each probe imports torch and the agent's command-line app, runs a small matmul, prints the moment it is done and
exits one way or the other; the figure is from that moment to the process's end as its parent sees it.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import sys, time
sys.path.insert(0, {root!r})
import importlib
import torch
app = importlib.import_module("agent.cli.app")  # the module (the package's name ``app`` is the Typer app)
torch.randn(256, 256) @ torch.randn(256, 256)
print(time.time(), flush=True)
if {fast!r}:
    app.leave(SystemExit(0))
"""


def teardown_s(fast: bool) -> float:
    proc = subprocess.Popen([sys.executable, "-c", PROBE.format(root=str(ROOT), fast=fast)], stdout=subprocess.PIPE,
                            text=True)  # fmt: skip
    assert proc.stdout is not None
    done = float(proc.stdout.readline())
    proc.wait()
    return time.time() - done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    plain, fast = [], []
    for n in range(args.rounds):
        plain.append(teardown_s(False))
        fast.append(teardown_s(True))
        print(f"round {n + 1}: teardown {plain[-1] * 1e3:.0f} ms, leave {fast[-1] * 1e3:.0f} ms")
    print(f"median: teardown {statistics.median(plain) * 1e3:.0f} ms, leave {statistics.median(fast) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()

"""Where the health profile's seconds go: one ``agent run --suite health`` with each case's duration and the gaps
between them (the agent's start, the child's start, model builds), from the run file it writes.

    python benchmarks/health_timeline.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    out = Path(tempfile.mkdtemp()) / "run.json"
    start = time.time()
    done = subprocess.run([sys.executable, "-m", "agent", "run", "--suite", "health", "-q", "--output", str(out)],
                          cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    wall = time.time() - start
    if done.returncode != 0:
        sys.exit(done.stderr)
    run = json.loads(out.read_text())
    began = datetime.fromisoformat(run["started_at"]).timestamp()
    ended = datetime.fromisoformat(run["finished_at"]).timestamp()
    print(f"wall {wall:.2f} s: process start to run start {began - start:.2f} s, run {ended - began:.2f} s, "
          f"after the run {start + wall - ended:.2f} s")  # fmt: skip
    for r in run["results"]:
        total = (r.get("timing") or {}).get("total_s")
        print(f"  {r['benchmark']:<11} {r['status']:<11} case {r.get('duration_s') or 0:6.2f} s  "
              f"timed {total or 0:5.2f} s  {json.dumps(r['params'])[:80]}")  # fmt: skip
    print(f"  sum of cases {sum(r.get('duration_s') or 0 for r in run['results']):.2f} s")


if __name__ == "__main__":
    main()

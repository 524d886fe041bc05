"""How often a CPU worker group whose first case fails at once on every rank (6 bytes: less than one fp32 element per
rank) still reports it as ``unsupported``, rather than as a group that never started: the start race the barrier
after ``init_process_group`` closed (agent/distributed/worker.py; docs/methodology.md, "Collectives").

    python benchmarks/group_starts.py [--tries 12] [--ranks 4]

Run it with the interpreter of the torch to check (``.venv-oldest/bin/python`` for torch 2.2) and, for the agent
before a change, from a copy of it (``cd .before && PYTHONPATH=$PWD python ../benchmarks/group_starts.py``).
"""

from __future__ import annotations

import argparse
import logging
import time

from agent.benchmarks.collective import CollectiveBenchmark
from agent.distributed.launch import Group, Task, launch
from agent.timing import GroupPolicy
from schemas import CollectiveParams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tries", type=int, default=12)
    parser.add_argument("--ranks", type=int, default=4)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    cases = tuple(
        CollectiveParams(op="all_reduce", backend="gloo", dtype="fp32", bytes=size, world_size=args.ranks).model_dump(
            mode="json"
        )
        for size in (6, 4096)
    )
    policy = GroupPolicy(warmup=1, repeats=3, repeat_s=1e-3, max_calls=5)
    right = 0
    for n in range(args.tries):
        began = time.monotonic()
        task = Task(kind=CollectiveBenchmark.WORKER, cases=cases, policy=policy, timeout_s=120)
        statuses = [r.status for r in launch(task, Group("gloo", (None,) * args.ranks))]
        right += statuses == ["unsupported", "ok"]
        print(f"try {n + 1}: {statuses} in {time.monotonic() - began:.1f} s", flush=True)
    print(f"{right} of {args.tries} tries right")


if __name__ == "__main__":
    main()

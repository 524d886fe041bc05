"""One rank of a worker group: join the process group, run the task's cases, report, leave.

Started by ``launch`` as ``python -m agent.distributed.worker WORKDIR`` with torchrun's environment. A case
that raises is written to ``fail.<rank>.json`` and the process exits at once: the other ranks may be blocked
in a collective with it, so only a fresh group can go on.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..errors import Unsupported, is_oom
from .launch import EXIT_CASE_FAILED, Task
from .rank import Rank


def main(argv: list[str]) -> int:
    workdir = Path(argv[0])
    task = Task.from_json((workdir / "task.json").read_text(encoding="utf-8"))
    rank = _join(task)
    records = workdir / "records.jsonl"
    _append(records, {"ready": rank.rank})  # every rank: the group has started once all of them joined
    run_case = _runner(task)
    for index, case in enumerate(task.cases):
        t0 = time.perf_counter()
        try:
            record = run_case(case, task, rank)
        except BaseException as exc:  # every failure is reported, then the group is abandoned
            _fail(workdir, rank, exc)
            sys.stdout.flush()
            os._exit(EXIT_CASE_FAILED)
        if rank.local_rank == 0:
            _append(records, {"index": index, "status": "ok", "duration_s": time.perf_counter() - t0, **record})
    rank.close()
    return 0


def _join(task: Task) -> Rank:
    import torch
    import torch.distributed as dist

    backend = os.environ["FLOPFLEET_BACKEND"]
    where = os.environ["FLOPFLEET_DEVICE"]
    device = torch.device("cpu") if where == "cpu" else torch.device("cuda", int(where))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    kwargs: dict[str, Any] = {"backend": backend, "timeout": timedelta(seconds=task.timeout_s)}
    if device.type == "cuda":
        kwargs["device_id"] = device  # binds the communicator to this GPU at once (no lazy init on first op)
    dist.init_process_group(**kwargs)
    return Rank(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=int(os.environ["LOCAL_RANK"]),
        local_world_size=int(os.environ["LOCAL_WORLD_SIZE"]),
        nodes=int(os.environ["WORLD_SIZE"]) // int(os.environ["LOCAL_WORLD_SIZE"]),
        backend=backend,
        device=device,
    )


def _runner(task: Task) -> Any:
    if task.kind == "collective":
        from .collectives import run_case

        return run_case
    from .ddp import run_case as run_ddp

    return run_ddp


def _fail(workdir: Path, rank: Rank, exc: BaseException) -> None:
    status = "unsupported" if isinstance(exc, Unsupported) else "oom" if is_oom(exc) else "error"
    text = str(exc).strip().splitlines()
    reason = text[0] if text else ""
    reason = reason if isinstance(exc, Unsupported) else f"{type(exc).__name__}: {reason}"
    path = workdir / f"fail.{rank.rank}.json"
    report = {"status": status, "reason": reason[:900], "at": time.time()}
    path.write_text(json.dumps(report), encoding="utf-8")
    import traceback

    traceback.print_exception(exc)


def _append(path: Path, record: dict[str, Any]) -> None:
    # One write of one whole line: the launcher reads only up to the last newline.
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""One rank of a worker group: join the process group, run the task's cases, report, leave.

Started by ``launch`` as ``python -m agent.distributed.worker WORKDIR`` with torchrun's environment. A case
that raises is written to ``fail.<rank>.json`` and the process exits at once: the other ranks may be blocked
in a collective with it, so only a fresh group can go on.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

from .. import compat
from ..devices import device as device_of
from ..devices.target import target_for
from ..errors import Unsupported, is_oom
from .launch import EXIT_CASE_FAILED, RankCode, Task, WorkerKind
from .rank import Rank


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: the agent stops the group (agent/stop.py)
    workdir = Path(argv[0])
    task = Task.from_json((workdir / "task.json").read_text(encoding="utf-8"))
    run_case = rank_code(task.kind)  # imported before the group starts: its import is part of the start
    rank = _join(task)
    records = workdir / "records.jsonl"
    _append(records, {"ready": rank.rank})  # every rank: the group has started once all of them joined
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
    import torch.distributed as dist

    backend = os.environ["FLOPFLEET_BACKEND"]
    kind, _, where = os.environ["FLOPFLEET_DEVICE"].partition(":")  # 'cpu' or 'cuda:1'
    index = int(where) if where else None
    device = device_of(kind)
    device.select(index)
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    # The rendezvous waits as long as the launcher lets a start take (a slow rank's import is no hang); the
    # collectives then fail after the case timeout.
    store = dist.TCPStore(  # type: ignore[attr-defined]  # exported at run time, not in the stubs
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world_size,
        is_master=rank == 0,
        timeout=timedelta(seconds=task.start_timeout_s),
    )
    kwargs: dict[str, Any] = {
        "backend": backend,
        "store": store,
        "rank": rank,
        "world_size": world_size,
        "timeout": timedelta(seconds=task.timeout_s),
    }
    if device.is_gpu:
        kwargs.update(compat.process_group_kwargs(device.torch_device(index)))  # the communicator bound at once
    dist.init_process_group(**kwargs)
    # No rank leaves the start before every rank has joined: rank 0 holds the rendezvous store, and where its first
    # case failed at once (an unsupported size, on every rank) it exited while the others were still joining through
    # that store ("Connection reset by peer"), so the group looked as if it never started (torch 2.2: 3 of 10 tries,
    # benchmarks/group_starts.py).
    dist.barrier()
    target = target_for(kind, index)  # once the device is current, as every device call of the rank
    return Rank(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=int(os.environ["LOCAL_RANK"]),
        local_world_size=int(os.environ["LOCAL_WORLD_SIZE"]),
        nodes=int(os.environ["WORLD_SIZE"]) // int(os.environ["LOCAL_WORLD_SIZE"]),
        backend=backend,
        target=target,
        device=target.torch_device(),
    )


def rank_code(kind: WorkerKind) -> RankCode:
    """The function a task names (``launch.worker_kind``); only the agent's own modules are imported."""
    module, _, name = kind.partition(":")
    if not module.startswith("agent.") or not name.isidentifier():
        raise ValueError(f"worker kind {kind!r} is not 'agent.module:function'")
    return cast(RankCode, getattr(importlib.import_module(module), name))


def _fail(workdir: Path, rank: Rank, exc: BaseException) -> None:
    status = "unsupported" if isinstance(exc, Unsupported) else "oom" if is_oom(exc) else "error"
    text = str(exc).strip().splitlines()
    reason = text[0] if text else ""
    reason = reason if isinstance(exc, Unsupported) else f"{type(exc).__name__}: {reason}"
    path = workdir / f"fail.{rank.rank}.json"
    report = {"status": status, "reason": reason[:900], "at": time.time()}
    # Written aside, then renamed: the launcher may stop this rank mid-write (a group that timed out), and it must
    # never find half a report (CI, a loaded machine: an empty fail.1.json crashed the run instead of failing a case).
    partial = path.with_suffix(".part")
    partial.write_text(json.dumps(report), encoding="utf-8")
    os.replace(partial, path)
    import traceback

    traceback.print_exception(exc)


def _append(path: Path, record: dict[str, Any]) -> None:
    # One write of one whole line: the launcher reads only up to the last newline.
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # every rank passed the closing barrier: nothing is left to tear down (Rank.close)

"""Start a torchrun-style group of worker processes, stream their records back, and survive their failures.

Each worker gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT as
torchrun would set them. Each rank appends a "ready" line to ``records.jsonl`` once it has joined the process
group, and the local rank 0 one JSON line per finished case; a rank whose case raises writes ``fail.<rank>.json``
and exits. When the group dies in the middle of a case, that case gets the failure as its status and a fresh group
takes the remaining cases, so one bad case never costs the rest; a group that dies before all its ranks have
joined is started again (``START_ATTEMPTS``) before its cases fail.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from schemas import Status

from ..devices import DeviceKind
from ..timing import GroupPolicy
from .nodes import Nodes
from .rank import Rank

log = logging.getLogger(__name__)

Backend = Literal["nccl", "gloo"]
#: The rank code a group runs, as ``agent.package.module:function`` (``worker_kind`` names one): the family that
#: owns the code names it, and the worker imports it, so this machinery never imports a benchmark.
WorkerKind = str
EXIT_CASE_FAILED = 3  # a worker's exit code after it reported its case's failure
GRACE_S = 5.0  # after one rank fails, how long the others get to notice and leave by themselves
#: A group that fails before all its ranks have joined is started again: on a loaded machine a rank's connection
#: to the rendezvous store can be reset ("DistNetworkError: Connection reset by peer": seen in CI with 4 gloo ranks
#: on 2 cores, and in 3 of 10 starts with two busy loops beside them), which says nothing about the cases.
START_ATTEMPTS = 3
#: How long a group may take to start (interpreters, torch's import, the rendezvous) before it counts as hung: the
#: case timeout is about a case, and on a loaded 2-core machine two ranks' start alone took over 4 s (CI).
START_TIMEOUT_S = 180.0
POLL_S = 0.05
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Group:
    """The processes one launch spans: a local rank per entry of ``devices`` (the index of a ``kind`` device, or
    None for a CPU process) on each of ``nodes.count`` machines."""

    backend: Backend
    devices: tuple[int | None, ...]
    nodes: Nodes = field(default_factory=Nodes)
    kind: DeviceKind = "cuda"

    @property
    def world_size(self) -> int:
        return len(self.devices) * self.nodes.count

    @property
    def label(self) -> str:
        where = f"{len(self.devices)} GPUs" if self.backend == "nccl" else f"{len(self.devices)} CPU processes"
        return f"{where} x {self.nodes.count} nodes" if self.nodes.multi else where


@dataclass(frozen=True)
class Task:
    """What the workers run: ``cases`` are params as JSON objects, in order."""

    kind: WorkerKind
    cases: tuple[dict[str, Any], ...]
    policy: GroupPolicy
    timeout_s: float = 300.0  # one case making no progress for this long is a hang

    @property
    def start_timeout_s(self) -> float:
        """The group's start gets its own allowance, never less than a case's."""
        return max(self.timeout_s, START_TIMEOUT_S)

    def to_json(self) -> str:
        return json.dumps(
            {"kind": self.kind, "cases": list(self.cases), "policy": asdict(self.policy), "timeout_s": self.timeout_s}
        )

    @classmethod
    def from_json(cls, text: str) -> Task:
        raw = json.loads(text)
        return cls(
            kind=raw["kind"],
            cases=tuple(raw["cases"]),
            policy=GroupPolicy(**raw["policy"]),
            timeout_s=float(raw["timeout_s"]),
        )


#: One case on one rank: (the case's params as JSON, the task, the rank) -> the record's fields.
RankCode = Callable[[dict[str, Any], Task, Rank], dict[str, Any]]


def worker_kind(code: RankCode) -> WorkerKind:
    """The name a ``Task`` gives ``code`` so that a worker process can import it."""
    return f"{code.__module__}:{code.__qualname__}"


@dataclass(frozen=True)
class Record:
    """One case's outcome as a worker reported it (status 'ok'), or as the launcher saw it fail."""

    index: int
    status: Status
    reason: str | None = None
    params: dict[str, Any] | None = None
    metrics: dict[str, Any] | None = None
    timing: dict[str, Any] | None = None
    flags: tuple[str, ...] = ()
    duration_s: float = 0.0


def launch(
    task: Task,
    group: Group,
    environ: Mapping[str, str] | None = None,
    stopped: Callable[[], bool] = lambda: False,
) -> Iterator[Record]:
    """Run every case of ``task`` on ``group``; yields one record per case, in order, as each finishes. Once
    ``stopped()`` (the run was told to stop) the group is stopped and no record comes for the cases left."""
    env = dict(os.environ if environ is None else environ)
    start = 0
    failed_starts = 0
    while start < len(task.cases):
        part = Task(task.kind, task.cases[start:], task.policy, task.timeout_s)
        with tempfile.TemporaryDirectory(prefix="flopfleet-group-") as tmp:
            outcome = _GroupRun(part, group, Path(tmp), env, stopped)
            for record in outcome.records():
                yield _shifted(record, start)
            done = start + outcome.finished
            if done >= len(task.cases) or stopped():
                return
            failure = outcome.failure()
            if not outcome.started and not outcome.timed_out and not group.nodes.multi:
                failed_starts += 1
                if failed_starts < START_ATTEMPTS:
                    log.warning("the worker group failed to start (%s); starting it again", failure.reason)
                    continue
            yield _shifted(failure, start)
            start = done + 1
            if not outcome.started or group.nodes.multi:
                why = (
                    "the worker group never started"
                    if not outcome.started
                    else "a multi-node group is not restarted after a failure"
                )
                for index in range(start, len(task.cases)):
                    yield Record(index=index, status=failure.status, reason=f"{why}: {failure.reason}")
                return


def _shifted(record: Record, offset: int) -> Record:
    return Record(**{**asdict(record), "index": record.index + offset, "flags": tuple(record.flags)})


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _GroupRun:
    """One launch of the worker group, from spawn to the last record."""

    def __init__(
        self, task: Task, group: Group, workdir: Path, environ: dict[str, str], stopped: Callable[[], bool]
    ) -> None:
        self.task, self.group, self.workdir, self._stopped_by = task, group, workdir, stopped
        self.finished = 0
        self.started = False  # every local rank has joined the process group
        self._ready: set[int] = set()
        self.timed_out = False
        self.codes: list[int | None] = []
        self._stopped = False  # whether the launcher had to stop ranks (their SIGTERM is then no cause)
        (workdir / "task.json").write_text(task.to_json(), encoding="utf-8")
        self._records = workdir / "records.jsonl"
        self._offset = 0
        self._port = group.nodes.master_port if group.nodes.master_port is not None else free_port()
        self._procs = [self._spawn(local_rank, environ) for local_rank in range(len(group.devices))]

    def _spawn(self, local_rank: int, environ: dict[str, str]) -> subprocess.Popen[bytes]:
        group = self.group
        nodes = group.nodes
        rank = nodes.rank * len(group.devices) + local_rank
        device = group.devices[local_rank]
        # An agent started by torchrun inherits its elastic settings; a worker that kept them would wait for
        # torchrun's store (TORCHELASTIC_USE_AGENT_STORE) instead of the group's own.
        inherited = {k: v for k, v in environ.items() if not k.startswith(("TORCHELASTIC_", "TORCH_ELASTIC_"))}
        env = {
            **inherited,
            "RANK": str(rank),
            "WORLD_SIZE": str(group.world_size),
            "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(len(group.devices)),
            "GROUP_RANK": str(nodes.rank),
            "MASTER_ADDR": nodes.master_addr,
            "MASTER_PORT": str(self._port),
            "FLOPFLEET_BACKEND": group.backend,
            "FLOPFLEET_DEVICE": "cpu" if device is None else f"{group.kind}:{device}",
            "PYTHONPATH": os.pathsep.join(p for p in (str(PACKAGE_ROOT), environ.get("PYTHONPATH", "")) if p),
        }
        if device is None:
            # Processes sharing the CPU would otherwise each start a thread per core and fight over them.
            env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // len(group.devices))))
        log_file = open(self.workdir / f"rank{rank}.log", "wb")  # noqa: SIM115 - closed with the process
        try:
            return subprocess.Popen(
                [sys.executable, "-m", "agent.distributed.worker", str(self.workdir)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        finally:
            log_file.close()

    def records(self) -> Iterator[Record]:
        """Records as rank 0 writes them; stops once every process has exited or the group has been stopped."""
        progress = time.monotonic()
        failed_at: float | None = None
        try:
            while True:
                was_started = self.started
                for record in self._read():
                    progress = time.monotonic()
                    yield record
                if self.started and not was_started:
                    progress = time.monotonic()  # the first case's clock starts once every rank has joined
                codes = [p.poll() for p in self._procs]
                if all(c is not None for c in codes) or self._stopped_by():
                    break
                now = time.monotonic()
                if failed_at is None and any(c not in (None, 0) for c in codes):
                    failed_at = now
                if failed_at is not None and now - failed_at > GRACE_S:
                    break
                if now - progress > (self.task.timeout_s if self.started else self.task.start_timeout_s):
                    self.timed_out = True
                    break
                time.sleep(POLL_S)
        finally:
            self._stop()
        yield from self._read()

    def _read(self) -> Iterator[Record]:
        if not self._records.exists():
            return
        with self._records.open("rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        self._offset += end
        for line in data[:end].splitlines():
            raw = json.loads(line)
            if "ready" in raw:
                self._ready.add(raw["ready"])
                self.started = len(self._ready) == len(self.group.devices)
                continue
            self.finished += 1
            yield Record(**{**raw, "flags": tuple(raw.get("flags", ()))})

    def _stop(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                self._stopped = True
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 5.0
        for proc in self._procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.codes = [p.returncode for p in self._procs]

    def failure(self) -> Record:
        """Why the case after the last finished one did not finish.

        A rank that died on its own (a signal, an exit code the worker never uses) is the cause; the errors the
        others then report ('connection closed by peer') are consequences. Otherwise the ranks' own reports
        decide, the earliest first: the others' failures follow from it.
        """
        index = self.finished
        first = self.group.nodes.rank * len(self.group.devices)
        died = self._died(first)
        if died is not None:
            return Record(index=index, status="error", reason=died)
        reports = []
        for rank in range(first, first + len(self.group.devices)):
            raw = _report(self.workdir / f"fail.{rank}.json")
            if raw is not None:
                reports.append((float(raw.get("at", 0.0)), rank, raw))
        if reports:
            _, rank, raw = min(reports, key=lambda item: item[:2])
            same = [
                r for _, r, other in reports if (other["status"], other["reason"]) == (raw["status"], raw["reason"])
            ]
            who = f"rank {rank}" if len(same) == 1 else f"ranks {', '.join(map(str, same))}"
            return Record(index=index, status=raw["status"], reason=f"{who}: {raw['reason']}")
        if self.timed_out and not self.started:
            return Record(
                index=index,
                status="error",
                reason=f"the worker group did not start within {self.task.start_timeout_s:.0f} s; it was stopped",
            )
        if self.timed_out:
            return Record(
                index=index,
                status="error",
                reason=f"no progress for {self.task.timeout_s:.0f} s; the worker group was stopped",
            )
        return Record(index=index, status="error", reason="the worker group stopped before the case finished")

    def _died(self, first: int) -> str | None:
        for offset, code in enumerate(self.codes):
            if code in (0, None, EXIT_CASE_FAILED) or (code == -signal.SIGTERM and self._stopped):
                continue
            rank = first + offset
            how = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
            tail = _last_line(self.workdir / f"rank{rank}.log")
            return f"rank {rank} {how}" + (f": {tail}" if tail else "")
        return None


def _report(path: Path) -> dict[str, Any] | None:
    """A rank's failure report, or None where it wrote none. Workers write it whole (aside, then renamed); one that
    still cannot be read is no report rather than a crash of the whole run: the group's other evidence decides."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return raw if isinstance(raw, dict) and {"status", "reason"} <= raw.keys() else None


def _last_line(path: Path) -> str | None:
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return None
    lines = [line for line in lines if line]
    return lines[-1][:500] if lines else None

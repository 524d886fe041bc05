"""The agent's end of one measuring child (``launchers/child.py`` is the child's): started at once so it imports while
the agent works, fed over two pipes, watched for hangs and deaths, stopped with SIGTERM then SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ..devices.target import Target
from ..errors import ChildGone
from ..harness.cases import Measured
from ..timing import TimingPolicy
from .base import Job

#: A fresh child has this long to start (interpreter, torch, the device's context) before it counts as hung.
START_S = 180.0
#: Between SIGTERM and SIGKILL for a child that must go.
TERM_GRACE_S = 5.0


class Child:
    """One measuring process for one device: started first (it imports while the agent works), given its device
    by ``setup``."""

    def __init__(self, folder: Path, number: int, warm: tuple[str, ...] = ()) -> None:
        self.warm = warm
        self.name = f"child-{number}"
        self.log = folder / f"{self.name}.log"
        #: When it was started, had imported, was set up and stopped (time.monotonic; None until then).
        self.times: dict[str, float | None] = {"started": time.monotonic(), "imported": None, "ready": None,
                                               "stopped": None}  # fmt: skip
        child_reads, parent_writes = os.pipe()
        parent_reads, child_writes = os.pipe()
        command = [sys.executable, "-m", "agent.launchers.child", str(child_reads), str(child_writes), ",".join(warm)]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                command, pass_fds=(child_reads, child_writes), stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        os.close(child_reads)
        os.close(child_writes)
        self._inbox = Connection(parent_writes, readable=False)  # what the child reads
        self._outbox = Connection(parent_reads, writable=False)  # what it answers
        self._sent: set[int] = set()
        self.last_cuda_error = ""
        self.rehearsing = False

    def has_imported(self) -> bool:
        """Whether it has said its imports are done (without waiting: a child still importing, or gone, has not)."""
        if self.times["imported"] is None:
            try:
                if self._outbox.poll(0):
                    _, self.times["imported"] = self._outbox.recv()
            except (EOFError, ConnectionResetError, OSError):
                return False  # gone: setup finds out why
        return self.times["imported"] is not None

    def rehearse(self, target: Target, policy: TimingPolicy, jobs: list[Job]) -> None:
        """Ask it to prepare ``jobs``' first calls on ``target``, in that order, while it waits (it stops at the next
        message)."""
        work = [(id(job.bench), job.bench, job.case) for job in jobs]
        self._send(("rehearse", target, policy, work))
        self._sent.update(key for key, _, _ in work)
        self.rehearsing = True

    def setup(self, target: Target, policy: TimingPolicy) -> None:
        """Give it its device and wait until it is ready to measure (ChildGone if it does not get there)."""
        self._send(("setup", target, policy))
        if self.times["imported"] is None:
            _, self.times["imported"] = self._receive(START_S, "to start")
        _, imported, ready = self._receive(START_S, "to start")
        self.times.update(imported=imported, ready=ready)

    def measure(self, job: Job, timeout_s: float) -> tuple[Measured, bool]:
        """What the child measured for ``job``, and whether it must be replaced (a sticky error); ChildGone when
        it died or hung on the way."""
        if id(job.bench) not in self._sent:
            self._send(("bench", id(job.bench), job.bench))
            self._sent.add(id(job.bench))
        self._send(("case", id(job.bench), job.case))
        measured, sticky, cuda_error = self._receive(timeout_s, "on this case")
        if cuda_error:
            self.last_cuda_error = cuda_error
        return measured, bool(sticky)

    def _send(self, message: tuple[Any, ...]) -> None:
        try:
            self._inbox.send(message)
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise ChildGone(self._death()) from None

    def _receive(self, timeout_s: float, doing: str) -> Any:
        try:
            if not self._outbox.poll(timeout_s):
                self.stop()
                raise ChildGone(f"no progress for {timeout_s:g} s {doing} (hang)" + self._last_words())
            return self._outbox.recv()
        except (EOFError, ConnectionResetError, OSError):
            raise ChildGone(self._death()) from None

    def _death(self) -> str:
        try:
            code = self.proc.wait(timeout=TERM_GRACE_S)
        except subprocess.TimeoutExpired:
            self.stop()
            return "the measuring process stopped answering" + self._last_words()
        if code < 0:
            how = f"the measuring process was killed by {signal.Signals(-code).name}"
        else:
            how = f"the measuring process exited with code {code}"
        return how + self._last_words()

    def _last_words(self) -> str:
        """The last CUDA error the child reported, and the last line it printed."""
        words = f"; last CUDA error it saw: {self.last_cuda_error}" if self.last_cuda_error else ""
        try:
            lines = [ln for ln in self.log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
        except OSError:
            lines = []
        return words + (f"; its last output: {lines[-1].strip()[:300]}" if lines else "")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL: a child that must go does go."""
        if self.times["stopped"] is None:
            self.times["stopped"] = time.monotonic()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=TERM_GRACE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._inbox.close()
        self._outbox.close()

    def dismiss(self) -> None:
        """Let it go: one that has imported is asked to finish (``close``); one still importing would read that only
        once its imports are done, and has nothing to finish, so it is stopped at once."""
        if self.has_imported():
            self.close()
        else:
            self.stop()

    def close(self) -> None:
        """Ask it to finish, then make sure it did."""
        self.times["stopped"] = time.monotonic()
        try:
            self._inbox.send(("stop",))
            self.proc.wait(timeout=TERM_GRACE_S)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.stop()

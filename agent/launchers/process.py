"""Device cases in a child process per device, reused while it is healthy, replaced when it is not.

A segfault in a CUDA library, a kernel that never returns, the kernel's OOM killer or a sticky CUDA error (one that
poisons the process's CUDA context) ends the child, not the agent: the case it was on gets status ``error`` with a
reason naming what happened (``killed by SIGSEGV``, ``exited with code 3``, ``no progress for 120 s (hang)``, with
the last CUDA error the child reported), the results it already reported are kept, and a fresh child takes the
remaining cases. Each result comes back as soon as it is measured, over a pipe (pickled, between two processes of
the same user). A child costs one interpreter start, torch's import and, on a GPU, a CUDA context: once per device
per run, not per case.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from pathlib import Path
from typing import Any

from schemas import Result
from schemas.timeline import ProcessTimes

from ..devices.target import Target
from ..errors import ChildGone
from ..timing import TimingPolicy
from .base import Finisher, Job, Progress, process_times
from .handle import Child

log = logging.getLogger(__name__)

#: A case's watchdog when none is given: generous, as model builds and shape searches take their time.
DEFAULT_CASE_TIMEOUT_S = 300.0


class ProcessLauncher:
    """One child per device, its cases one after another; ``parallel``: every device's child at once.

    A child is started before it is needed (``prepare``, and a spare while a device is measured) so that its
    interpreter, torch and the modules of the run's benchmarks are imported while other work goes on: on the H200
    those took 6 s and 12 s, more than the standard suite's cost budget.
    """

    def __init__(self, policy: TimingPolicy, case_timeout_s: float | None = None, parallel: bool = False) -> None:
        self.policy = policy
        self.case_timeout_s = case_timeout_s or DEFAULT_CASE_TIMEOUT_S
        self.parallel = parallel
        self._folder = tempfile.TemporaryDirectory(prefix="flopfleet-children-")
        self._spares: list[Child] = []
        self._started = 0
        self._lock = threading.Lock()
        self._warm: tuple[str, ...] = ()
        self._children: list[Child] = []

    def prepare(self, warm: tuple[str, ...], count: int = 1, overlap: bool = True) -> None:
        """Start ``count`` children now, importing ``warm`` (the modules the run's benchmarks declare).

        One after another (``count`` 1) with modules to import, two start: one without them, which measures the
        cases that need none (matmul, memory, transfers, the lean Llama) as soon as torch is imported, and one
        importing them, which takes over at the first case that needs them. Model code's imports (10-15 s on the
        H200) then overlap the first cases instead of delaying them, and, on a GPU, the second prepares the first
        calls of its cases meanwhile (``_rehearse_ahead``). Not without ``overlap``: measuring a CPU, the importing
        process took the cores the measuring one needed (on 2 cores a memory copy's window read 150x its value,
        flagged ``starved``, 2026-12-03), so there the one child imports everything before it measures."""
        self._warm = tuple(dict.fromkeys(warm))
        if self._warm and count == 1 and not self.parallel and overlap:
            self._spares.append(self._spawn(()))
        for _ in range(count):
            self._spares.append(self._spawn())

    def _spawn(self, warm: tuple[str, ...] | None = None) -> Child:
        with self._lock:
            self._started += 1
            number = self._started
        child = Child(Path(self._folder.name), number, self._warm if warm is None else warm)
        with self._lock:
            self._children.append(child)
        return child

    def processes(self, origin: float) -> list[ProcessTimes]:
        """Every child this launcher started, its moments in seconds from ``origin`` (time.monotonic); a spare's
        imports are dated once it has said they are done, whether it measured or not."""
        with self._lock:
            children = list(self._children)
        for child in children:
            child.has_imported()
        return [process_times(c.name, c.times, origin, c.warm) for c in children]

    def _covers(self, child: Child, needs: tuple[str, ...]) -> bool:
        return set(needs) <= set(child.warm)

    def _warm_spare_for(self, needs: tuple[str, ...]) -> bool:
        """Whether a started spare imports ``needs`` (so the running child should hand over to it)."""
        with self._lock:
            return any(self._covers(c, needs) for c in self._spares)

    def _rehearse_ahead(
        self, child: Child, jobs: list[Job], needed: list[tuple[str, ...]], rest: tuple[str, ...]
    ) -> None:
        """Once a spare that imports what ``child`` lacks (of ``rest``, what ``jobs`` need) has imported it, it
        prepares the first calls of the cases that will be its (the GPU untouched) while ``child`` measures the cases
        before them. One process prepares at a time: two spares preparing at once, each half, got less done between
        them on the H200 than one alone (why was not measured; they share the host and the driver), and the second's
        dropped capture memory (88 GiB) left a training step out of memory. A third child that took over at the second
        model benchmark, having prepared it while the second measured (a relay), saved nothing on the H200 and moved
        BERT's cells beside it by up to 6.5 %: it was removed (docs/methodology.md, "Where cases run")."""
        if self._covers(child, rest) or not jobs[0].target.is_gpu:  # on a CPU, preparing would compete with measuring
            return
        with self._lock:
            spare = next((c for c in self._spares if self._covers(c, rest) and not c.rehearsing), None)
        if spare is None or not spare.has_imported():
            return
        theirs = [job for job, needs in zip(jobs, needed, strict=True) if not self._covers(child, needs)]
        if not theirs:
            return
        try:
            spare.rehearse(theirs[0].target, self.policy, theirs)
        except ChildGone:
            return  # the swap finds out why

    def _child_for(self, target: Target, another_device_next: bool, needs: tuple[str, ...] = ()) -> Child:
        """A started child set up for ``target`` (one that has imported ``needs`` where a spare has); a spare is
        started now for the device measured next."""
        with self._lock:
            fit = next((c for c in self._spares if self._covers(c, needs)), None)
            child = fit or (self._spares[0] if self._spares else None)
            if child is not None:
                self._spares.remove(child)
        child = child or self._spawn()
        if another_device_next:
            with self._lock:
                if not self._spares:
                    self._spares.append(self._spawn())
        child.setup(target, self.policy)
        return child

    def close(self) -> None:
        for spare in self._spares:
            spare.dismiss()
        self._spares = []
        self._folder.cleanup()

    def run(self, jobs: list[Job], finish: Finisher, progress: Progress) -> list[Result]:
        """Each device's cases, those that import no model code first (they run while a child imports it); the
        results in the order of ``jobs``."""
        by_target: dict[str, list[tuple[int, Job]]] = {}
        for i, job in enumerate(jobs):
            by_target.setdefault(job.target.label, []).append((i, job))
        order = {k: sorted(m, key=lambda ij: bool(ij[1].bench.warm_for(ij[1].case))) for k, m in by_target.items()}
        done: dict[int, Result] = {}

        def device(mine: list[tuple[int, Job]], **kwargs: Any) -> None:
            results = self._device([j for _, j in mine], finish, progress, **kwargs)
            done.update(zip((i for i, _ in mine), results, strict=True))

        forget = finish.stop.on_stop(self._halt)
        try:
            devices = list(order.values())
            if not self.parallel or len(devices) < 2:
                for n, mine in enumerate(devices):
                    device(mine, another_device_next=n + 1 < len(devices))
            else:
                threads = [threading.Thread(target=lambda m=m: device(m, at_once=True)) for m in devices]
                for thread in threads:
                    thread.start()
                for thread in threads:
                    thread.join()
            return [done[i] for i in range(len(jobs)) if i in done]
        finally:
            forget()
            self.close()

    def _halt(self) -> None:
        """The run was told to stop: every child still running gets SIGTERM now (from a signal handler: nothing that
        waits, takes no lock the interrupted code may hold), so that a case being measured ends within moments; the case
        is then skipped (``_device``)."""
        for child in list(self._children):
            if child.proc.poll() is None:
                child.proc.terminate()

    def _device(
        self,
        jobs: list[Job],
        finish: Finisher,
        progress: Progress,
        another_device_next: bool = False,
        at_once: bool = False,
    ) -> list[Result]:
        """One device's cases through its child, replaced as often as it has to be; ``at_once``: while other devices
        are measured too (the results say so: flag ``parallel``)."""
        results: list[Result] = []
        child: Child | None = None
        first = True
        needed = [job.bench.warm_for(job.case) for job in jobs]
        rests = _remaining(needed)
        for n, job in enumerate(jobs):
            progress.start(job.bench, job.case, job.target.label)
            if finish.spent():
                result = finish.skipped(job)
            else:
                started = finish.now()
                try:
                    needs = needed[n]
                    # Hand over at the first case that needs model code, not before: while this child still has
                    # cases of its own, the spare prepares the first calls of those that will be its (on the H200
                    # 70-100 ms of the host's time each for a layer cell, 132 of them in the standard suite).
                    swap = child is not None and not self._covers(child, needs) and self._warm_spare_for(needs)
                    if child is not None and swap:
                        child.close()  # its cases are done; the spare that imported the model code goes on
                        child = None
                    if child is None:
                        # A spare for the next device, once this one has taken the last started child.
                        child = self._child_for(job.target, another_device_next and (first or swap), needs)
                        first = False
                    self._rehearse_ahead(child, jobs[n:], needed[n:], rests[n])
                    measured, replace = child.measure(job, self.case_timeout_s)
                    result = finish(job, measured, started)
                    if replace:
                        log.warning("a sticky error on %s: a fresh process takes the next cases", job.target.label)
                        child.close()
                        child = None
                except ChildGone as gone:
                    if finish.stop.requested:  # stopped by the run's stop (``_halt``), not a fault of the case
                        result = finish.skipped(job)
                    else:
                        log.error("benchmark %s case %s: %s", job.bench.NAME, job.case.label, gone)
                        result = finish.failed(job, str(gone)[:1000], started)
                    if child is not None:
                        child.stop()
                    child = None
                except Exception as exc:  # the case could not be handed over (unpicklable, say): its error alone
                    log.exception("benchmark %s case %s could not be measured", job.bench.NAME, job.case.label)
                    result = finish.failed(job, f"could not hand the case to its process: {type(exc).__name__}: "
                                                f"{exc}"[:1000], started)  # fmt: skip
            if at_once:
                result = result.model_copy(update={"flags": tuple(dict.fromkeys((*result.flags, "parallel")))})
            progress.end(job.bench, job.case, job.target.label, result)
            results.append(result)
        if child is not None:
            child.close()
        return results


def _remaining(needed: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """For each case, the modules it and every later case import (in first-needed order): what a child must have
    imported to take over from there."""
    rests: list[tuple[str, ...]] = []
    later: tuple[str, ...] = ()
    for needs in reversed(needed):
        later = tuple(dict.fromkeys((*needs, *later)))
        rests.append(later)
    return rests[::-1]

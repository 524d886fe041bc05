"""The measuring child of ``process``: runs the cases its parent sends on one device and answers each at once.

``python -m agent.launchers.child READ_FD WRITE_FD [MODULE,...]``: messages are pickled tuples over two pipes. It
imports torch and the modules named first, then waits for its device. What the child prints goes to a log its parent
reads when it dies; the pipes carry only messages.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from ..devices.target import Target
from ..harness.cases import CaseContext, Measured, measure_case, select
from ..harness.plugins import load_plugins
from ..imports import import_frozen
from ..timing import TimingPolicy

log = logging.getLogger(__name__)


def sticky_error(target: Target) -> str:
    """Whether the device still works after a failed case ('' if so): a sticky CUDA error (an illegal address,
    say) fails every later call of the process, so the child must be replaced."""
    if not target.is_gpu:
        return ""
    import torch

    try:
        target.synchronize()
        torch.ones(1, device=target.torch_device()).add_(1).item()
    except Exception as exc:
        lines = str(exc).strip().splitlines()
        return lines[0][:300] if lines else type(exc).__name__
    return ""


def _cuda_error(measured: Measured) -> str:
    reason = measured.reason or ""
    return reason if measured.status == "error" and ("CUDA" in reason or "cuda" in reason) else ""


#: Packages a measuring child never uses but transformers imports when they are installed: scikit-learn, at module
#: level for assisted generation's ROC curve in transformers before 5.2x (2.5 s of the BERT child's start on the
#: H200, the health profile's critical path). A None in sys.modules makes a package look absent (find_spec answers
#: None, import raises ModuleNotFoundError), and transformers checks before it imports.
UNUSED = ("sklearn",)


def refuse_unused_imports(names: Sequence[str] = UNUSED) -> None:
    """Make ``names`` unimportable in this process (see UNUSED); one already imported stays."""
    for name in names:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


def warm(modules: list[str]) -> None:
    """Import torch and what the run's cases will import, before the device is known: this runs while the agent
    still probes the machine and plans, so its cost is hidden rather than paid in a case, and frozen out of the
    cycle collector's reach (``agent.imports``). (Creating the CUDA context in a thread meanwhile gained nothing on
    the H200: benchmarks/health_startup.py.)"""
    import_frozen(["torch", *modules])


def rehearse(inbox: Connection, target: Target, policy: TimingPolicy, work: list[tuple[int, Any, Any]],
             benches: dict[int, Any]) -> CaseContext:  # fmt: skip
    """While another process measures: each case's first call prepared without running on the device (each
    benchmark's ``rehearse``), until the parent sends anything, which it does when it needs this process."""
    select(target)
    ctx = CaseContext(target, policy)
    for key, bench, _ in work:  # every one, rehearsed or not: the parent will not send them again
        benches.setdefault(key, bench)
    for key, bench, case in work:
        if inbox.poll(0):
            break
        try:
            benches[key].rehearse(case, ctx)
        except Exception:  # only a head start lost: the case itself will say what is wrong, if anything is
            log.warning("rehearsing %s %s failed; the cases left are not rehearsed", bench.NAME, case.label,
                        exc_info=True)  # fmt: skip
            break
    return ctx


def serve(inbox: Connection, outbox: Connection, imported: float | None = None) -> None:
    """Set up on the device the first message names, say so (with when the imports ended and when the device was
    ready, on the system's monotonic clock, which the parent shares), then measure each case sent. A ``rehearse``
    message before that: prepare the cases named while waiting."""
    benches: dict[int, Any] = {}
    ctx: CaseContext | None = None
    message = inbox.recv()
    if message[0] == "rehearse":
        _, target, policy, work = message
        ctx = rehearse(inbox, target, policy, work, benches)
        message = inbox.recv()
    if message[0] == "stop":  # a spare that was never needed
        return
    _, target, policy = message
    import torch

    if ctx is None or ctx.target.label != target.label:
        select(target)
        ctx = CaseContext(target, policy)
    ctx.policy = policy
    torch.zeros(1, device=target.torch_device()).item()
    outbox.send(("ready", imported, time.monotonic()))
    previous = None
    while True:
        try:
            message = inbox.recv()
        except EOFError:
            break
        if message[0] == "stop":
            break
        if message[0] == "bench":
            benches.setdefault(message[1], message[2])  # one rehearsed already keeps what it built
            continue
        _, key, case = message
        bench = benches[key]
        if previous is not None and previous is not bench:
            previous.close()
        previous = bench
        measured = measure_case(bench, case, ctx)
        sticky = sticky_error(target) if measured.status in ("error", "oom") else ""
        outbox.send((measured, sticky, _cuda_error(measured) or sticky))
        if sticky:
            break
    if previous is not None:
        previous.close()


def main(argv: list[str]) -> None:
    # Ctrl-C reaches the whole process group: the agent decides what stops (agent/stop.py), and stops this process.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    refuse_unused_imports()
    load_plugins(os.environ)  # the parent's plugins, so that what they change holds here too
    warm([m for m in argv[3].split(",") if m] if len(argv) > 3 else [])
    imported = time.monotonic()
    inbox, outbox = Connection(int(argv[1]), writable=False), Connection(int(argv[2]), readable=False)
    outbox.send(("imported", imported))  # the parent may hand this process its cases from now on
    serve(inbox, outbox, imported)
    # Done: out without the interpreter's teardown of torch, transformers and a CUDA context full of cached memory
    # (half a second on the H200, during which the parent waits to hand the device to the next process).
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)

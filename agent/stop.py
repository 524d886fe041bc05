"""A run told to stop keeps what it measured: SIGTERM (a scheduler's time limit, a drain, ``docker stop``) or SIGINT
(Ctrl-C) ends the measuring within seconds, and the run is written and posted with the results it has, marked
``interrupted``, every case it did not finish ``skipped`` with the reason.

The handler only records the request and stops the measuring processes (``on_stop``): the launchers see it between
cases (``Finisher.spent``) and a measuring process that dies of it leaves its case skipped, not failed. A second
signal of the same kind acts as if none were handled (Ctrl-C twice: the agent ends at once).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

log = logging.getLogger(__name__)

#: The signals a run stops on, keeping what it measured.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Stop:
    """Whether the run was told to stop, and why; what to do at once when it is (stop the measuring processes)."""

    def __init__(self) -> None:
        self.signal: signal.Signals | None = None
        self._actions: list[Callable[[], None]] = []
        self._lock = threading.RLock()  # the handler runs in the main thread, maybe inside ``on_stop``'s hold

    @property
    def requested(self) -> bool:
        return self.signal is not None

    @property
    def reason(self) -> str:
        name = self.signal.name if self.signal is not None else "a stop"
        return f"the run was told to stop ({name}) before this case ended"

    def on_stop(self, action: Callable[[], None]) -> Callable[[], None]:
        """Call ``action`` when a stop is requested (at once if one was); returns what unregisters it."""
        with self._lock:
            self._actions.append(action)
            late = self.requested
        if late:
            action()

        def forget() -> None:
            with self._lock:
                if action in self._actions:
                    self._actions.remove(action)

        return forget

    def request(self, signum: signal.Signals) -> None:
        with self._lock:
            if self.signal is None:
                self.signal = signum
            actions = list(self._actions)
        for action in actions:
            try:
                action()
            except Exception:  # stopping one process must not keep the others running
                log.warning("stopping after %s: an action failed", signum.name, exc_info=True)

    @property
    def exit_code(self) -> int:
        """128 + the signal's number, as a shell reports a process the signal ended (130 for SIGINT, 143 SIGTERM)."""
        return 128 + int(self.signal) if self.signal is not None else 0


@contextmanager
def stopping_on_signals(stop: Stop) -> Iterator[Stop]:
    """While inside, SIGTERM and SIGINT request ``stop`` (the first of each; the second acts as unhandled). Only the
    main thread can install handlers; elsewhere nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}

    def handle(signum: int, _: FrameType | None) -> None:
        received = signal.Signals(signum)
        signal.signal(received, signal.SIG_DFL if received is signal.SIGTERM else signal.default_int_handler)
        log.warning("%s: stopping the measuring; the run keeps what it measured", received.name)
        stop.request(received)

    for s in STOP_SIGNALS:
        signal.signal(s, handle)
    try:
        yield stop
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)

"""A plugin (FLOPFLEET_PLUGINS) that makes the Nth measuring child to load it start late: it sleeps before its
imports, as a child on a loaded host would, so a test can have a relay that is not ready when its turn comes.
``FLOPFLEET_TEST_SLOW_DIR``: where the children take their numbers; ``FLOPFLEET_TEST_SLOW_NTH``: which one sleeps
(for ``FLOPFLEET_TEST_SLOW_S`` seconds)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def _number(folder: Path) -> int:
    """The first free number in ``folder``, taken by creating its file (exclusive: two children never share one)."""
    n = 1
    while True:
        try:
            os.close(os.open(folder / str(n), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return n
        except FileExistsError:
            n += 1


_FOLDER = os.environ.get("FLOPFLEET_TEST_SLOW_DIR")
if _FOLDER and _number(Path(_FOLDER)) == int(os.environ.get("FLOPFLEET_TEST_SLOW_NTH", "3")):
    time.sleep(float(os.environ.get("FLOPFLEET_TEST_SLOW_S", "60")))

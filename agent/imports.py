"""How a process of the agent imports its heavy modules (torch, transformers): with the cycle collector off, and what
they made then frozen out of its reach.

Why: importing torch and transformers' four model families leaves about 371,000 objects the collector tracks, all
living as long as the process. With the collector on, the import ran full collections over them as they grew (3.30
s against 2.56 s with it off, the median of three fresh interpreters each, this repository's CPU venv:
``benchmarks/import_gc.py``), and every later full collection walks them all: 173 ms for each ``gc.collect()`` (a
measuring process calls one before each model it builds, eight for the standard suite's layer blocks alone) and for
each automatic one, on the measuring process's critical path. ``gc.freeze`` moves them to a generation the
collector never visits (a collection then took 0.2 ms); what is made later (models, results) is collected as before.
On an H200 machine's host the same benchmark read 8.26 against 7.86 s of imports and 172 against 0.29 ms a
collection, and a warm standard run's model builds took 3.67 against 5.63 s (docs/results/h200.md, 2026-12-04).
"""

from __future__ import annotations

import gc
import importlib
import sys
from collections.abc import Sequence


def import_frozen(names: Sequence[str]) -> list[str]:
    """Import ``names`` in order with the collector off, then freeze every object alive and turn the collector back
    on if it was. Nothing happens to the collector when every name is imported already (a test process, a second run
    in one process): freezing there would keep whatever garbage was alive at that moment for good. Returns the names
    that failed to import (the case that needs one says so itself)."""
    if all(name in sys.modules for name in names):
        return []
    enabled = gc.isenabled()
    gc.disable()
    missing = []
    try:
        for name in names:
            try:
                importlib.import_module(name)
            except ImportError:
                missing.append(name)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
    return missing

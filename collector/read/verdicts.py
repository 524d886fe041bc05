"""The fleet's verdicts and what ``/metrics`` says of each GPU, kept per store and brought up to date with what each
refresh changed.

A refresh summarises a range of commits (``Store.generation`` names how far); the devices of the runs in that range
are the only ones whose rows may have changed (``Reads.devices_committed``). Their rows are read again and
``analysis.fleet_verdicts.FleetJudge`` judges again only what they moved, so the first page or scrape after a
refresh costs about what a later one does, not a judgement of the whole fleet (docs/results/collector.md, "Verdicts
that cost what changed"). A store opened again, other baselines, or a reader without a generation: the fleet is
judged anew.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from schemas.baselines import BaselineIndex
from schemas.health_figures import HEALTH_FIGURES
from schemas.judgement import GpuJudgement
from schemas.labels import PER_WATT_SUFFIX

from ..analysis.fleet_verdicts import DRIFT, FleetJudge
from ..analysis.health import CLOCK_FIGURE, FIGURE_KEYS, FleetMetrics
from ..store.figures import BY_KEY
from ..store.reads import Reads
from ..store.tables import COUNTERS

#: Stores whose verdicts are kept (a server has one; tests open many).
STORES_KEPT = 4
#: Per-watt twins of the health figures that ``/metrics`` exports.
PER_WATT = [key + PER_WATT_SUFFIX for key in HEALTH_FIGURES if key + PER_WATT_SUFFIX in BY_KEY]


class KeptVerdicts:
    """One store's verdicts as of ``generation``, judged against ``baselines``, and each GPU's per-watt figures."""

    def __init__(self, baselines: BaselineIndex, drift: float = DRIFT) -> None:
        self.judge = FleetJudge(baselines, drift)
        self.generation: tuple[int, int] | None = None
        self.per_watt: dict[str, list[tuple[Any, ...]]] = {}
        self.lock = threading.Lock()

    def follow(self, reads: Reads) -> None:
        """Up to date with ``reads``' generation: the rows of the devices the refreshes since changed read again
        (every device's the first time, or where ``reads`` has no generation)."""
        generation = reads.generation
        with self.lock:
            if generation is None or self.generation is None:
                self._read(reads, None)
            elif generation[1] > self.generation[1]:
                changed = reads.devices_committed(self.generation[1], generation[1])
                if changed:
                    self._read(reads, changed)
            else:
                return  # as new as this reader's, or newer
            self.generation = generation

    def verdicts(self) -> list[GpuJudgement]:
        with self.lock:
            return self.judge.verdicts

    def metrics(self) -> FleetMetrics:
        with self.lock:
            return FleetMetrics(self.judge.verdicts, self.judge.counters(), tuple(name for name, _ in COUNTERS),
                                dict(self.per_watt))  # fmt: skip

    def _read(self, reads: Reads, devices: list[str] | None) -> None:
        """Read the rows of ``devices`` (None: every one) and bring the verdicts up to date with them."""
        self.judge.update(
            reads.health_devices(devices=devices),
            reads.health_history(FIGURE_KEYS, devices=devices),
            reads.latest_counters(devices=devices),
            reads.health_figures([CLOCK_FIGURE], devices=devices),
            changed=devices,
        )
        if devices is None:
            self.per_watt.clear()
        else:
            for device in devices:
                self.per_watt.pop(device, None)
        for row in reads.latest_per_watt(PER_WATT, devices):
            self.per_watt.setdefault(str(row[0]), []).append(row)


_KEPT: OrderedDict[int, KeptVerdicts] = OrderedDict()
_KEPT_LOCK = threading.Lock()


def kept(reads: Reads, baselines: BaselineIndex) -> KeptVerdicts:
    """The verdicts kept for ``reads``' store, up to date with its generation (a reader without one: judged anew)."""
    generation = reads.generation
    if generation is None:
        fresh = KeptVerdicts(baselines)
        fresh.follow(reads)
        return fresh
    with _KEPT_LOCK:
        found = _KEPT.get(generation[0])
        if found is None or found.judge.baselines is not baselines:
            found = _KEPT[generation[0]] = KeptVerdicts(baselines)
        _KEPT.move_to_end(generation[0])
        while len(_KEPT) > STORES_KEPT:
            _KEPT.popitem(last=False)
    found.follow(reads)
    return found

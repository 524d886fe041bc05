"""Fleet health: each GPU as the collector observes it, judged by the one judge, with the likely cause of a shortfall.

The judge is shared with the agent's ``check``: both hand their observations to ``schemas.observations`` (by the rule
of ``schemas.verdicts``: a figure's latest measurement fails when it is more than its threshold below a reference;
two failures among its latest three confirm it, ``slow``; one is ``suspect``; a fatal counter makes the GPU
``faulty``). Here the collector only turns what it keeps into observations (``observe``: a GPU's latest run and
counters, each health figure's kept measurements, ``health_history``) and adds the likely causes, which only the
fleet's view can weigh against the peers' recorded state (power limit, throttling, ECC, clocks, other processes,
software). ``fleet_verdicts.FleetJudge`` keeps a fleet's observations and verdicts between refreshes and judges
again only what changed.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from schemas.baselines import SOFTWARE
from schemas.environment import FAULT_REASONS
from schemas.health_figures import HEALTH_FIGURES
from schemas.judgement import GpuFacts, GpuJudgement, Reading
from schemas.observations import Observed, median_without
from schemas.verdicts import SEVERITY

#: The figures health judges, in the order pages show them.
FIGURE_KEYS = list(HEALTH_FIGURES)
#: The figure whose case's SM clock is compared with the peers' (a slow GPU's clock is a likely cause).
CLOCK_FIGURE = "matmul_bf16"


def observe(row: dict[str, Any], history: dict[str, Any], counters: dict[str, Any] | None) -> Observed:
    """A GPU as the collector observes it: ``row`` its latest run (``Reads.health_devices``), ``history`` per figure
    its kept measurements and their suites, newest first (``Reads.health_history``), ``counters`` its latest run's
    (``Reads.latest_counters``)."""
    link = (row["pcie_gen"], row["pcie_gen_max"], row["pcie_width"], row["pcie_width_max"])
    gpu = GpuFacts(
        uuid=str(row["device_id"]), index=row["gpu_index"], name=str(row["gpu_name"] or ""),
        model=str(row["gpu_model"]), card=str(row["card"]), host=str(row["hostname"]), run_id=str(row["run_id"]),
        suite=str(row["suite"]), power_limit_default_w=row["power_limit_default_w"],
        software={k: row.get(k) for k in SOFTWARE},
        readings=(Reading(counters, tuple((counters or {}).get("xids") or ()), link),), started_at=row["started_at"],
    )  # fmt: skip
    figures = {key: tuple(zip(values, suites, strict=True)) for key, (values, suites) in history.items()}
    return Observed(gpu, figures)


class Peers:
    """One model's GPUs' recorded state, asked about everyone but one of them: clocks, software, ECC, each answer in
    O(log n), so weighing a model's n GPUs costs n log n rather than n². A GPU is added or taken away as the fleet's
    verdicts are kept (``fleet_verdicts``)."""

    def __init__(self) -> None:
        self.clocks: list[float] = []
        self.max_clocks: list[int] = []
        self.versions: Counter[tuple[Any, Any, Any]] = Counter()
        self.ecc: Counter[bool] = Counter()
        self.count = 0

    def add(self, row: dict[str, Any], clock: int | None) -> None:
        """Count one more GPU: its latest run's ``row`` and its matmul's SM clock."""
        self._count(row, clock, 1)

    def remove(self, row: dict[str, Any], clock: int | None) -> None:
        """Count one GPU no more (as it was added)."""
        self._count(row, clock, -1)

    def _count(self, row: dict[str, Any], clock: int | None, by: int) -> None:
        if clock:
            _count_sorted(self.clocks, float(clock), by)
        if isinstance(most := row["sm_clock_max_mhz"], int):
            _count_sorted(self.max_clocks, most, by)
        _count_in(self.versions, (row["torch"], row["cuda"], row["driver"]), by)
        if row["ecc_enabled"] is not None:
            _count_in(self.ecc, row["ecc_enabled"], by)
        self.count += by


def _count_sorted(values: list[Any], value: Any, by: int) -> None:
    """Add ``value`` to the sorted ``values`` (``by`` 1), or take one away (-1)."""
    if by > 0:
        bisect.insort(values, value)
    else:
        del values[bisect.bisect_left(values, value)]


def _count_in(counts: Counter[Any], key: Any, by: int) -> None:
    """Count ``key`` once more or once less, keeping no count of 0 (``Counter`` equality counts them)."""
    counts[key] += by
    if counts[key] <= 0:
        del counts[key]


def _range_without(values: list[int], mine: int | None) -> tuple[int, int] | None:
    """The lowest and highest of ``values`` (sorted; holding ``mine`` unless it is None) without one ``mine``."""
    if len(values) - (mine is not None) <= 0:
        return None
    if mine is None:
        return values[0], values[-1]
    i = bisect.bisect_left(values, mine)
    return values[1] if i == 0 else values[0], values[-2] if i == len(values) - 1 else values[-1]


def causes(row: dict[str, Any], peers: Peers, clock: int | None, slow: bool) -> tuple[str, ...]:
    """What the run's recorded state says could slow this GPU; clock comparisons only matter when it is slow."""
    out = []
    limit, default = row["power_limit_w"], row["power_limit_default_w"]
    if isinstance(limit, float) and isinstance(default, float) and limit < default - 1:
        out.append(f"power limit {limit:.0f} W, below the default {default:.0f} W")
    reasons = row["throttle_reasons_seen"]
    seen = set(reasons) if isinstance(reasons, list) else set()
    if seen & FAULT_REASONS:
        out.append("thermal or hardware slowdown during the run: " + ", ".join(sorted(seen & FAULT_REASONS)))
    others = row["other_processes"]
    if isinstance(others, int) and others > 0:
        out.append(f"{others} other process{'es' if others > 1 else ''} on the GPU during the run")
    ecc = row["ecc_enabled"]
    if ecc is not None and sum(peers.ecc.values()) > 1 and peers.ecc[ecc] == 1:
        mine, theirs = ("on", "off") if ecc else ("off", "on")
        out.append(f"ECC {mine}, while its peers run with ECC {theirs}")
    peer_clock = median_without(peers.clocks, clock) if slow and clock else None
    if clock is not None and peer_clock is not None and clock < 0.9 * peer_clock:
        out.append(f"SM clock {clock} MHz during the matmul, its peers {peer_clock:.0f} MHz")
    mine_version = (row["torch"], row["cuda"], row["driver"])
    if peers.count > 1 and peers.versions[mine_version] == 1:
        common = max(sorted((v for v in peers.versions if v != mine_version), key=str), key=peers.versions.__getitem__)
        out.append(
            f"runs torch {mine_version[0]}, CUDA {mine_version[1]}, driver {mine_version[2]}; its peers torch "
            f"{common[0]}, CUDA {common[1]}, driver {common[2]}"
        )
    mine_max = row["sm_clock_max_mhz"]
    peer_max = _range_without(peers.max_clocks, mine_max if isinstance(mine_max, int) else None) if slow else None
    if isinstance(mine_max, int) and peer_max and mine_max < peer_max[0]:
        out.append(f"maximum SM clock {mine_max} MHz, its peers {peer_max[1]} MHz")
    if slow and not out:
        out.append("no cause recorded in its state")
    return tuple(out)


def worst_first(v: GpuJudgement) -> tuple[int, float, str, str]:
    """A verdict's place where pages list them: the most severe, then the furthest below, first."""
    return SEVERITY.index(v.level), -(v.slow_by or 0), v.gpu_model, v.hostname


@dataclass(frozen=True)
class FleetMetrics:
    """What ``/metrics`` says of each GPU: its verdict (with its latest figures), its latest error counters and
    per-watt figures."""

    verdicts: list[GpuJudgement]
    #: Each GPU's error counters as its latest run ended (``Reads.latest_counters``' rows), by device.
    counters: dict[str, dict[str, Any]]
    #: The error counters' names, in the order their series are written (``store.tables.COUNTERS``).
    counter_names: tuple[str, ...]
    #: Each GPU's latest per-watt twin of each health figure, by device: rows of (device, GPU model, card, hostname,
    #: figure, value) (``Reads.latest_per_watt``).
    per_watt: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)

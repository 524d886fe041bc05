"""Fleet health: each GPU against its model's other GPUs, its own history, its card's baseline and its model's floor,
with the likely cause of a shortfall and the error counters that say it is broken.

The judge is shared with the agent's ``check`` (``schemas.judgement.judge_gpu``, by the rule of
``schemas.verdicts``): a figure's latest measurement fails when it is more than its threshold below a reference; two
failures among its latest three measurements confirm it (``slow``), one is ``suspect``; a fatal counter makes the
GPU ``faulty``. Here the collector only gathers its inputs from what it keeps: the peers' medians, each GPU's kept
history (``health_history``), the figure's run-to-run spread over the model's GPUs (its threshold) and the latest
counters. The recorded state of the latest run (power limit, throttling, ECC, clocks, other processes, software),
which only the fleet's view can weigh against the peers', names the likely cause.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from schemas.baselines import SOFTWARE, BaselineIndex
from schemas.environment import FAULT_REASONS
from schemas.health_figures import HEALTH_FIGURES
from schemas.judgement import GpuFacts, GpuJudgement, Measured, Reading, judge_gpu
from schemas.verdicts import SEVERITY, FigureJudgement, GpuVerdict, Level, minimum_threshold, threshold_from_spread

#: The figures health judges, in the order pages show them.
FIGURE_KEYS = list(HEALTH_FIGURES)


@dataclass(frozen=True, slots=True)
class Verdict:
    """A GPU's verdict as the collector shows it: the shared judgement, when its latest run started, and the likely
    causes of a shortfall that its recorded state names."""

    judgement: GpuJudgement
    started_at: object
    causes: list[str] = field(default_factory=list)

    @property
    def device(self) -> str:
        return str(self.judgement.gpu.uuid)

    @property
    def card(self) -> str:
        return self.judgement.gpu.card

    @property
    def gpu_model(self) -> str:
        return self.judgement.gpu.model

    @property
    def hostname(self) -> str:
        return self.judgement.gpu.host

    @property
    def run_id(self) -> str:
        return self.judgement.gpu.run_id

    @property
    def gpu_index(self) -> int | None:
        return self.judgement.gpu.index

    @property
    def level(self) -> Level:
        return self.judgement.level

    @property
    def figures(self) -> dict[str, FigureJudgement]:
        return self.judgement.figures

    @property
    def faults(self) -> list[str]:
        return list(self.judgement.faults)

    @property
    def baseline(self) -> str:
        """What it was held against beyond peers and history (``baseline_summary``)."""
        return self.judgement.baseline

    @property
    def verdict(self) -> str:
        return str(self.level.value)

    @property
    def slow_by(self) -> float | None:
        """The largest shortfall of a failing figure (0.2: 20 % below its reference)."""
        falls = [s[1] for j in self.figures.values() if j.level in (Level.slow, Level.suspect) and (s := j.shortfall)]
        return max(falls) if falls else None

    @property
    def reasons(self) -> list[str]:
        """Why the level: the counters that make it faulty, then each failing figure (or why nothing compared)."""
        return list(self.judgement.reasons)

    @property
    def text(self) -> str:
        if self.level in (Level.slow, Level.suspect) and self.slow_by is not None:
            return f"{self.level.value}: {self.slow_by:.0%} below"
        if self.level is Level.unknown:
            return "unknown: nothing to compare"
        return self.verdict


#: A GPU's figure: (latest value, its peak fraction, median SM clock in its largest case, the suite that measured it).
Found = tuple[float, float | None, int | None, str]


_NONE: Found = (0.0, None, None, "")


def _figures(rows: list[tuple[Any, ...]]) -> dict[tuple[str, str], Found]:
    """(device, figure) -> (latest value, its peak fraction, median SM clock in its largest case, its run's suite),
    from the device's latest run that measured that figure (a later run of only some benchmarks does not hide
    earlier figures)."""
    return {
        (device, figure): (float(v), float(p) if p is not None else None, int(c) if c is not None else None, str(s))
        for device, figure, v, p, c, s in rows
    }


class _Others:
    """One model's GPUs, asked about everyone but one of them: its peers' median, range and mix, each answer in
    O(log n), so judging a model's n GPUs costs n log n rather than n²."""

    def __init__(self, devices: list[dict[str, Any]], figures: dict[tuple[str, str], Found]) -> None:
        ids = [str(d["device_id"]) for d in devices]
        # Per figure and the suite that measured it: the suites time alike figures differently (as the history).
        self.values: dict[tuple[str, str], list[float]] = {}
        for i in ids:
            for key in FIGURE_KEYS:
                if (i, key) in figures:
                    value, _, _, suite = figures[(i, key)]
                    self.values.setdefault((key, suite), []).append(value)
        for values in self.values.values():
            values.sort()
        self.clocks = sorted(float(c) for i in ids if (c := figures.get((i, "matmul_bf16"), _NONE)[2]))
        self.max_clocks = sorted(m for d in devices if isinstance(m := d["sm_clock_max_mhz"], int))
        self.versions = Counter((d["torch"], d["cuda"], d["driver"]) for d in devices)
        self.ecc = Counter(d["ecc_enabled"] for d in devices if d["ecc_enabled"] is not None)
        self.count = len(devices)


def _median_without(values: list[float], mine: float | None) -> float | None:
    """The median of ``values`` (sorted; holding ``mine`` unless it is None) without one ``mine``; None if empty."""
    n = len(values) - (mine is not None)
    if n <= 0:
        return None
    i = bisect.bisect_left(values, mine) if mine is not None else n + 1

    def at(j: int) -> float:
        return values[j if j < i else j + 1]

    return at(n // 2) if n % 2 else (at(n // 2 - 1) + at(n // 2)) / 2


def _range_without(values: list[int], mine: int | None) -> tuple[int, int] | None:
    """The lowest and highest of ``values`` (sorted; holding ``mine`` unless it is None) without one ``mine``."""
    if len(values) - (mine is not None) <= 0:
        return None
    if mine is None:
        return values[0], values[-1]
    i = bisect.bisect_left(values, mine)
    return values[1] if i == 0 else values[0], values[-2] if i == len(values) - 1 else values[-1]


def _causes(row: dict[str, Any], peers: _Others, clock: int | None, slow: bool) -> list[str]:
    """What the run's recorded state says could slow this GPU; clock comparisons only matter when it is slow."""
    causes = []
    limit, default = row["power_limit_w"], row["power_limit_default_w"]
    if isinstance(limit, float) and isinstance(default, float) and limit < default - 1:
        causes.append(f"power limit {limit:.0f} W, below the default {default:.0f} W")
    reasons = row["throttle_reasons_seen"]
    seen = set(reasons) if isinstance(reasons, list) else set()
    if seen & FAULT_REASONS:
        causes.append("thermal or hardware slowdown during the run: " + ", ".join(sorted(seen & FAULT_REASONS)))
    others = row["other_processes"]
    if isinstance(others, int) and others > 0:
        causes.append(f"{others} other process{'es' if others > 1 else ''} on the GPU during the run")
    ecc = row["ecc_enabled"]
    if ecc is not None and sum(peers.ecc.values()) > 1 and peers.ecc[ecc] == 1:
        mine, theirs = ("on", "off") if ecc else ("off", "on")
        causes.append(f"ECC {mine}, while its peers run with ECC {theirs}")
    peer_clock = _median_without(peers.clocks, clock) if clock else None
    if slow and clock is not None and peer_clock is not None and clock < 0.9 * peer_clock:
        causes.append(f"SM clock {clock} MHz during the matmul, its peers {peer_clock:.0f} MHz")
    mine_version = (row["torch"], row["cuda"], row["driver"])
    if peers.count > 1 and peers.versions[mine_version] == 1:
        common = max(sorted((v for v in peers.versions if v != mine_version), key=str), key=peers.versions.__getitem__)
        causes.append(
            f"runs torch {mine_version[0]}, CUDA {mine_version[1]}, driver {mine_version[2]}; its peers torch "
            f"{common[0]}, CUDA {common[1]}, driver {common[2]}"
        )
    mine_max = row["sm_clock_max_mhz"]
    peer_max = _range_without(peers.max_clocks, mine_max if isinstance(mine_max, int) else None)
    if slow and isinstance(mine_max, int) and peer_max and mine_max < peer_max[0]:
        causes.append(f"maximum SM clock {mine_max} MHz, its peers {peer_max[1]} MHz")
    return causes


def fleet_health(
    devices: list[dict[str, Any]],
    figure_rows: list[tuple[Any, ...]],
    history_rows: list[tuple[Any, ...]] = (),  # type: ignore[assignment]
    counter_rows: list[dict[str, Any]] = (),  # type: ignore[assignment]
    model: str | None = None,
    baselines: BaselineIndex | None = None,
) -> list[Verdict]:
    """A verdict for every GPU, worst first. ``devices``: each one's latest run (``Reads.health_devices``);
    ``figure_rows``: ``Reads.health_figures``; ``history_rows``: ``Reads.health_history``; ``counter_rows``:
    ``Reads.latest_counters``; ``model``: only that model's GPUs are judged; ``baselines``: the cards' baselines."""
    baselines = baselines if baselines is not None else BaselineIndex()
    figures = _figures(figure_rows)
    history = {(str(device), str(figure)): [float(v) for v in values] for device, figure, values in history_rows}
    counters = {str(row["device_id"]): row for row in counter_rows}
    by_model: dict[str, list[dict[str, Any]]] = {}
    for d in devices:
        by_model.setdefault(str(d["gpu_model"]), []).append(d)
    peers_of = {name: _Others(members, figures) for name, members in by_model.items()}
    thresholds = {
        (name, key): threshold_from_spread(
            [history.get((str(d["device_id"]), key), []) for d in members], minimum=minimum_threshold(key)
        )
        for name, members in by_model.items()
        for key in FIGURE_KEYS
    }
    verdicts = []
    for d in devices:
        if model is not None and d["gpu_model"] != model:
            continue
        device, name = str(d["device_id"]), str(d["gpu_model"])
        peers = peers_of[name]
        measured = {}
        for key in FIGURE_KEYS:
            found = figures.get((device, key))
            if found is None:
                continue
            alike = peers.values[(key, found[3])]
            median = _median_without(alike, found[0])
            measured[key] = Measured(history.get((device, key)) or [found[0]], found[3],
                                     (median, len(alike) - 1) if median is not None else None,
                                     thresholds[(name, key)])  # fmt: skip
        row = counters.get(device)
        link = (d["pcie_gen"], d["pcie_gen_max"], d["pcie_width"], d["pcie_width_max"])
        gpu = GpuFacts(
            uuid=device, index=d["gpu_index"], name=str(d["gpu_name"] or ""), model=name, card=str(d["card"]),
            host=str(d["hostname"]), run_id=str(d["run_id"]), suite=str(d["suite"]),
            power_limit_default_w=d["power_limit_default_w"], software={k: d.get(k) for k in SOFTWARE},
            readings=(Reading(row, tuple((row or {}).get("xids") or ()), link),),
        )  # fmt: skip
        judged = judge_gpu(gpu, measured, baselines)
        failing = judged.level in (Level.slow, Level.suspect)
        causes = _causes(d, peers, figures.get((device, "matmul_bf16"), _NONE)[2], failing)
        if failing and not causes:
            causes = ["no cause recorded in its state"]
        verdicts.append(Verdict(judged, d["started_at"], causes))
    return sorted(verdicts, key=lambda v: (SEVERITY.index(v.level), -(v.slow_by or 0), v.gpu_model, v.hostname))


def wire(v: Verdict) -> GpuVerdict:
    """A verdict as the API and ``check --json`` give it (the reasons with the likely causes)."""
    return v.judgement.verdict("collector", v.causes)


@dataclass(frozen=True)
class FleetMetrics:
    """What ``/metrics`` says of each GPU: its verdict (with its latest figures) and its latest error counters."""

    verdicts: list[Verdict]
    counters: list[dict[str, Any]]
    #: The error counters' names, in the order their series are written (``store.tables.COUNTERS``).
    counter_names: tuple[str, ...]
    #: (device, GPU model, card, hostname, figure, value): each GPU's latest per-watt twin of each health figure.
    per_watt: list[tuple[Any, ...]] = field(default_factory=list)

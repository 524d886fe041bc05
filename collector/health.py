"""Fleet health: each GPU against its model's other GPUs and its datasheet, with the likely cause of a shortfall.

A GPU's figures come from its latest run. It is "slow" when a key figure falls more than ``SLOW`` below the median
of the same model's other GPUs; the recorded state of that run (power limit, PCIe link, throttling, ECC, clocks,
other processes) names the likely cause.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: A figure this far below its peers' median makes a GPU slow (run-to-run noise on one card is ~1-3 %).
SLOW = 0.05
FAULTS = {"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}

#: The figures health compares: key, label, figure.
HEALTH_METRICS = (
    ("matmul", "BF16 matmul TFLOPS", "matmul_bf16"),
    ("memory", "memory GB/s", "memory"),
    ("bert", "BERT fwd+bwd TFLOPS", "bert_fwdbwd"),
)


@dataclass(frozen=True)
class Figure:
    value: float
    peers: float | None  # median of the same model's other GPUs
    peak_fraction: float | None

    @property
    def ratio(self) -> float | None:
        return self.value / self.peers if self.peers else None


@dataclass(frozen=True)
class Verdict:
    device: str
    card: str
    gpu_model: str
    hostname: str
    run_id: str
    started_at: object
    figures: dict[str, Figure]
    verdict: str  # ok | slow | no peers
    slow_by: float | None
    causes: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        if self.verdict == "slow" and self.slow_by is not None:
            return f"slow by {self.slow_by:.0%}"
        return self.verdict


#: The figures health reads, as the named query ``Reads.health_figures`` takes them.
FIGURE_KEYS = [figure for _, _, figure in HEALTH_METRICS]


#: A GPU's figure: (best value, its peak fraction, median SM clock in its largest case).
Found = tuple[float, float | None, int | None]


def _figures(rows: list[tuple[Any, ...]]) -> dict[tuple[str, str], Found]:
    """(device, metric) -> (best value, its peak fraction, median SM clock in its largest case), from the device's
    latest run that measured that figure (a later run of only some benchmarks does not hide earlier figures)."""
    keys = {figure: key for key, _, figure in HEALTH_METRICS}
    return {
        (device, keys[figure]): (float(v), float(p) if p is not None else None, int(c) if c is not None else None)
        for device, figure, v, p, c in rows
    }


class _Others:
    """One model's GPUs, asked about everyone but one of them: its peers' median, range and mix, each answer in
    O(log n), so judging a model's n GPUs costs n log n rather than n²."""

    def __init__(self, devices: list[dict[str, Any]], figures: dict[tuple[str, str], Found]) -> None:
        ids = [str(d["device_id"]) for d in devices]
        self.values = {
            key: sorted(figures[(i, key)][0] for i in ids if (i, key) in figures) for key, *_ in HEALTH_METRICS
        }
        self.clocks = sorted(float(c) for i in ids if (c := figures.get((i, "matmul"), (0, None, None))[2]))
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
    gen, gen_max, width, width_max = row["pcie_gen"], row["pcie_gen_max"], row["pcie_width"], row["pcie_width_max"]
    if None not in (gen, gen_max, width, width_max) and (gen < gen_max or width < width_max):
        causes.append(f"PCIe link Gen{gen} x{width}, the card supports Gen{gen_max} x{width_max}")
    reasons = row["throttle_reasons_seen"]
    seen = set(reasons) if isinstance(reasons, list) else set()
    if seen & FAULTS:
        causes.append("thermal or hardware slowdown during the run: " + ", ".join(sorted(seen & FAULTS)))
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
    devices: list[dict[str, Any]], figure_rows: list[tuple[Any, ...]], model: str | None = None
) -> list[Verdict]:
    """A verdict for every GPU (``devices``: each one's latest run, ``Reads.health_devices``; ``figure_rows``:
    ``Reads.health_figures``), slowest first; ``model``: only that model's GPUs are judged."""
    figures = _figures(figure_rows)
    by_model: dict[str, list[dict[str, Any]]] = {}
    for d in devices:
        by_model.setdefault(str(d["gpu_model"]), []).append(d)
    peers_of = {name: _Others(members, figures) for name, members in by_model.items()}
    verdicts = []
    for d in devices:
        if model is not None and d["gpu_model"] != model:
            continue
        device = str(d["device_id"])
        peers = peers_of[str(d["gpu_model"])]
        mine: dict[str, Figure] = {}
        worst: float | None = None
        for key, *_ in HEALTH_METRICS:
            found = figures.get((device, key))
            if found is None:
                continue
            figure = Figure(found[0], _median_without(peers.values[key], found[0]), found[1])
            mine[key] = figure
            if figure.ratio is not None:
                worst = figure.ratio if worst is None else min(worst, figure.ratio)
        clock = figures.get((device, "matmul"), (0, None, None))[2]
        if worst is None:
            verdict, slow_by = "no peers", None
        elif worst < 1 - SLOW:
            verdict, slow_by = "slow", 1 - worst
        else:
            verdict, slow_by = "ok", None
        causes = _causes(d, peers, clock, verdict == "slow")
        if verdict == "slow" and not causes:
            causes = ["no cause recorded in its state"]
        verdicts.append(
            Verdict(
                device,
                str(d["card"]),
                str(d["gpu_model"]),
                str(d["hostname"]),
                str(d["run_id"]),
                d["started_at"],
                mine,
                verdict,
                slow_by,
                causes,
            )
        )
    return sorted(verdicts, key=lambda v: (-(v.slow_by or 0), v.gpu_model, v.hostname))

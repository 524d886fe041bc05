"""Fleet health: each GPU against its model's other GPUs and its datasheet, with the likely cause of a shortfall.

A GPU's figures come from its latest run. It is "slow" when a key figure falls more than ``SLOW`` below the median
of the same model's other GPUs; the recorded state of that run (power limit, PCIe link, throttling, ECC, clocks,
other processes) names the likely cause.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

import duckdb

from .compare import _FIGURES_OF

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


_LATEST = """
    WITH latest AS (
        SELECT device_id, arg_max(run_id, started_at) AS run_id, arg_max(gpu_index, started_at) AS gpu_index
        FROM devices WHERE gpu_name IS NOT NULL AND source = 'agent' GROUP BY device_id)
    SELECT d.* FROM devices d JOIN latest l ON d.run_id = l.run_id AND d.gpu_index = l.gpu_index
"""


def _figures(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], tuple[float, float | None, int | None]]:
    """(device, metric) -> (best value, its peak fraction, median SM clock in its largest case), from the device's
    latest run that measured that figure (a later run of only some benchmarks does not hide earlier figures)."""
    keys = {figure: key for key, _, figure in HEALTH_METRICS}
    rows = con.execute(
        f"SELECT d.device_id, f.figure, arg_max(f.value, d.started_at), arg_max(f.peak_fraction, d.started_at), "
        f"arg_max(f.sm_clock_mhz, d.started_at) FROM {_FIGURES_OF} WHERE d.source = 'agent' AND d.gpu_name IS NOT "
        "NULL AND f.figure IN (SELECT unnest(?::VARCHAR[])) GROUP BY d.device_id, f.figure",
        [list(keys)],
    ).fetchall()
    return {
        (device, keys[figure]): (float(v), float(p) if p is not None else None, int(c) if c is not None else None)
        for device, figure, v, p, c in rows
    }


def _causes(
    row: dict[str, object], peers: list[dict[str, object]], clock: int | None, peer_clocks: list[int], slow: bool
) -> list[str]:
    """What the run's recorded state says could slow this GPU; clock comparisons only matter when it is slow."""
    causes = []
    limit, default = row["power_limit_w"], row["power_limit_default_w"]
    if isinstance(limit, float) and isinstance(default, float) and limit < default - 1:
        causes.append(f"power limit {limit:.0f} W, below the default {default:.0f} W")
    gen, gen_max, width, width_max = row["pcie_gen"], row["pcie_gen_max"], row["pcie_width"], row["pcie_width_max"]
    if None not in (gen, gen_max, width, width_max) and (gen < gen_max or width < width_max):  # type: ignore[operator]
        causes.append(f"PCIe link Gen{gen} x{width}, the card supports Gen{gen_max} x{width_max}")
    reasons = row["throttle_reasons_seen"]
    seen = set(reasons) if isinstance(reasons, list) else set()
    if seen & FAULTS:
        causes.append("thermal or hardware slowdown during the run: " + ", ".join(sorted(seen & FAULTS)))
    others = row["other_processes"]
    if isinstance(others, int) and others > 0:
        causes.append(f"{others} other process{'es' if others > 1 else ''} on the GPU during the run")
    peer_ecc = [p["ecc_enabled"] for p in peers if p["ecc_enabled"] is not None]
    if row["ecc_enabled"] is not None and peer_ecc and all(e != row["ecc_enabled"] for e in peer_ecc):
        mine, theirs = ("on", "off") if row["ecc_enabled"] else ("off", "on")
        causes.append(f"ECC {mine}, while its peers run with ECC {theirs}")
    if slow and clock is not None and peer_clocks and clock < 0.9 * statistics.median(peer_clocks):
        causes.append(f"SM clock {clock} MHz during the matmul, its peers {statistics.median(peer_clocks):.0f} MHz")
    versions = [(p["torch"], p["cuda"], p["driver"]) for p in peers]
    mine_version = (row["torch"], row["cuda"], row["driver"])
    if versions and mine_version not in versions:
        common = max(set(versions), key=versions.count)
        causes.append(
            f"runs torch {mine_version[0]}, CUDA {mine_version[1]}, driver {mine_version[2]}; its peers torch "
            f"{common[0]}, CUDA {common[1]}, driver {common[2]}"
        )
    peer_max = [p["sm_clock_max_mhz"] for p in peers if isinstance(p["sm_clock_max_mhz"], int)]
    mine_max = row["sm_clock_max_mhz"]
    if slow and isinstance(mine_max, int) and peer_max and mine_max < min(peer_max):
        causes.append(f"maximum SM clock {mine_max} MHz, its peers {max(peer_max)} MHz")
    return causes


def fleet_health(con: duckdb.DuckDBPyConnection, model: str | None = None) -> list[Verdict]:
    """A verdict for every GPU (its latest run), slowest first."""
    cur = con.execute(_LATEST)
    names = [d[0] for d in cur.description or []]
    devices = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    figures = _figures(con)
    by_model: dict[str, list[dict[str, object]]] = {}
    for d in devices:
        by_model.setdefault(str(d["gpu_model"]), []).append(d)
    verdicts = []
    for d in devices:
        if model is not None and d["gpu_model"] != model:
            continue
        device = str(d["device_id"])
        peers = [p for p in by_model[str(d["gpu_model"])] if p["device_id"] != device]
        mine: dict[str, Figure] = {}
        worst: float | None = None
        for key, *_ in HEALTH_METRICS:
            found = figures.get((device, key))
            if found is None:
                continue
            peer_values = [
                figures[(str(p["device_id"]), key)][0] for p in peers if (str(p["device_id"]), key) in figures
            ]
            figure = Figure(found[0], statistics.median(peer_values) if peer_values else None, found[1])
            mine[key] = figure
            if figure.ratio is not None:
                worst = figure.ratio if worst is None else min(worst, figure.ratio)
        clock = figures.get((device, "matmul"), (0, None, None))[2]
        peer_clocks = [c for p in peers if (c := figures.get((str(p["device_id"]), "matmul"), (0, None, None))[2])]
        if worst is None:
            verdict, slow_by = "no peers", None
        elif worst < 1 - SLOW:
            verdict, slow_by = "slow", 1 - worst
        else:
            verdict, slow_by = "ok", None
        causes = _causes(d, peers, clock, peer_clocks, verdict == "slow")
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

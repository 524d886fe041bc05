"""The GPU's energy counter (NVML total energy): how often it moves, by how much, and how long a window must be for
the mean power read from it to be right. Run on a GPU machine; prints a table, writes JSON with ``--out``:

    python benchmarks/energy_counter.py --out energy.json

1. The cost of one read, and the counter at idle: the time between its changes and the size of each step.
2. Under a steady load (bf16 matmuls in a child process, so the reads here never wait on a launch): the same, the
   reference power (the counter over the whole load), and for each window length the error of the mean power a
   window starting at a random moment reads: divided by the window (two reads), and by the agent's own rule on the
   reads it would take (agent/machine/energy.py).
3. The field-value interface (``nvmlDeviceGetFieldValues``), whose values carry the time the driver sampled them:
   whether a window measured between those timestamps is closer than one measured between the reads' own times.

The GPU's settings are only read, never changed.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the agent's own rule

from agent.machine.energy import OBSERVE_EVERY_S, Window, window_energy

LOAD = """
import sys, time, torch
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
torch.matmul(a, b); torch.cuda.synchronize()
print('ready', flush=True)
end = time.perf_counter() + float(sys.argv[1])
while time.perf_counter() < end:
    for _ in range(20):
        torch.matmul(a, b)
    torch.cuda.synchronize()
"""


def _trace(read: Any, seconds: float) -> list[tuple[float, int]]:
    """Every read for ``seconds``, as fast as they come: (perf_counter, millijoules)."""
    out = []
    end = time.perf_counter() + seconds
    while (now := time.perf_counter()) < end:
        out.append((now, int(read())))
    return out


def _changes(trace: list[tuple[float, int]]) -> tuple[list[float], list[int]]:
    """The time between the counter's changes, and the size of each change."""
    times, steps = [], []
    last_t, last_v = None, trace[0][1]
    for t, v in trace[1:]:
        if v != last_v:
            if last_t is not None:
                times.append(t - last_t)
            steps.append(v - last_v)
            last_t, last_v = t, v
    return times, steps


def _summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "p10": ordered[len(ordered) // 10],
        "median": statistics.median(ordered),
        "p90": ordered[min(len(ordered) - 1, (9 * len(ordered)) // 10)],
    }


def _value_at(trace: list[tuple[float, int]], t: float) -> int:
    """The counter as a read at ``t`` would have found it: the last read at or before ``t``."""
    lo, hi = 0, len(trace) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if trace[mid][0] <= t:
            lo = mid
        else:
            hi = mid - 1
    return trace[lo][1]


def _agent_reads(trace: list[tuple[float, int]], start: float, length: float) -> Window:
    """The reads the agent takes of a window (agent/machine/energy.py): at its start, then at most every
    ``OBSERVE_EVERY_S`` (here: the trace's reads that far apart), and at its end."""
    i = bisect.bisect_left(trace, (start, -1))
    window = Window(trace[i][1], trace[i][0])
    for t, value in trace[i + 1 :]:
        if t > start + length:
            break
        if t - window.read_at >= OBSERVE_EVERY_S:
            window.saw(value, t)
    return window


def _window_errors(trace: list[tuple[float, int]], reference_w: float, windows_ms: list[float]) -> list[dict[str, Any]]:
    """Two estimates of a window's mean power, each at 400 random starts: ``naive`` divides the counter's move between
    the window's two ends by the window; ``agent`` is the agent's own rule (agent/machine/energy.py) on the reads it
    would take, with a board reading 10 % low (a pessimistic stand-in: it decides only between counts the reads allow,
    in windows of 1 s or more)."""
    rng = random.Random(0)
    t0, t1 = trace[0][0], trace[-1][0]
    rows = []
    for ms in windows_ms:
        w = ms / 1e3
        naive, agent, empty = [], [], 0
        for _ in range(400):
            start = rng.uniform(t0, t1 - w)
            joules = (_value_at(trace, start + w) - _value_at(trace, start)) / 1e3
            naive.append(abs(joules / w - reference_w) / reference_w)
            window = _agent_reads(trace, start, w)
            found = (window_energy(window.first, window.last, w, reference_w * 0.9)
                     if window.first is not None and window.last is not None else None)  # fmt: skip
            if found is None:
                empty += 1
            else:
                agent.append(abs(found.power_w - reference_w) / reference_w)
        rows.append({"window_ms": ms, "naive_median": statistics.median(naive), "naive_p95": sorted(naive)[380],
                     "agent_median": statistics.median(agent) if agent else None,
                     "agent_p95": sorted(agent)[int(0.95 * (len(agent) - 1))] if agent else None,
                     "agent_max": max(agent) if agent else None,
                     "no_power": empty / 400})  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--index", type=int, default=0, help="NVML index of the GPU")
    parser.add_argument("--load-s", type=float, default=8.0)
    parser.add_argument("--out")
    args = parser.parse_args()
    import pynvml as nvml

    nvml.nvmlInit()
    handle = nvml.nvmlDeviceGetHandleByIndex(args.index)
    read = lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle)  # noqa: E731
    found: dict[str, Any] = {"gpu": nvml.nvmlDeviceGetName(handle), "uuid": nvml.nvmlDeviceGetUUID(handle),
                             "power_limit_w": nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1e3,
                             "driver": nvml.nvmlSystemGetDriverVersion()}  # fmt: skip

    began = time.perf_counter()
    for _ in range(2000):
        read()
    found["read_us"] = (time.perf_counter() - began) / 2000 * 1e6

    idle = _trace(read, 2.0)
    times, steps = _changes(idle)
    found["idle"] = {"reads": len(idle), "update_s": _summary(times), "step_mj": _summary([float(s) for s in steps]),
                     "power_w": (idle[-1][1] - idle[0][1]) / 1e3 / (idle[-1][0] - idle[0][0]),
                     "power_usage_w": nvml.nvmlDeviceGetPowerUsage(handle) / 1e3}  # fmt: skip

    load = subprocess.Popen([sys.executable, "-c", LOAD, str(args.load_s + 3)], stdout=subprocess.PIPE, text=True)
    assert load.stdout is not None
    load.stdout.readline()
    time.sleep(1.0)  # past the first clock and power ramp
    busy = _trace(read, args.load_s)
    times, steps = _changes(busy)
    reference = (busy[-1][1] - busy[0][1]) / 1e3 / (busy[-1][0] - busy[0][0])
    found["load"] = {"reads": len(busy), "update_s": _summary(times), "step_mj": _summary([float(s) for s in steps]),
                     "power_w": reference, "power_usage_w": nvml.nvmlDeviceGetPowerUsage(handle) / 1e3,
                     "sm_clock_mhz": nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)}  # fmt: skip
    windows: list[float] = [20, 50, 80, 100, 130, 150, 200, 250, 300, 350, 500, 750, 1000, 1500, 2000]
    found["windows"] = _window_errors(busy, reference, windows)

    # Field values: the driver's own timestamp of each sample.
    fields = [nvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, nvml.NVML_FI_DEV_POWER_INSTANT, nvml.NVML_FI_DEV_POWER_AVERAGE]
    stamped: list[tuple[float, int, int, float, float]] = []
    try:
        end = time.perf_counter() + 1.5
        while time.perf_counter() < end:
            energy, instant, average = nvml.nvmlDeviceGetFieldValues(handle, fields)
            stamped.append((time.perf_counter(), int(energy.value.ullVal), int(energy.timestamp),
                            instant.value.uiVal / 1e3, average.value.uiVal / 1e3))  # fmt: skip
        moved = [(s[2], s[1]) for i, s in enumerate(stamped) if i == 0 or s[1] != stamped[i - 1][1]]
        stamp_gaps = [(b[0] - a[0]) / 1e6 for a, b in itertools.pairwise(moved)]
        found["fields"] = {
            "reads": len(stamped),
            "distinct_timestamps": len({s[2] for s in stamped}),
            "update_s_by_timestamp": _summary(stamp_gaps),
            "power_w_by_timestamp": (moved[-1][1] - moved[0][1]) / 1e3 / ((moved[-1][0] - moved[0][0]) / 1e6)
            if len(moved) > 1 else None,
            "power_instant_w": _summary([s[3] for s in stamped]),
            "power_average_w": _summary([s[4] for s in stamped]),
        }  # fmt: skip
    except nvml.NVMLError as error:
        found["fields"] = {"error": str(error)}
    load.wait()
    nvml.nvmlShutdown()

    print(f"{found['gpu']} {found['uuid']} driver {found['driver']}, power limit {found['power_limit_w']:.0f} W")
    print(f"one read: {found['read_us']:.1f} us")
    for phase in ("idle", "load"):
        p = found[phase]
        every = {q: p["update_s"].get(q, float("nan")) * 1e3 for q in ("p10", "median", "p90")}
        print(f"{phase}: {p['reads']} reads, counter moved every {every['median']:.1f} "
              f"ms (p10 {every['p10']:.1f}, p90 {every['p90']:.1f}),"
              f" step median {p['step_mj'].get('median', float('nan')):.0f} mJ; power {p['power_w']:.1f} W "
              f"(nvmlDeviceGetPowerUsage {p['power_usage_w']:.1f} W)")  # fmt: skip
    print("window ms   energy/window: median, p95 error   the agent's rule: median, p95, max error   no power")
    for row in found["windows"]:
        held = (f"{row['agent_median']:8.2%} {row['agent_p95']:8.2%} {row['agent_max']:8.2%}"
                if row["agent_median"] is not None else f"{'-':>8} {'-':>8} {'-':>8}")  # fmt: skip
        print(
            f"{row['window_ms']:9.0f}   {row['naive_median']:8.2%} {row['naive_p95']:8.2%}            {held}"
            f"           {row['no_power']:6.0%}"
        )
    print("fields:", json.dumps(found["fields"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(found, f, indent=1)


if __name__ == "__main__":
    main()

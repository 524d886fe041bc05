"""The agent's matmul timing beside an independent harness (triton's ``do_bench``), with the GPU's clocks and power.

For each dtype and size, from the same idle start (``--idle`` seconds without work before each method), in an
order that alternates between cells:

- ``agent``: the agent's own path (``agent.benchmarks.matmul.matmul_op`` timed by the target's timer under the
  suite's policy, ``--policy``), as a standard run measures the cell;
- ``do_bench``: ``triton.testing.do_bench`` run the same way: its warm-up and repetition windows set to the
  milliseconds the agent's warm-up and timed repeats took, median of its per-call CUDA-event times (it zeroes a
  256 MiB buffer before every call: the L2 is cleared);
- ``do_bench 25/100``: do_bench's defaults (25 ms warm-up, 100 ms of repeats), median;
- ``do_bench 1000/500``: a long warm-up (1 s) and 0.5 s of repeats: the GPU well past its power-limit transient.

NVML is sampled every 5 ms in a thread (SM clock, power); each method's row carries the median SM clock and mean
power over its repetition window. ``--series`` adds, for the listed cells, one call after another for
``--series-s`` seconds from idle, each call timed: how the rate moves as the power limit bites.

    python benchmarks/matmul_harness.py --out matmul.json [--sizes 2048,4096,8192,16384] [--dtypes fp32,tf32,fp16,bf16]
    python benchmarks/matmul_harness.py --report matmul.json      # the Markdown table of a file it wrote
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.benchmarks.matmul import float32_precision, matmul_op

try:
    from agent.benchmarks.matmul import sustained
except ImportError:  # an agent from before the standard policy's sustained warm-up (issue #24)

    def sustained(policy: Any, each_call: bool) -> Any:
        return policy


from agent.benchmarks.flops import matmul_flops
from agent.devices.target import Target, target_for
from agent.harness.suites import suite
from scripts.results_files import read

Row = dict[str, Any]


class Sampler:
    """NVML readings (monotonic time, SM clock MHz, power W, GPU °C) every ``interval_s``, in a thread."""

    def __init__(self, index: int, interval_s: float = 0.005) -> None:
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.interval_s = interval_s
        self.readings: list[tuple[float, int, float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.power_limit_w = pynvml.nvmlDeviceGetEnforcedPowerLimit(self._handle) / 1e3

    def _loop(self) -> None:
        m, h = self._nvml, self._handle
        while not self._stop.is_set():
            clock = m.nvmlDeviceGetClockInfo(h, m.NVML_CLOCK_SM)
            power = m.nvmlDeviceGetPowerUsage(h) / 1e3
            celsius = m.nvmlDeviceGetTemperature(h, m.NVML_TEMPERATURE_GPU)
            self.readings.append((time.monotonic(), clock, power, celsius))
            time.sleep(self.interval_s)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._nvml.nvmlShutdown()

    def window(self, start: float, end: float) -> dict[str, float | None]:
        inside = [r for r in self.readings if start <= r[0] <= end]
        if not inside:
            return {"sm_clock_mhz": None, "power_w": None, "temperature_c": None, "samples": 0}
        return {
            "sm_clock_mhz": statistics.median(r[1] for r in inside),
            "power_w": statistics.fmean(r[2] for r in inside),
            "temperature_c": max(r[3] for r in inside),
            "samples": len(inside),
        }


def agent_cell(target: Target, call: Callable[[], object], policy: Any) -> tuple[float, float, float, Row]:
    """The agent's median (s), its warm-up and repeat windows (s), and its timing statistics."""
    timed = target.timer().measure(call, policy)
    stats = timed.stats
    repeats_s = stats.repeats * stats.calls_per_repeat * stats.median_s
    warmup_s = getattr(stats, "warmup_s", None)
    if warmup_s is None:  # an agent without phase timings: what is not repeats was warm-up and capture
        warmup_s = max(stats.total_s - repeats_s, 0.0)
    return stats.median_s, warmup_s, repeats_s, stats.model_dump()


def do_bench_cell(call: Callable[[], object], warmup_ms: float, rep_ms: float) -> float:
    from triton.testing import do_bench

    return float(do_bench(call, warmup=max(warmup_ms, 1.0), rep=max(rep_ms, 1.0), return_mode="median")) / 1e3


def measure_cell(args: argparse.Namespace, target: Target, sampler: Sampler, policy: Any, cell: tuple[str, int],
                 agent_first: bool) -> list[Row]:  # fmt: skip
    """One dtype and size, every method from the same idle start; the agent first or the matched do_bench first."""
    import torch

    dtype, n = cell
    flops = matmul_flops(n, n, n)
    rows: list[Row] = []
    with float32_precision(dtype):
        op = matmul_op(target, dtype, n, n, n)
        agent: dict[str, Any] = {}

        def run_agent() -> tuple[float, float]:
            median, warm, reps, stats = agent_cell(target, op.call, policy)
            agent.update(median=median, warmup_s=warm, repeats_s=reps, stats=stats)
            return median, reps

        def run_matched() -> tuple[float, float]:
            return do_bench_cell(op.call, agent["warmup_s"] * 1e3, agent["repeats_s"] * 1e3), agent["repeats_s"]

        methods: list[tuple[str, Callable[[], tuple[float, float]]]] = [
            ("agent", run_agent),
            ("do_bench", run_matched),
            ("do_bench 25/100", lambda: (do_bench_cell(op.call, 25, 100), 0.1)),
            ("do_bench 1000/500", lambda: (do_bench_cell(op.call, 1000, 500), 0.5)),
        ]
        if not agent_first:  # the matched do_bench needs the agent's windows: a pilot, not reported, gives them
            run_agent()
            methods = [methods[1], methods[0], *methods[2:]]
        for method, run in methods:
            torch.cuda.synchronize()
            time.sleep(args.idle)
            began = time.monotonic()
            seconds, window_s = run()
            ended = time.monotonic()
            state = sampler.window(max(began, ended - window_s), ended)
            row: Row = {"dtype": dtype, "n": n, "method": method, "median_s": seconds,
                        "tflops": flops / seconds / 1e12, "wall_s": ended - began, **state}  # fmt: skip
            if method == "agent":
                row |= {"warmup_s": agent["warmup_s"], "repeats_s": agent["repeats_s"], "timing": agent["stats"]}
            rows.append(row)
    torch.cuda.empty_cache()
    return rows


def measure_cells(args: argparse.Namespace, target: Target, sampler: Sampler) -> list[Row]:
    chosen = suite(args.policy)
    policy = sustained(chosen.policy, getattr(chosen.grids.get("matmul"), "each_call", False))
    cells = [(d, n) for d in args.dtypes for n in args.sizes]
    return [
        row for i, cell in enumerate(cells) for row in measure_cell(args, target, sampler, policy, cell, i % 2 == 0)
    ]


def series(args: argparse.Namespace, target: Target, sampler: Sampler, dtype: str, n: int) -> Row:
    """Calls back to back from idle for ``--series-s``, each timed by CUDA events after an L2 clear (as do_bench)."""
    import torch

    flops = matmul_flops(n, n, n)
    cache = torch.empty(256 << 20, dtype=torch.int8, device=target.torch_device())
    with float32_precision(dtype):
        op = matmul_op(target, dtype, n, n, n)
        op.call()
        torch.cuda.synchronize()
        time.sleep(args.idle_series)
        began = time.monotonic()
        calls: list[tuple[float, float]] = []  # (seconds since start at enqueue, per-call seconds)
        while time.monotonic() - began < args.series_s:
            events = []
            chunk_start = time.monotonic() - began
            for _ in range(args.chunk):
                cache.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                op.call()
                end.record()
                events.append((start, end))
            events[-1][1].synchronize()
            elapsed = 0.0
            for start, end in events:
                seconds = start.elapsed_time(end) / 1e3
                calls.append((chunk_start + elapsed, seconds))
                elapsed += seconds
        ended = time.monotonic()
    buckets: list[Row] = []
    edges = [0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0]
    for low, high in itertools.pairwise(edges):
        inside = [s for t, s in calls if low <= t < high]
        if inside:
            state = sampler.window(began + low, began + high)
            buckets.append({"from_s": low, "to_s": high, "calls": len(inside),
                            "tflops": flops / statistics.median(inside) / 1e12, **state})  # fmt: skip
    return {"dtype": dtype, "n": n, "idle_s": args.idle_series, "wall_s": ended - began, "buckets": buckets,
            "per_call_s": [round(s, 9) for _, s in calls], "at_s": [round(t, 6) for t, _ in calls]}  # fmt: skip


def table(rows: list[Row]) -> str:
    by_cell: dict[tuple[str, int], dict[str, Row]] = {}
    for r in rows:
        by_cell.setdefault((r["dtype"], r["n"]), {})[r["method"]] = r
    head = (
        "dtype  n      agent TF  do_bench TF  ratio   25/100 TF  1000/500 TF  agent/long  clock agent/db/long  "
        "W agent/long"
    )
    lines = [head]
    for (dtype, n), m in by_cell.items():
        a, d, short, long = m["agent"], m["do_bench"], m["do_bench 25/100"], m["do_bench 1000/500"]
        lines.append(
            f"{dtype:5s} {n:6d} {a['tflops']:9.1f} {d['tflops']:12.1f} {a['tflops'] / d['tflops']:7.3f} "
            f"{short['tflops']:10.1f} {long['tflops']:12.1f} {a['tflops'] / long['tflops']:10.3f}  "
            f"{a['sm_clock_mhz'] or 0:5.0f}/{d['sm_clock_mhz'] or 0:5.0f}/{long['sm_clock_mhz'] or 0:5.0f}  "
            f"{a['power_w'] or 0:4.0f}/{long['power_w'] or 0:4.0f}"
        )
    return "\n".join(lines)


def series_table(runs: list[Row]) -> str:
    lines = []
    for s in runs:
        cells = " ".join(
            f"{b['from_s']:g}-{b['to_s']:g}s:{b['tflops']:.0f}@{b['sm_clock_mhz'] or 0:.0f}"
            + (f"/{b['temperature_c']}C" if b.get("temperature_c") is not None else "")
            for b in s["buckets"]
        )
        lines.append(f"{s['dtype']} n={s['n']} after {s.get('idle_s', 1.0):g} s idle: {cells}")
    return "\n".join(lines)


def markdown(doc: Row) -> str:
    """The comparison of a harness file (``--out``) as a Markdown table, for docs/results/h200.md."""
    by_cell: dict[tuple[str, int], dict[str, Row]] = {}
    for r in doc["cells"]:
        by_cell.setdefault((r["dtype"], r["n"]), {})[r["method"]] = r
    lines = [
        "| dtype | n | agent TFLOPS | its timing | do_bench 1000/500 | agent / do_bench 1000/500 | do_bench, the "
        "agent's windows | do_bench 25/100 | SM MHz agent / 1000/500 | W agent / 1000/500 |",
        "|---|---:|---:|---|---:|---:|---:|---:|---|---|",
    ]
    for (dtype, n), m in by_cell.items():
        a, long = m["agent"], m["do_bench 1000/500"]
        t = a["timing"]
        how = f"{t['method']} x{t['calls_per_repeat']}, {t['repeats']} repeats, warm-up {a['warmup_s'] * 1e3:.0f} ms"
        lines.append(
            f"| {dtype} | {n} | {a['tflops']:.1f} | {how} | {long['tflops']:.1f} | {a['tflops'] / long['tflops']:.3f} "
            f"| {m['do_bench']['tflops']:.1f} | {m['do_bench 25/100']['tflops']:.1f} | "
            f"{a['sm_clock_mhz'] or 0:.0f} / {long['sm_clock_mhz'] or 0:.0f} | {a['power_w'] or 0:.0f} / "
            f"{long['power_w'] or 0:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", type=Path, help="print a harness file's comparison as Markdown, measure nothing")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--sizes", default="2048,4096,8192,16384")
    parser.add_argument("--dtypes", default="fp32,tf32,fp16,bf16")
    parser.add_argument("--policy", default="standard", help="the suite whose timing policy the agent uses")
    parser.add_argument("--idle", type=float, default=0.3, help="seconds without work before each method")
    parser.add_argument("--series", default="", help="cells timed call by call from idle, e.g. bf16:16384,tf32:8192")
    parser.add_argument("--series-s", type=float, default=2.0)
    parser.add_argument("--idle-series", type=float, default=1.0)
    parser.add_argument("--no-cells", action="store_true", help="only the series, no method comparison")
    parser.add_argument("--chunk", type=int, default=4, help="series calls enqueued between host synchronisations")
    args = parser.parse_args()
    if args.report:
        report = read(args.report)
        print(markdown(report) + "\n\n" + series_table(report["series"]))
        return
    if args.out is None:
        parser.error("--out is needed to measure")
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.dtypes = args.dtypes.split(",")
    import torch
    import triton

    target = target_for("cuda", 0)
    with Sampler(0) as sampler:
        runs = []
        for cell in filter(None, args.series.split(",")):
            dtype, n = cell.split(":")
            runs.append(series(args, target, sampler, dtype, int(n)))
        rows = [] if args.no_cells else measure_cells(args, target, sampler)
        limit = sampler.power_limit_w
    versions = {"torch": torch.__version__, "cuda": torch.version.cuda, "triton": triton.__version__,
                "gpu": torch.cuda.get_device_name(0), "power_limit_w": limit, "policy": args.policy}  # fmt: skip
    args.out.write_text(json.dumps({"versions": versions, "cells": rows, "series": runs}, indent=1), encoding="utf-8")
    print(json.dumps(versions))
    print(series_table(runs))
    print(table(rows))


if __name__ == "__main__":
    main()

"""A competing process on one GPU: the only way flopfleet slows a lent GPU down for a test (its power limit, clocks
and MIG mode are never touched). It runs until killed; the agent's measurements then share the GPU with it.

- ``--duty D``: bf16 matmuls for D of every ``--period-s``. These slowed the H200's first checks by at most 5 % up to
  50 % duty and by 28 % and more from 55 %, nothing between (docs/results/h200.md): the agent's windows fit between
  their bursts, or do not.
- ``--share S``: one short kernel of about ``--kernel-us`` every ``kernel / S`` seconds. Without MPS two processes
  time-slice the GPU, so the other process loses about S of its time plus the cost of each context switch: a dial
  graded as finely as S. The kernel (``spin``: one thread spinning a number of clock cycles, so that only its time
  is taken, not the GPU's power; or ``matmul``: a square bf16 matmul, as a real competitor's) is sized at start with
  CUDA events, and the calibration printed before ``hog ready``. A kernel still running at the next period is not
  joined by another, so the share asked is an upper bound; on SIGTERM the hog prints what it launched.

    python benchmarks/gpu_hog.py --duty 0.3
    python benchmarks/gpu_hog.py --share 0.05 --kernel-us 50
"""

from __future__ import annotations

import argparse
import math
import signal
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

#: Spin lengths (clock cycles) and matmul sizes timed to size the kernel: the time is close to linear in cycles and
#: in n³ over these ranges, so a line through them is read at the length asked.
SPIN_CYCLES = (20_000, 80_000, 320_000)
MATMUL_SIZES = (1024, 2048, 4096)
#: Kernels timed per point, and to measure the chosen one.
CALIBRATION_REPEATS = 20


def period_for(share: float, kernel_s: float) -> float:
    """The period that gives a kernel of ``kernel_s`` the ``share`` of the GPU's time asked."""
    if not 0 < share < 1:
        raise ValueError(f"share must be in (0, 1), got {share}")
    if kernel_s <= 0:
        raise ValueError(f"kernel time must be positive, got {kernel_s}")
    return kernel_s / share


def fit(points: Sequence[tuple[float, float]], target: float) -> float:
    """The size whose time is ``target`` on the least-squares line through (size, time) points."""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x in xs)
    if slope <= 0:
        raise ValueError(f"kernel time does not grow with its size: {points}")
    return mx + (target - my) / slope


def next_deadline(start: float, period: float, now: float) -> float:
    """The first period boundary after ``now``: missed ones are skipped, not caught up with."""
    return start + (math.floor((now - start) / period) + 1) * period


@dataclass(frozen=True)
class Calibration:
    kernel: str
    size: int  # spin cycles, or the matmul's n
    kernel_s: float  # the chosen kernel's median time, alone on the GPU
    period_s: float
    share: float

    def describe(self) -> str:
        what = f"spin {self.size:,} cycles" if self.kernel == "spin" else f"bf16 matmul {self.size}³"
        return (f"calibration: {what}: {self.kernel_s * 1e6:.1f} µs (median of {CALIBRATION_REPEATS}), period "
                f"{self.period_s * 1e6:.0f} µs: share {self.share:.3f}")  # fmt: skip


def _timed(torch: Any, launch: Callable[[], None], repeats: int = CALIBRATION_REPEATS) -> float:
    """Median seconds of one launch, by CUDA events, after two unmeasured ones."""
    times: list[float] = []
    for i in range(repeats + 2):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        launch()
        end.record()
        end.synchronize()
        if i >= 2:
            times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def kernel_of(torch: Any, kind: str, kernel_s: float, device: str) -> tuple[Callable[[], None], int, float]:
    """A launch of about ``kernel_s``, its size (spin cycles, or the matmul's n) and its measured median time."""
    if kind == "spin":
        points = [(float(n), _timed(torch, _spin(torch, n))) for n in SPIN_CYCLES]
        size = max(1, round(fit(points, kernel_s)))
        launch = _spin(torch, size)
    else:
        points = [(float(n**3), _timed(torch, _matmul(torch, n, device))) for n in MATMUL_SIZES]
        size = max(128, round(max(fit(points, kernel_s), 1.0) ** (1 / 3) / 128) * 128)
        launch = _matmul(torch, size, device)
    return launch, size, _timed(torch, launch)


def _spin(torch: Any, cycles: int) -> Callable[[], None]:
    return lambda: torch.cuda._sleep(cycles)


def _matmul(torch: Any, n: int, device: str) -> Callable[[], None]:
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    return lambda: torch.matmul(a, b)


def hog_share(args: argparse.Namespace) -> None:
    import torch

    torch.cuda.set_device(args.device)
    launch, size, kernel_s = kernel_of(torch, args.kernel, args.kernel_us / 1e6, args.device)
    calibration = Calibration(args.kernel, size, kernel_s, period_for(args.share, kernel_s), args.share)
    print(calibration.describe(), flush=True)
    stop: list[int] = []

    def on_term(signum: int, frame: FrameType | None) -> None:
        stop.append(signum)

    signal.signal(signal.SIGTERM, on_term)
    done = torch.cuda.Event()
    done.record()
    launched = skipped = 0
    print("hog ready", flush=True)
    start = time.perf_counter()
    deadline = start
    while not stop:
        time.sleep(max(0.0, deadline - time.perf_counter()))
        if done.query():
            launch()
            done.record()
            launched += 1
        else:
            skipped += 1
        deadline = next_deadline(start, calibration.period_s, time.perf_counter())
    elapsed = time.perf_counter() - start
    print(f"hog done: {launched} kernels in {elapsed:.1f} s ({launched * kernel_s / elapsed:.3f} of the time at the "
          f"calibrated length), {skipped} periods skipped with the last kernel still running", flush=True)  # fmt: skip


def hog_duty(args: argparse.Namespace) -> None:
    import torch

    a = torch.randn(args.n, args.n, device=args.device, dtype=torch.bfloat16)
    b = torch.randn(args.n, args.n, device=args.device, dtype=torch.bfloat16)
    busy = args.duty * args.period_s
    print("hog ready", flush=True)
    while True:
        start = time.perf_counter()
        while time.perf_counter() - start < busy:
            torch.matmul(a, b)
            torch.cuda.synchronize(args.device)
        idle = args.period_s - (time.perf_counter() - start)
        if idle > 0:
            time.sleep(idle)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--duty", type=float, help="Fraction of each period spent computing (0-1].")
    mode.add_argument("--share", type=float, help="Fraction of the GPU's time to take, (0-1): e.g. 0.05.")
    parser.add_argument("--period-s", type=float, default=0.05, help="--duty's period.")
    parser.add_argument("--n", type=int, default=4096, help="--duty's matmul size: short kernels, so the duty holds.")
    parser.add_argument("--kernel-us", type=float, default=50.0, help="--share's kernel length, in µs.")
    parser.add_argument("--kernel", choices=("spin", "matmul"), default="spin", help="--share's kernel.")
    parser.add_argument("--device", default="cuda:0")
    args = parser.parse_args(argv)
    if args.duty is not None and not 0 < args.duty <= 1:
        parser.error("--duty must be in (0, 1]")
    if args.share is not None and not 0 < args.share < 1:
        parser.error("--share must be in (0, 1)")
    if args.kernel_us <= 0:
        parser.error("--kernel-us must be positive")
    if args.share is not None:
        hog_share(args)
    else:
        hog_duty(args)


if __name__ == "__main__":
    main()

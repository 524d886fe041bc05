"""The competing process that takes a chosen share of a GPU's time (benchmarks/gpu_hog.py --share) and the first
checks measured beside it (benchmarks/baseline_first_checks.py --shares): what they decide on the CPU, before and
after the GPU does its part (measured on the H200 by the command in docs/baselines.md)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from benchmarks.baseline_first_checks import (
    Hog,
    against,
    fractions,
    healthy_median,
    hog_command,
    share_rows,
)
from benchmarks.gpu_hog import Calibration, fit, main, next_deadline, period_for


def test_the_period_gives_the_kernel_the_share_asked() -> None:
    assert period_for(0.05, 50e-6) == pytest.approx(1e-3)
    assert period_for(0.02, 40e-6) == pytest.approx(2e-3)
    with pytest.raises(ValueError, match="share must be in"):
        period_for(1.0, 50e-6)
    with pytest.raises(ValueError, match="kernel time must be positive"):
        period_for(0.05, 0.0)


def test_the_kernel_is_sized_on_the_line_through_its_timings() -> None:
    # a spin kernel: 3 µs to launch, then 0.5 ns a cycle
    points = [(float(c), 3e-6 + c * 0.5e-9) for c in (20_000, 80_000, 320_000)]
    assert fit(points, 50e-6) == pytest.approx(94_000)
    with pytest.raises(ValueError, match="does not grow"):
        fit([(1.0, 2e-6), (2.0, 2e-6)], 50e-6)


def test_a_late_wake_skips_the_missed_periods_instead_of_catching_up() -> None:
    assert next_deadline(10.0, 0.001, 10.0) == pytest.approx(10.001)
    assert next_deadline(10.0, 0.001, 10.0104) == pytest.approx(10.011)


def test_the_calibration_is_printed_with_the_share_it_gives() -> None:
    line = Calibration("spin", 94_000, 48.7e-6, period_for(0.05, 48.7e-6), 0.05).describe()
    assert line == "calibration: spin 94,000 cycles: 48.7 µs (median of 20), period 974 µs: share 0.050"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--share", "0"], "--share must be in (0, 1)"),
        (["--share", "1"], "--share must be in (0, 1)"),
        (["--share", "0.05", "--kernel-us", "0"], "--kernel-us must be positive"),
        (["--duty", "0.3", "--share", "0.05"], "not allowed with argument"),
        (["--duty", "1.5"], "--duty must be in (0, 1]"),
    ],
)
def test_the_hog_refuses_what_it_cannot_take_before_touching_the_gpu(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2 and message in capsys.readouterr().err


def test_the_first_checks_script_reads_its_lists_and_compares_each_figure() -> None:
    assert fractions("0.02, 0.05,0.08,", name="--shares", whole=False) == [0.02, 0.05, 0.08]
    assert fractions("", name="--shares", whole=False) == []
    assert fractions("1", name="--duties", whole=True) == [1.0]
    with pytest.raises(ValueError, match=r"--shares: 1 is not in \(0, 1\)"):
        fractions("1", name="--shares", whole=False)
    healthy: list[dict[str, Any]] = [
        {"figures": {"memory": 4259.0, "h2d": 55.0}},
        {"figures": {"memory": 4261.0}},
        {"error": "…"},
    ]
    medians = healthy_median(healthy)
    assert medians == {"memory": 4260.0, "h2d": 55.0}
    assert against({"memory": 4047.0, "matmul_bf16": 650.0}, dict(medians)) == {"memory": 0.95}
    assert against({"memory": 4047.0}, {"memory": None}) == {}
    share = hog_command(share=0.05, kernel_us=40.0, kernel="matmul")
    assert share[1].endswith("gpu_hog.py") and share[2:] == ["--share", "0.05", "--kernel-us", "40.0", "--kernel",
                                                             "matmul"]  # fmt: skip
    assert hog_command(duty=0.3, n=8192)[2:] == ["--duty", "0.3", "--n", "8192"]


FAKE_HOG = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: (print("hog done: 10 kernels in 1.0 s", flush=True), sys.exit(0)))
print("calibration: spin 94,000 cycles: 48.7 µs (median of 20), period 974 µs: share 0.050", flush=True)
print("hog ready", flush=True)
time.sleep(60)
"""


def test_a_hog_is_ready_after_its_calibration_and_says_what_it_did_when_stopped() -> None:
    hog = Hog([sys.executable, "-c", FAKE_HOG])
    assert hog.said == ["calibration: spin 94,000 cycles: 48.7 µs (median of 20), period 974 µs: share 0.050"]
    assert hog.stop()[-1] == "hog done: 10 kernels in 1.0 s" and hog.proc.returncode == 0
    with pytest.raises(RuntimeError, match="ended before it was ready"):
        Hog([sys.executable, "-c", "print('no GPU')"])


def test_each_share_is_one_line_per_judge_with_the_hogs_calibration() -> None:
    checked = {"level": "suspect", "exit_code": 1, "remeasured": False, "vs_healthy": {"memory": 0.96, "h2d": 1.0}}
    report = {"shares": {"0.05": {"collector": checked, "agent": {**checked, "level": "ok", "exit_code": 0},
                                  "hog": ["calibration: spin …", "hog done: …", "other"]}}}  # fmt: skip
    lines = share_rows(report)
    assert lines[0].split()[:3] == ["share", "judged", "by"]
    collector, agent = lines[1].split(), lines[2].split()
    # a column per health figure, in their order: the two matmuls, memory, h2d, BERT
    assert collector[:2] == ["5.0%", "collector"] and collector[2:7] == ["—", "—", "-4.0%", "+0.0%", "—"]
    assert collector[7:] == ["suspect", "/", "1", "no"] and agent[-4:] == ["ok", "/", "0", "no"]
    assert [x.strip() for x in lines[3:]] == ["calibration: spin …", "hog done: …"]

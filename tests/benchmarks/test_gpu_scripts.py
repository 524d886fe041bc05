"""The GPU-only measuring scripts of issues 23, 24 and 41 (benchmarks/gemv_sweep.py, layer_first_calls.py,
rest_before_cell.py, starved_followed.py, h2d_numa.py, h2d_watch.py): what can be checked without a GPU, that they
start, that the sweep times the products a decode step makes, that the starved rules' shares read the repeats as the
agent's rule does, that a dip is counted as h2d_watch says, and that busy_cells.py counts a committed busy-host pair as
docs/methodology.md tables it."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from agent.models import llama
from benchmarks.gemv_sweep import projections
from benchmarks.starved_followed import Repeat, agent_share, share
from tests.conftest import ROOT


@pytest.mark.parametrize(
    "script",
    [
        "gemv_sweep.py",
        "layer_first_calls.py",
        "rest_before_cell.py",
        "starved_followed.py",
        "h2d_numa.py",
        "h2d_watch.py",
    ],
)
def test_the_gpu_scripts_start_and_say_what_they_measure(script: str) -> None:
    done = subprocess.run([sys.executable, f"benchmarks/{script}", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--out" in done.stdout


def test_the_busy_cells_count_splits_slower_cells_from_faster_ones() -> None:
    # GPU-c157e4d4 beside 24 busy processes (call 20): four cells 10 % or more slower, each flagged starved (BERT
    # fwd+bwd b=128 +33.7 %); one 14.5 % faster, slow in the quiet run, with its high_cv flag; no flag within 3 %.
    folder = ROOT / "docs/results/h100/call20-tests-busy"
    pair = [str(folder / "quiet.json"), str(folder / "loaded.json")]
    done = subprocess.run([sys.executable, "benchmarks/busy_cells.py", *pair], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    counts = re.search(r"slower than quiet: (\d+), flagged starved (\d+); >= 10 % faster: (\d+), with a flag: (\d+); "
                       r"starved flags (\d+), on cells within 3 %: (\d+)", done.stdout)  # fmt: skip
    assert counts is not None, done.stdout
    slower, flagged, faster, explained, flags, close = map(int, counts.groups())
    assert slower >= 1 and flagged == slower and faster == explained and close == 0 and flags >= flagged
    assert any(line.startswith(" +33.7% layer") and "starved" in line for line in done.stdout.splitlines())


def test_a_dip_is_the_longest_run_of_samples_under_nine_tenths_of_the_best() -> None:
    from benchmarks.h2d_watch import longest_dip

    samples = [(0.0, 55.0), (0.5, 37.0), (1.0, 38.0), (1.5, 40.0), (2.0, 55.0), (2.5, 49.0), (3.0, 55.0)]
    assert longest_dip(samples, 55.0) == 1.0  # 0.5 to 1.5 s; the lone 49 at 2.5 s is a dip of one sample
    assert longest_dip([(0.0, 55.0), (0.5, 54.0)], 55.0) == 0.0


def test_the_sweep_times_every_weight_a_decode_step_reads() -> None:
    shape = llama.SHAPES["llama-3-8b"]
    products = projections(shape)
    layer = sum(n * k for name, n, k, _, _ in products if name != "lm_head")
    head = sum(n * k for name, n, k, _, _ in products if name == "lm_head")
    norms = 2 * shape.layers * shape.hidden + shape.hidden  # read by the fused RMSNorms, not by a product
    assert (shape.layers * layer + head + norms) * 2 == shape.weight_bytes("bf16")


def test_the_candidate_counts_a_hosts_time_away_only_where_the_device_followed_it_to_the_end() -> None:
    # A repeat of 10 ms whose launching thread was off a CPU for 4 ms of it, its start reached before the launch
    # ended: with a queue's worth of work left at its end (not followed), the time is not the device's wait.
    queue_full = [Repeat(0.010, 0.004, True, False)] * 5
    host_paced = [Repeat(0.010, 0.004, True, True)] * 5
    ahead = [Repeat(0.010, 0.004, False, None)] * 5  # the host kept ahead: neither rule counts it
    assert share(queue_full, followed_only=False) == pytest.approx(0.4)
    assert share(queue_full, followed_only=True) == 0
    assert share(host_paced, followed_only=True) == share(host_paced, followed_only=False) == pytest.approx(0.4)
    assert share(ahead, followed_only=False) == share(ahead, followed_only=True) == 0
    # the median repeat: two held repeats of five do not move it
    assert share(host_paced[:2] + [Repeat(0.010, 0.0, False, None)] * 3, followed_only=False) == 0
    # The agent's rule: in full where followed; elsewhere what the repeat took past the fastest (a drained queue).
    assert agent_share(queue_full) == 0 and agent_share(host_paced) == pytest.approx(0.4)
    drained = [Repeat(0.006, 0.0, True, None)] * 2 + [Repeat(0.010, 0.005, True, False)] * 3
    assert agent_share(drained) == pytest.approx(0.4)  # the median repeat lost 4 ms of its 5 ms away

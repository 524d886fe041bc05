"""A busy host is measured and said: each window records what its process waited for a CPU (and on a GPU how long
the device idled between repeats), a starved window is measured again and flagged ``starved`` if it stays so, and a
run at low priority on a busy host says so before measuring instead of taking many times its usual time. The load
is real: busy processes the tests start."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.timing import Idle
from agent.timing.starvation import (
    GIVE_UP_AFTER,
    GPU_HOST_WAIT_STARVED,
    HOST_WAIT_STARVED,
    LAUNCH_SHARE_STARVED,
    REMEASURES,
    HostCheck,
    HostTimes,
    Remeasure,
    check_host,
    decide_host,
    host_times,
    starved,
    wait_share,
)
from schemas import TimingStats
from schemas.health_figures import UNTRUSTED_FLAGS, figure_values
from tests.conftest import agent_cli

CORES = os.cpu_count() or 1
#: Enough to leave the agent's threads about a third of a CPU each at the same priority.
HOGS = 2 * CORES + 1


@contextlib.contextmanager
def busy_processes(count: int = HOGS) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` processes that each keep a CPU busy, at the test's own priority, until the block ends."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield hogs
    finally:
        for hog in hogs:
            hog.kill()
        for hog in hogs:
            hog.wait()


def _stats(host_wait: float | None, device_idle: float | None = None) -> TimingStats:
    return TimingStats(method="perf_counter" if device_idle is None else "cuda_event", median_s=1e-3, mean_s=1e-3,
                       min_s=1e-3, max_s=1e-3, iqr_s=0.0, cv=0.0, repeats=5, warmup=1, total_s=0.1,
                       host_wait=host_wait, device_idle=device_idle)  # fmt: skip


def test_the_rule_on_a_cpu_is_the_wait_and_on_a_gpu_the_wait_and_the_device_waiting_on_it() -> None:
    assert starved(_stats(HOST_WAIT_STARVED)) and not starved(_stats(HOST_WAIT_STARVED - 0.01))
    assert not starved(_stats(None))  # the host did not say: nothing to flag on
    gpu = _stats(0.5, device_idle=0.0).model_copy(update={"launch_share": LAUNCH_SHARE_STARVED})
    assert starved(gpu)  # the device, timed, waited on a thread off its CPU
    assert starved(gpu.model_copy(update={"method": "cuda_graph"}))  # a replay launched late after its start event
    assert not starved(gpu.model_copy(update={"launch_share": LAUNCH_SHARE_STARVED / 2}))  # work queued: no harm
    assert not starved(gpu.model_copy(update={"launch_share": None}))
    assert not starved(gpu.model_copy(update={"host_wait": GPU_HOST_WAIT_STARVED / 2}))  # the agent's own threads
    # The device idle between repeats is outside every repeat's events: it flags nothing.
    assert not starved(_stats(0.5, device_idle=0.9))
    assert "starved" in UNTRUSTED_FLAGS  # never a figure, never a verdict


def test_wait_share_is_the_waited_part_of_the_time_ready_and_unknown_below_a_tick() -> None:
    assert wait_share(HostTimes(1.0, 0.0), HostTimes(1.1, 0.3)) == pytest.approx(0.75)
    assert wait_share(HostTimes(1.0, 0.0), HostTimes(1.001, 0.001)) is None  # 2 ms observed: a tick's noise
    assert wait_share(None, HostTimes(1.0, 1.0)) is None
    assert wait_share(HostTimes(2.0, 1.0), HostTimes(1.0, 0.5)) is None  # a thread that ended took its counts along


def test_the_device_idle_is_the_span_between_repeats_and_the_wait_what_it_took_of_the_median_repeat() -> None:
    idle = Idle(flush_s=1e-4)
    idle.add(
        span_s=1.0e-2, repeats_s=[2e-3] * 4, flushes=3, waited_s=[0.0, 0.0, 0.0, 5e-3], followed=[False] * 3 + [True]
    )
    assert idle.share() == pytest.approx(0.17)  # 8.3 ms busy of 10 ms
    assert idle.launch_share() == 0.0  # one repeat of four held up (all of it): the median repeat was not
    held = Idle(flush_s=1e-4)
    held.add(span_s=1.0e-2, repeats_s=[3e-3] * 3, flushes=0, waited_s=[1e-3, 1e-3, 0.0], followed=[True, True, False])
    assert held.launch_share() == pytest.approx(1 - 2e-3 / 3e-3)  # the median repeat: 3 ms, 2 ms of it its own
    assert Idle(flush_s=0.0).share() is None and Idle(flush_s=0.0).launch_share() is None


def test_a_host_away_while_the_device_had_work_queued_counts_only_what_the_repeat_lost() -> None:
    # A launch blocked on a full queue, preempted for most of each repeat, the device busy throughout: every repeat
    # takes its time (the H100's training steps beside 24 busy processes, no slower, had read 0.59 held up).
    full = Idle(flush_s=0.0)
    full.add(
        span_s=0.1, repeats_s=[20e-3, 20.1e-3, 20.2e-3, 20e-3], flushes=0, waited_s=[15e-3] * 4, followed=[False] * 4
    )
    assert full.launch_share() == pytest.approx(1 - 20e-3 / 20.05e-3)  # what the median lost past the fastest
    # A host away long enough for the queue to drain midway: the repeats it held up are as much slower.
    drained = Idle(flush_s=0.0)
    away = [0.0] + [6e-3] * 3 + [0.0]
    drained.add(
        span_s=0.1, repeats_s=[10e-3, 14e-3, 14e-3, 14e-3, 10e-3], flushes=0, waited_s=away, followed=[False] * 5
    )
    assert drained.launch_share() == pytest.approx(1 - 10e-3 / 14e-3)
    # Every repeat paced by the host: the fastest is as slow, and the device followed each to its end.
    paced = Idle(flush_s=0.0)
    paced.add(span_s=0.1, repeats_s=[24e-3] * 3, flushes=0, waited_s=[12e-3] * 3, followed=[True] * 3)
    assert paced.launch_share() == pytest.approx(0.5)


def test_starved_windows_are_measured_again_until_a_run_of_them_says_the_host_is_busy_for_good() -> None:
    remeasure = Remeasure()
    for _ in range(GIVE_UP_AFTER):
        assert remeasure.tries() == REMEASURES
        remeasure.record(still_starved=True)
    assert remeasure.tries() == 0
    remeasure.record(still_starved=False)
    assert remeasure.tries() == REMEASURES


def test_a_busy_host_is_said_and_at_low_priority_skipped_waited_for_or_measured() -> None:
    busy, quiet = HostCheck(0.1, 0.9, 19), HostCheck(0.1, 0.01, 19)
    assert decide_host("normal", "skip", 0, check=lambda: busy) is None  # measured, flagged where it starves
    reason = decide_host("low", "skip", 0, check=lambda: busy)
    assert reason is not None and reason.startswith("the host is busy: the agent waited for a CPU 90%")
    assert decide_host("low", "measure", 0, check=lambda: busy) is None
    seen = iter([busy, busy, quiet])
    now = [0.0]
    waited = decide_host("low", "wait", 60, check=lambda: next(seen), clock=lambda: now[0],
                         sleep=lambda s: now.__setitem__(0, now[0] + s))  # fmt: skip
    assert waited is None and now[0] == 20.0  # looked again every 10 s until it was quiet
    still = decide_host("low", "wait", 15, check=lambda: busy, clock=lambda: now[0],
                        sleep=lambda s: now.__setitem__(0, now[0] + s))  # fmt: skip
    assert still is not None and "(still, after waiting 15 s" in still


def test_the_kernel_counts_what_a_nice_process_waits_beside_busy_ones() -> None:
    assert host_times() is not None  # Linux with schedstat: the CI machine and the GPU machines
    code = (
        "import os, sys; from agent.timing.starvation import check_host; os.nice(19); print('ready', flush=True); "
        "sys.stdin.readline(); print(check_host(0.3).waited)"
    )  # imported before the load: only the loop is timed
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    before = os.getpriority(os.PRIO_PROCESS, 0)
    with busy_processes():
        waited = float(child.communicate("go\n", timeout=300)[0])
        forked = check_host(nice=19)  # the loop in a child at nice 19; this process keeps its priority
    assert waited > HOST_WAIT_STARVED
    assert forked.busy and forked.nice == 19 and "at nice 19" in forked.reason()
    assert os.getpriority(os.PRIO_PROCESS, 0) == before
    assert check_host(0.05).seconds == 0.05


def _cells(path: Path) -> dict[str, dict[str, object]]:
    run = json.loads(path.read_text())
    return {f"{r['name']} {json.dumps(r['params'], sort_keys=True)}": r for r in run["results"] if r["status"] == "ok"}


def _quick(out: Path, *extra: str, ahead: bool = False) -> subprocess.CompletedProcess[str]:
    """The quick suite's matmul, memory and BERT cells on the CPU, one thread each (both runs alike); ``ahead``: the
    reference, at nice -10 where permitted (``agent_cli``), so that it has a CPU to itself on a busy machine too."""
    return agent_cli("run", "--suite", "quick", "--device", "cpu", "--only", "matmul,bandwidth,layer_bert", "-q",
                     "--output", str(out), "--spool-dir", str(out.parent / "spool"), *extra,
                     env={"OMP_NUM_THREADS": "1"}, ahead=ahead)  # fmt: skip


def test_no_cell_of_a_loaded_run_is_reported_twice_off_its_quiet_value_without_the_flag(tmp_path: Path) -> None:
    quiet = _quick(tmp_path / "quiet.json", ahead=True)
    assert quiet.returncode == 0, quiet.stderr
    with busy_processes():
        loaded = _quick(tmp_path / "loaded.json")
    assert loaded.returncode == 0, loaded.stderr
    before, after = _cells(tmp_path / "quiet.json"), _cells(tmp_path / "loaded.json")
    assert not [k for k, r in before.items() if "starved" in r["flags"]]  # the quiet run has none
    off = {k: after[k]["timing"]["median_s"] / before[k]["timing"]["median_s"] for k in before.keys() & after.keys()}
    unflagged = {k: f"{ratio:.1f}x" for k, ratio in off.items() if ratio > 2 and "starved" not in after[k]["flags"]}
    assert not unflagged
    flagged = [k for k, r in after.items() if "starved" in r["flags"]]
    assert flagged  # the load was real: the rule saw it
    assert all(after[k]["timing"]["host_wait"] >= HOST_WAIT_STARVED for k in flagged)
    assert "did not get the host it needed" in loaded.stderr  # said during the run, not only at its end
    from schemas import RunSubmission

    run = RunSubmission.model_validate_json((tmp_path / "loaded.json").read_text())
    assert figure_values(run.results) == figure_values([r for r in run.results if "starved" not in r.flags])


def test_a_low_priority_run_on_a_busy_host_says_so_at_once_and_measures_nothing(tmp_path: Path) -> None:
    with busy_processes():
        done = _quick(tmp_path / "run.json", "--priority", "low")
    assert done.returncode == 75, done.stderr  # try again later: a timer or CronJob comes back at a quieter moment
    assert "error: the host is busy: the agent waited for a CPU" in done.stderr and "at nice 19" in done.stderr
    assert done.stdout == "" and not (tmp_path / "run.json").exists()  # nothing started, nothing measured

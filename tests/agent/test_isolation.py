"""Benchmarks that crash, exit, hang, raise or are killed from outside, each in its own measuring process: the
run is complete, written and posted, the agent exits 0, and every other case is measured."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path

import httpx

from schemas import RunSubmission
from tests.conftest import ROOT, agent_cli
from tests.servers import Collector

# Not imported here: importing tests.agent.crashers registers its families in this process too.
FAMILIES = ("crash_raise", "crash_segfault", "crash_exit", "crash_hang", "crash_killed", "crash_assert")
PIDFILE = "FLOPFLEET_TEST_PIDFILE"


def _kill_when_it_appears(pidfile: Path, stop: threading.Event) -> None:
    while not stop.is_set():
        if pidfile.exists() and pidfile.read_text():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
            return
        time.sleep(0.05)


def test_every_way_a_benchmark_can_fail_leaves_a_complete_posted_run(collector: Collector, tmp_path: Path) -> None:
    pidfile, out = tmp_path / "child.pid", tmp_path / "run.json"
    stop = threading.Event()
    killer = threading.Thread(target=_kill_when_it_appears, args=(pidfile, stop), daemon=True)
    killer.start()
    env = {"FLOPFLEET_PLUGINS": "tests.agent.crashers", PIDFILE: str(pidfile)}
    done = agent_cli("run", "--suite", "crash", "--device", "cpu", "--case-timeout", "3", "-q", "--output", str(out),
                     "--collector", collector.url, "--token", collector.token, "--spool-dir", str(tmp_path / "spool"),
                     env=env)  # fmt: skip
    stop.set()
    assert done.returncode == 0, done.stderr  # only benchmarks failed: the run itself did not
    run = RunSubmission.model_validate_json(out.read_text())
    outcome: dict[str, list[tuple[str, str | None]]] = {}
    for r in run.results:
        outcome.setdefault(r.name, []).append((r.status, r.reason))
    assert outcome["matmul"] == [("ok", None)]
    reasons = {name: outcome[name][0][1] or "" for name in outcome}
    assert reasons["crash_raise"].startswith("RuntimeError: CUDA error: an illegal memory access")
    assert reasons["crash_segfault"].startswith("the measuring process was killed by SIGSEGV")
    assert "last CUDA error it saw: RuntimeError: CUDA error" in reasons["crash_segfault"]
    assert reasons["crash_exit"].startswith("the measuring process exited with code 3")
    assert reasons["crash_hang"].startswith("no progress for 3 s on this case (hang)")
    assert reasons["crash_killed"].startswith("the measuring process was killed by SIGKILL")
    assert reasons["crash_assert"].startswith("IndexError")  # on the CPU; on a GPU the assert poisons the context
    for family in FAMILIES:  # the crashing case is an error, and the next case is measured by a fresh child
        assert [s for s, _ in outcome[family]] == ["error", "ok"], (family, outcome[family])
    stored = httpx.get(f"{collector.url}/api/v1/runs/{run.run_id}")
    assert stored.status_code == 200 and len(json.loads(stored.text)["results"]) == len(run.results)


def test_a_hung_case_is_stopped_even_when_it_ignores_sigterm(tmp_path: Path) -> None:
    from agent.launchers.handle import TERM_GRACE_S

    script = tmp_path / "ignore_term.py"  # a plugin whose hang ignores SIGTERM: the watchdog must SIGKILL it
    script.write_text(
        "import signal, time\n"
        "from tests.agent.crashers import Hangs\n"
        "def crash(self):\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "    time.sleep(3600)\n"
        "Hangs.crash = crash\n"
    )
    env = {"FLOPFLEET_PLUGINS": "tests.agent.crashers,ignore_term", "PYTHONPATH": f"{tmp_path}:{ROOT}"}
    done = agent_cli("run", "--suite", "crash", "--device", "cpu", "--only", "crash_hang", "--case-timeout", "2",
                     "-q", "--output", str(tmp_path / "run.json"), env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    run = RunSubmission.model_validate_json((tmp_path / "run.json").read_text())
    assert [r.status for r in run.results] == ["error", "ok"], [r.reason for r in run.results]
    assert TERM_GRACE_S <= 10


def test_inline_runs_in_the_agents_process_and_options_are_checked(tmp_path: Path) -> None:
    env = {"FLOPFLEET_PLUGINS": "tests.agent.crashers"}
    inline = agent_cli("run", "--suite", "crash", "--device", "cpu", "--only", "matmul,crash_raise", "--isolation",
                       "inline", "-q", "--output", str(tmp_path / "run.json"), env=env)  # fmt: skip
    assert inline.returncode == 0, inline.stderr
    run = RunSubmission.model_validate_json((tmp_path / "run.json").read_text())
    assert [(r.name, r.status) for r in run.results] == [("matmul", "ok"), ("crash_raise", "error"),
                                                           ("crash_raise", "ok")]  # fmt: skip
    bad = agent_cli("run", "--device", "cpu", "--isolation", "nowhere", "-q")
    assert bad.returncode == 1 and "--isolation 'nowhere' is not one of: process, inline" in bad.stderr
    timeout = agent_cli("run", "--device", "cpu", "--case-timeout", "0", "-q")
    assert timeout.returncode == 1 and "--case-timeout 0.0 must be" in timeout.stderr
    unknown = agent_cli("run", "--device", "cpu", "-q", env={"FLOPFLEET_PLUGINS": "no_such_module_here"})
    assert unknown.returncode == 1 and "FLOPFLEET_PLUGINS names 'no_such_module_here'" in unknown.stderr


def _child(*warm: str) -> tuple[subprocess.Popen[bytes], Connection, Connection]:
    """The measuring child as its own program, its output kept: the process, what it reads and what it answers."""
    child_reads, parent_writes = os.pipe()
    parent_reads, child_writes = os.pipe()
    proc = subprocess.Popen([sys.executable, "-m", "agent.launchers.child", str(child_reads), str(child_writes),
                             *([",".join(warm)] if warm else [])], pass_fds=(child_reads, child_writes), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    os.close(child_reads)
    os.close(child_writes)
    return proc, Connection(parent_writes, readable=False), Connection(parent_reads, writable=False)


def test_the_measuring_child_answers_over_its_pipes_and_prints_nowhere_else(tmp_path: Path) -> None:
    """The child as its own program: two cases on the CPU, then a clean stop."""
    from agent.benchmarks.matmul import MatmulBenchmark, MatmulGrid
    from agent.devices.target import cpu_target
    from agent.timing import TimingPolicy

    proc, inbox, outbox = _child()
    target = cpu_target()
    bench = MatmulBenchmark(MatmulGrid(sizes=(64, 128), dtypes=("fp32",)))
    assert outbox.poll(60)
    said, imported_at = outbox.recv()  # before it is given a device: its imports are done
    assert said == "imported" and imported_at <= time.monotonic()
    inbox.send(("setup", target, TimingPolicy(min_repeats=3, max_repeats=5, min_time_s=0.001, max_time_s=0.01)))
    assert outbox.poll(60)
    ready, imported, set_up = outbox.recv()
    assert imported == imported_at
    assert ready == "ready" and imported <= set_up <= time.monotonic()  # the parent's clock: one monotonic clock
    inbox.send(("bench", 1, bench))
    for case in bench.cases(target):
        inbox.send(("case", 1, case))
        measured, sticky, cuda_error = outbox.recv()
        assert measured.status == "ok" and measured.outcome.metrics.tflops > 0
        assert (sticky, cuda_error) == ("", "")
    inbox.send(("stop",))
    printed, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and printed == b""
    inbox.close()
    outbox.close()


def test_parallel_measures_each_device_in_its_own_child_at_once() -> None:
    """``--parallel``'s launcher on two CPU 'devices' (the CLI takes --parallel on GPUs only): each device gets its
    own child, both run at the same time, and every result is flagged parallel."""
    from dataclasses import replace

    from agent.benchmarks.matmul import MatmulBenchmark, MatmulGrid
    from agent.devices.target import cpu_target
    from agent.launchers import launchers_for
    from agent.machine.monitor import Monitor
    from agent.run.runner import run_cases
    from agent.timing import TimingPolicy

    policy = TimingPolicy(min_repeats=3, max_repeats=5, min_time_s=0.2, max_time_s=0.3)
    cpu = cpu_target()
    targets = [replace(cpu, name=f"{cpu.name} A"), replace(cpu, name=f"{cpu.name} B")]
    bench = MatmulBenchmark(MatmulGrid(sizes=(64, 128, 256), dtypes=("fp32",)))
    events: list[tuple[float, str, bool]] = []
    results = run_cases([bench], targets, [], policy, Monitor(None, {}),
                        launchers=launchers_for("process", policy, parallel=True),
                        on_event=lambda e: events.append((time.monotonic(), e.target, e.result is None)))  # fmt: skip
    assert [r.status for r in results] == ["ok"] * 6
    assert all("parallel" in r.flags for r in results)
    starts = {target: min(t for t, where, start in events if where == target and start) for target in
              (t.label for t in targets)}  # fmt: skip
    ends = {target: max(t for t, where, start in events if where == target and not start) for target in starts}
    a, b = (t.label for t in targets)
    assert starts[b] < ends[a] and starts[a] < ends[b]  # the two devices' cases overlapped in time


def test_the_first_child_keeps_every_case_that_needs_no_model_code_and_the_other_takes_over_at_the_first_that_does(
) -> None:  # fmt: skip
    """Two benchmarks that import no model code, then a BERT layer cell, with the model-importing child ready before
    the first case: the first child still measures both (on a GPU the other prepares its layer cells meanwhile),
    and the model-importing one is set up only for the layer cell."""
    from agent.benchmarks.bandwidth import BandwidthBenchmark, BandwidthGrid
    from agent.benchmarks.layers import BertLayerBenchmark, LayerGrid
    from agent.benchmarks.matmul import MatmulBenchmark, MatmulGrid
    from agent.devices.target import cpu_target
    from agent.launchers import launchers_for
    from agent.machine.monitor import Monitor
    from agent.run.runner import CaseEvent, run_cases
    from agent.timing import TimingPolicy

    policy = TimingPolicy(min_repeats=3, max_repeats=5, min_time_s=0.02, max_time_s=0.05)
    launchers = launchers_for("process", policy)
    layer = LayerGrid(model="bert-tiny", seq_lens=(16,), batches=(2,), dtypes=("fp32",), modes=("fwd",))
    benches = [MatmulBenchmark(MatmulGrid(sizes=(64,), dtypes=("fp32",))),
               BandwidthBenchmark(BandwidthGrid(scale=(1 << 16,))), BertLayerBenchmark(layer)]  # fmt: skip
    launchers.device.prepare(tuple(m for b in benches for m in b.WARM))
    waited = time.monotonic() + 600
    while not any(p.modules and p.imported_s is not None for p in launchers.device.processes(0.0)):
        assert time.monotonic() < waited, "the model-importing child never finished importing"
        time.sleep(0.05)
    ends: dict[str, float] = {}

    def ended(event: CaseEvent) -> None:
        if event.result is not None:
            ends[event.benchmark] = time.monotonic()

    results = run_cases(benches, [cpu_target()], [], policy, Monitor(None, {}), launchers=launchers, on_event=ended)
    assert [r.status for r in results] == ["ok"] * 3, [r.reason for r in results]
    first, model = sorted(launchers.device.processes(0.0), key=lambda p: bool(p.modules))
    assert model.imported_s is not None and model.imported_s < ends["matmul"]
    assert first.stopped_s is not None and model.ready_s is not None
    assert ends["bandwidth"] <= first.stopped_s <= model.ready_s <= ends["layer_bert"]


def test_a_spare_rehearses_the_cases_it_is_sent_then_measures_them_as_its_own(tmp_path: Path) -> None:
    """The child as its own program: asked to rehearse two layer cases while it waits (nothing to prepare on a CPU,
    but the benchmark and its built block stay), then set up and sent the cases without the benchmark again."""
    from agent.benchmarks.layers import BertLayerBenchmark, LayerGrid
    from agent.devices.target import cpu_target
    from agent.timing import TimingPolicy

    proc, inbox, outbox = _child("transformers.models.bert.modeling_bert")
    target = cpu_target()
    policy = TimingPolicy(min_repeats=3, max_repeats=5, min_time_s=0.001, max_time_s=0.01)
    bench = BertLayerBenchmark(LayerGrid(model="bert-tiny", seq_lens=(16,), batches=(2,), dtypes=("fp32",)))
    cases = bench.cases(target)
    assert outbox.poll(120) and outbox.recv()[0] == "imported"
    other = BertLayerBenchmark(LayerGrid(model="bert-tiny", seq_lens=(8,), batches=(1,), dtypes=("fp32",)))
    # The setup follows at once: the rehearsal stops before its first case, and still keeps both benchmarks.
    inbox.send(
        ("rehearse", target, policy, [(7, bench, case) for case in cases] + [(8, other, other.cases(target)[0])])
    )
    inbox.send(("setup", target, policy))
    assert outbox.poll(60) and outbox.recv()[0] == "ready"
    for case in cases:
        inbox.send(("case", 7, case))  # no ("bench", 7, ...): the rehearsal handed it over
        measured, sticky, _ = outbox.recv()
        assert measured.status == "ok" and measured.outcome.metrics.tflops > 0, measured.reason
        assert sticky == ""
    inbox.send(("case", 8, other.cases(target)[0]))
    assert outbox.recv()[0].status == "ok"
    inbox.send(("stop",))
    printed, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and printed == b"", printed


def test_a_rehearsal_that_fails_stops_there_and_its_cases_are_measured_all_the_same() -> None:
    """A case that cannot even be prepared (tf32 on a CPU) ends the rehearsal with a warning in the child's log; the
    cases it was sent are measured when the child is set up, the failing one saying why as any case would."""
    from agent.benchmarks.layers import BertLayerBenchmark, LayerGrid
    from agent.devices.target import cpu_target
    from agent.timing import TimingPolicy

    proc, inbox, outbox = _child("transformers.models.bert.modeling_bert")
    target = cpu_target()
    policy = TimingPolicy(min_repeats=3, max_repeats=5, min_time_s=0.001, max_time_s=0.01)
    bench = BertLayerBenchmark(LayerGrid(model="bert-tiny", seq_lens=(16,), batches=(2,), dtypes=("tf32", "fp32"),
                                         modes=("fwd",)))  # fmt: skip
    cases = bench.cases(target)
    assert outbox.poll(120) and outbox.recv()[0] == "imported"
    inbox.send(("rehearse", target, policy, [(7, bench, case) for case in cases]))
    time.sleep(2.0)  # the rehearsal reaches its first case, which fails, long before this
    inbox.send(("setup", target, policy))
    assert outbox.poll(60) and outbox.recv()[0] == "ready"
    statuses = []
    for case in cases:
        inbox.send(("case", 7, case))
        statuses.append(outbox.recv()[0].status)
    inbox.send(("stop",))
    printed, _ = proc.communicate(timeout=30)
    assert statuses == ["unsupported", "ok"]
    assert proc.returncode == 0 and b"rehearsing layer_bert tf32 fwd" in printed and b"failed" in printed, printed

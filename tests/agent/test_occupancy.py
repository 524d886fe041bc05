"""Busy GPUs (--when-busy) and the agent's own priority, on the CPU: the decision over surveys, the settings, and a
real run whose parent and measuring process are checked for nice 19 and the idle I/O class. The NVML side (a real
second process on a GPU) is in tests/gpu/test_gpu.py."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from agent.errors import ConfigError
from agent.machine import priority
from agent.machine.occupancy import BUSY_UTILISATION_PCT, Occupancy, decide
from agent.run.config import RunConfig
from tests.conftest import agent_cli

IDLE = Occupancy(processes=0, utilisation_pct=0)
JOB = Occupancy(processes=2, utilisation_pct=87)


class Surveys:
    """What successive looks at two GPUs see, and a clock that the waits move on."""

    def __init__(self, *seen: Mapping[int, Occupancy]) -> None:
        self.seen = list(seen)
        self.looks = 0
        self.now = 0.0

    def look(self) -> Mapping[int, Occupancy]:
        self.looks += 1
        return self.seen[min(self.looks, len(self.seen)) - 1]

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_busy_is_another_process_or_load_without_one() -> None:
    assert JOB.busy and JOB.reason() == "busy: 2 processes, 87 % utilisation"
    assert Occupancy(1, None).reason() == "busy: 1 process"
    assert not IDLE.busy
    # A container sees other containers' load but not their processes.
    assert Occupancy(0, BUSY_UTILISATION_PCT).busy and not Occupancy(0, BUSY_UTILISATION_PCT - 1).busy
    assert not Occupancy(None, None).busy  # NVML could not say: not known to be busy


def test_skip_names_each_busy_gpu_and_why() -> None:
    looks = Surveys({0: IDLE, 1: JOB})
    assert decide(looks.look, "skip") == {1: "busy: 2 processes, 87 % utilisation"}
    assert decide(looks.look, "measure") == {}


def test_wait_measures_once_the_gpu_is_free() -> None:
    looks = Surveys({0: JOB}, {0: JOB}, {0: IDLE})
    assert decide(looks.look, "wait", 600, poll_s=10, clock=lambda: looks.now, sleep=looks.sleep) == {}
    assert looks.looks == 3 and looks.now == 20


def test_wait_gives_up_after_its_time_and_says_so() -> None:
    looks = Surveys({0: IDLE, 1: JOB})
    skipped = decide(looks.look, "wait", 25, poll_s=10, clock=lambda: looks.now, sleep=looks.sleep)
    assert skipped == {1: "busy: 2 processes, 87 % utilisation (still, after waiting 25 s)"}
    assert looks.now == 25  # the last wait is cut to what is left


def test_bad_busy_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="--when-busy 'sometimes'"):
        RunConfig(when_busy="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--busy-wait"):
        RunConfig(busy_wait_s=-1)
    done = agent_cli("run", "--device", "cpu", "--priority", "high")
    assert done.returncode == 1 and "--priority 'high'" in done.stderr
    done = agent_cli("run", "--device", "cpu", "--jitter", "-5")
    assert done.returncode == 1 and "--jitter -5" in done.stderr


def test_the_busy_settings_come_from_file_and_environment(tmp_path: Path) -> None:
    config = tmp_path / "agent.toml"
    config.write_text('when_busy = "wait"\nbusy_wait = 120\njitter = 600\n', encoding="utf-8")
    done = agent_cli("config", "show", "--json", "--config", str(config), env={"FLOPFLEET_PRIORITY": "normal"})
    shown = json.loads(done.stdout)["settings"]
    assert shown["when_busy"] == {"value": "wait", "source": f"file {config}"}
    assert shown["busy_wait"]["value"] == 120 and shown["jitter"]["value"] == 600
    assert shown["priority"] == {"value": "normal", "source": "env FLOPFLEET_PRIORITY"}


PROBE = """
import os
from agent.machine import priority
with open(os.environ["PRIORITY_LOG"], "a") as out:
    out.write(f"{os.getpid()} {os.getpriority(os.PRIO_PROCESS, 0)} {priority.io_class()}\\n")
"""


@pytest.mark.parametrize(("setting", "nice"), [("low", priority.LOWEST_NICE), ("normal", None)])
def test_the_agent_and_its_measuring_process_run_at_the_priority_set(
    tmp_path: Path, setting: str, nice: int | None
) -> None:
    """A plugin module (loaded by the agent and again by each measuring process) writes down each process's nice
    value and I/O class; ``normal`` is the default. (``--when-busy measure``: at ``low`` a busy test machine would
    otherwise have the run skipped, which tests/agent/test_starvation.py covers.)"""
    (tmp_path / "priority_probe.py").write_text(PROBE, encoding="utf-8")
    log = tmp_path / "priorities.txt"
    env = {
        "FLOPFLEET_PLUGINS": "tests.agent.tiny_suite,priority_probe",
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "PRIORITY_LOG": str(log),
    }
    args = ["run", "--suite", "tiny", "--device", "cpu", "-q", "--output", str(tmp_path / "run.json"),
            "--when-busy", "measure"]  # fmt: skip
    done = agent_cli(*args, *([] if setting == "normal" else ["--priority", setting]), env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "run.json").read_text())["results"][0]["status"] == "ok"
    seen = [line.split() for line in log.read_text().splitlines()]
    assert len({pid for pid, _, _ in seen}) >= 2  # the agent and its measuring process
    base = os.getpriority(os.PRIO_PROCESS, 0)
    # The probe runs at the plugin load, which in the agent comes before the priority is lowered; the measuring
    # process starts after, so it has what was set.
    child = seen[-1]
    assert int(child[1]) == (nice if nice is not None else base)
    if priority.io_class() is not None and nice is not None:
        assert child[2] == str(priority.IOPRIO_CLASS_IDLE)

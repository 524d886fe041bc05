"""A run told to stop keeps what it measured: a real SIGTERM (to the agent alone, as a container's PID 1 gets it) or
SIGINT (to the whole process group, as Ctrl-C sends it) in the middle of a case that would hang for an hour ends the
measuring, and the run is written and posted, marked interrupted, the rest skipped with the reason."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from schemas import RunSubmission
from tests.conftest import ROOT
from tests.servers import Collector

HANGING = "FLOPFLEET_TEST_HANGING"  # tests/agent/crashers.py: written as the hanging case starts


def _start(tmp_path: Path, collector: Collector, out: Path) -> tuple[subprocess.Popen[str], Path]:
    marker = tmp_path / "hanging.pid"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "FLOPFLEET_PLUGINS": "tests.agent.crashers", HANGING: str(marker)}
    # The hang's own watchdog is an hour: only the stop can end this case.
    command = [sys.executable, "-m", "agent", "run", "--suite", "crash", "--device", "cpu", "--only",
               "matmul,crash_hang", "--case-timeout", "3600", "-q", "--output", str(out), "--collector",
               collector.url, "--token", collector.token, "--spool-dir", str(tmp_path / "spool")]  # fmt: skip
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    while not (marker.exists() and marker.read_text()):  # the hanging case is being measured
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    return proc, marker


@pytest.mark.parametrize(("sig", "to_group"), [(signal.SIGTERM, False), (signal.SIGINT, True)])
def test_a_signal_mid_case_ends_the_run_with_what_it_measured_written_and_posted(
    collector: Collector, tmp_path: Path, sig: signal.Signals, to_group: bool
) -> None:
    out = tmp_path / "run.json"
    proc, marker = _start(tmp_path, collector, out)
    hanging = int(marker.read_text())
    if to_group:
        os.killpg(proc.pid, sig)
    else:
        proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=600)  # a guard only: the case it cut would have slept an hour
    assert proc.returncode == 128 + sig, stderr
    with pytest.raises(ProcessLookupError):  # the measuring process went with the run
        os.kill(hanging, 0)

    run = RunSubmission.model_validate_json(out.read_text())
    assert run.interrupted == f"stopped by {sig.name}"
    outcome = {(r.name, str(r.params.model_dump().get("n")), r.status, r.reason) for r in run.results}
    assert ("matmul", "64", "ok", None) in outcome  # measured before the signal: kept
    reason = f"the run was told to stop ({sig.name}) before this case ended"
    statuses = [(r.name, r.status, r.reason) for r in run.results if r.name != "matmul"]
    assert statuses == [("crash_hang", "skipped", reason)] * 2  # the case cut, and the one after it
    assert "interrupted" in stderr and f"stopped by {sig.name}" in stderr

    stored = httpx.get(f"{collector.url}/api/v1/runs/{run.run_id}", headers=collector.auth, timeout=30)
    assert stored.status_code == 200 and RunSubmission.model_validate_json(stored.text) == run
    assert not (tmp_path / "spool").exists() or not list((tmp_path / "spool").iterdir())
    assert "stored by the collector" in stdout

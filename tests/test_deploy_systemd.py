"""The systemd units under deploy/systemd, checked by systemd's own ``systemd-analyze verify`` (any warning fails:
it only warns on an unknown key), with ExecStart pointed at this checkout's agent."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

UNITS = ROOT / "deploy" / "systemd"
ANALYZE = shutil.which("systemd-analyze")
#: CI installs Debian's systemd and sets FLOPFLEET_SYSTEMD_TESTS=required, so a missing tool fails there.
REQUIRED = os.environ.get("FLOPFLEET_SYSTEMD_TESTS") == "required"
pytestmark = pytest.mark.skipif(
    ANALYZE is None and not REQUIRED, reason="systemd-analyze missing (apt-get install systemd)"
)
AGENT = Path(sys.executable).with_name("flopfleet-agent")


def _copies(tmp_path: Path) -> list[Path]:
    out = []
    for unit in sorted(UNITS.iterdir()):
        text = unit.read_text(encoding="utf-8").replace("/usr/local/bin/flopfleet-agent", str(AGENT))
        (tmp_path / unit.name).write_text(text, encoding="utf-8")
        out.append(tmp_path / unit.name)
    return out


def test_the_units_verify_without_a_warning(tmp_path: Path) -> None:
    assert ANALYZE is not None, "systemd-analyze is required here (FLOPFLEET_SYSTEMD_TESTS=required)"
    units = _copies(tmp_path)
    assert {u.suffix for u in units} == {".service", ".timer"}
    done = subprocess.run([ANALYZE, "verify", "--man=no", *map(str, units)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout + done.stderr == "", done.stdout + done.stderr


def test_a_misspelt_key_would_be_caught(tmp_path: Path) -> None:
    assert ANALYZE is not None
    (service,) = [u for u in _copies(tmp_path) if u.suffix == ".service"]
    service.write_text(service.read_text().replace("IOSchedulingClass=idle", "IOSchedulingClas=idle"))
    done = subprocess.run([ANALYZE, "verify", "--man=no", str(service)], capture_output=True, text=True, timeout=60)
    assert "Unknown key 'IOSchedulingClas'" in done.stderr


def test_the_timer_spreads_a_fleet_over_its_hour() -> None:
    timer = (UNITS / "flopfleet-agent.timer").read_text()
    assert "RandomizedDelaySec=55min" in timer and "OnCalendar=hourly" in timer
    service = (UNITS / "flopfleet-agent.service").read_text()
    assert "SuccessExitStatus=1 2" in service and "IOSchedulingClass=idle" in service
    assert "\nNice=" not in service  # at nice 19 a busy host starves the check: it measures at the normal priority

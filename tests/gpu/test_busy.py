"""A GPU another process uses, seen through NVML for real: a competing process (benchmarks/gpu_hog.py) holds GPU 0
while the agent runs. Skipped with the reason by default, measured and flagged with ``measure``, measured once the
other process has gone with ``wait``. Named to run before the other GPU tests: this test process must hold no CUDA
context of its own (it would count as another process)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT, agent_cli

pytestmark = pytest.mark.gpu


@pytest.fixture
def hog() -> Iterator[subprocess.Popen[str]]:
    import torch

    if torch.cuda.is_initialized():
        pytest.skip("this test process holds a CUDA context (run tests/gpu/test_busy.py on its own)")
    proc = subprocess.Popen([sys.executable, "benchmarks/gpu_hog.py", "--duty", "0.9", "--device", "cuda:0"],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "hog ready"
    yield proc
    proc.kill()
    proc.wait()
    proc.stdout.close()


def _run(tmp_path: Path, *extra: str) -> list[dict[str, object]]:
    out = tmp_path / "run.json"
    done = agent_cli("run", "--suite", "quick", "--only", "matmul", "--device", "cuda", "--gpus", "0", "-q",
                     "--output", str(out), *extra, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    results: list[dict[str, object]] = json.loads(out.read_text())["results"]
    return results


def test_a_busy_gpu_is_skipped_with_the_reason(tmp_path: Path, hog: subprocess.Popen[str]) -> None:
    results = _run(tmp_path)
    assert results and {r["status"] for r in results} == {"skipped"}
    reason = str(results[0]["reason"])
    assert reason.startswith("busy: 1 process, ") and reason.endswith("% utilisation"), reason


def test_measure_measures_a_busy_gpu_and_flags_it(tmp_path: Path, hog: subprocess.Popen[str]) -> None:
    results = _run(tmp_path, "--when-busy", "measure")
    assert {r["status"] for r in results} == {"ok"}
    assert all("busy" in r["flags"] for r in results)  # type: ignore[operator]


def test_wait_measures_once_the_other_process_has_gone(tmp_path: Path, hog: subprocess.Popen[str]) -> None:
    threading.Timer(8.0, hog.kill).start()
    results = _run(tmp_path, "--when-busy", "wait", "--busy-wait", "120")
    assert {r["status"] for r in results} == {"ok"}
    assert not any("busy" in r["flags"] for r in results)  # type: ignore[operator]

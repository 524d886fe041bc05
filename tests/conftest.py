from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import Collector, serve_collector

ROOT = Path(__file__).resolve().parent.parent

#: Where the libraries the agent runs keep the kernels they compile on a fresh machine (the driver's from PTX,
#: Triton's): each deploy recipe that starts a new container per run keeps them on a volume (docs/agent.md).
KERNEL_CACHES = ("CUDA_CACHE_PATH", "TRITON_CACHE_DIR")
#: How long a test's HTTP client waits for an answer when it does not say (httpx's own default is 5 s). The tests check
#: what the collector answers, not how fast: on a loaded 2-core CI machine a page read behind a busy writer took over
#: 5 s, and the test failed on the wait. Speed is measured by benchmarks/, and tests of time limits set their own.
HTTP_TIMEOUT_S = 60.0


def _patient_httpx() -> None:
    import httpx
    import httpx._api

    for fn in (httpx.Client.__init__, httpx.AsyncClient.__init__,
               *(getattr(httpx._api, name) for name in ("request", "stream", "get", "options", "head", "post", "put",
                                                        "patch", "delete"))):  # fmt: skip
        defaults = fn.__kwdefaults__
        if defaults is not None and "timeout" in defaults:
            defaults["timeout"] = httpx.Timeout(HTTP_TIMEOUT_S)


_patient_httpx()


def transformers_at_least(version: str) -> bool:
    import transformers
    from packaging.version import Version

    return Version(transformers.__version__) >= Version(version)


#: The inference family drives transformers' AttentionInterface (4.48) and StaticCache as 4.56 made it; before, its
#: cases say `unsupported` with the reason (tests/agent/test_benchmarks.py's last test: make test-oldest).
needs_inference = pytest.mark.skipif(not transformers_at_least("4.56"), reason="transformers < 4.56: unsupported")


def _triton_3() -> bool:
    if importlib.util.find_spec("triton") is None:
        return False
    from importlib.metadata import version

    return int(version("triton").split(".")[0]) >= 3


#: The lean Llama's kernels are written for Triton 3 (torch 2.4 on); torch 2.2's Triton 2.2 cannot build them, and
#: the agent then uses its torch ops (it checks its kernels before it uses them).
needs_triton = pytest.mark.skipif(not _triton_3(), reason="Triton 3 is not installed (CUDA machines, torch >= 2.4)")


#: A hang guard for the CLIs the tests start, never a speed target: a loaded 2-core machine (CI) takes many times a
#: quiet one's time, and a guard that fires there fails every test behind a shared fixture (issue 29).
HANG_GUARD_S = 1800.0


def agent_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = HANG_GUARD_S, ahead: bool = False
) -> subprocess.CompletedProcess[str]:
    """The real agent entry point, in a child process with its own environment. ``ahead``: a run whose figures
    tests read, measured so that the test machine's other work does not starve it (agent/timing/starvation.py flags, and
    keeps out of figures, what a busy host starved): one torch thread (two that wait for each other read 100x slow
    when either is descheduled) at nice -10 where this user may raise priority (root: CI)."""
    merged = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "160", **(env or {})}
    if ahead:
        merged.setdefault("OMP_NUM_THREADS", "1")
    return subprocess.run(
        [sys.executable, "-m", "agent", *args], capture_output=True, text=True, env=merged, timeout=timeout, cwd=ROOT,
        preexec_fn=raise_priority if ahead else None,
    )  # fmt: skip


def raise_priority() -> None:
    """In a child before it starts: ahead of the machine's other work where permitted, else as it is."""
    with contextlib.suppress(PermissionError):
        os.nice(-10)


def collector_cli(*args: str, timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "collector", *args], capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT
    )


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    with serve_collector(tmp_path / "flopfleet.duckdb") as served:
        yield served


@pytest.fixture(scope="session")
def quick_run_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One real quick CPU run through the agent CLI, shared by the tests that only read it."""
    out = tmp_path_factory.mktemp("quick") / "run.json"
    spool = out.parent / "spool"
    done = agent_cli("run", "--suite", "quick", "--device", "cpu", "--output", str(out), "-q",
                     "--spool-dir", str(spool), ahead=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="session")
def quick_run(quick_run_file: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads(quick_run_file.read_text())
    return data


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A gpu test on a machine without CUDA fails loudly instead of skipping quietly."""
    if item.get_closest_marker("gpu") is not None:
        import torch

        if not torch.cuda.is_available():
            pytest.fail("this test needs a CUDA GPU: run `make test-gpu` on a GPU machine", pytrace=False)

"""The Dockerfiles under deploy/docker, checked without building them (no image can be pulled here: the base images
live in registries this machine does not reach). What can drift is checked against the real thing: every COPY
source exists and is not excluded by .dockerignore; the agent image installs the agent's dependencies from
pyproject.toml and never torch; the entry points are the package's console scripts; the collector's CMD is run here
as the image would run it (paths and port moved to the test's) and answers the HEALTHCHECK's /healthz; the agent's
CMD is a real command."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import tomllib

from tests.conftest import KERNEL_CACHES, ROOT

DOCKER = ROOT / "deploy" / "docker"
FILES = sorted(DOCKER.glob("*.Dockerfile"))


def _instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    rows = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return [(r.split(None, 1)[0].upper(), r.split(None, 1)[1] if " " in r else "") for r in rows]


def _exec_form(args: str) -> list[str]:
    parsed: list[str] = json.loads(args)
    return parsed


def test_there_is_an_agent_and_a_collector_image() -> None:
    assert [f.name for f in FILES] == ["agent.Dockerfile", "collector.Dockerfile"]


@pytest.mark.parametrize("dockerfile", FILES, ids=lambda p: p.name)
def test_every_copied_path_exists_and_is_sent_to_the_builder(dockerfile: Path) -> None:
    ignored = [ln.strip() for ln in (ROOT / ".dockerignore").read_text().splitlines() if ln.strip()]
    for op, args in _instructions(dockerfile):
        if op != "COPY":
            continue
        *sources, _dest = args.split()
        for source in sources:
            assert (ROOT / source).exists(), f"{dockerfile.name}: COPY {source}: no such path"
            assert not any(fnmatch.fnmatch(source, pattern) for pattern in ignored), f"{source} is in .dockerignore"


def test_the_agent_image_keeps_the_images_torch_and_installs_the_rest_of_the_agent_extra() -> None:
    runs = " ".join(args for op, args in _instructions(DOCKER / "agent.Dockerfile") if op == "RUN")
    pip = [step.split("pip install", 1)[1] for step in runs.split("&&") if "pip install" in step]
    installed = {re.split(r"[<>=!; ]", spec.strip('"'))[0] for step in pip for spec in re.findall(r'"[^"]+"', step)}
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["agent"]
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    wanted = {re.split(r"[<>=!; ]", spec)[0] for spec in (*extra, *core) if "python_version < '3.11'" not in spec}
    assert "torch" not in installed and not any("torch" in step.split() for step in pip)
    assert installed == wanted - {"torch"}
    assert "--no-deps ." in runs  # the package itself, so its torch requirement never reaches the resolver


@pytest.mark.parametrize(("dockerfile", "script"), [("agent.Dockerfile", "flopfleet-agent"),
                                                    ("collector.Dockerfile", "flopfleet-collector")])  # fmt: skip
def test_the_entry_point_is_the_packages_console_script(dockerfile: str, script: str) -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    (entry,) = [_exec_form(a) for op, a in _instructions(DOCKER / dockerfile) if op == "ENTRYPOINT"]
    assert entry == [script] and script in scripts


def test_the_agent_images_command_is_a_real_command() -> None:
    (cmd,) = [_exec_form(a) for op, a in _instructions(DOCKER / "agent.Dockerfile") if op == "CMD"]
    done = subprocess.run([sys.executable, "-m", "agent", *cmd, "--help"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_the_agent_images_compiled_kernels_go_to_a_volume() -> None:
    steps = _instructions(DOCKER / "agent.Dockerfile")
    env = dict(pair.split("=", 1) for op, args in steps if op == "ENV" for pair in shlex.split(args))
    volumes = [v for op, args in steps if op == "VOLUME" for v in _exec_form(args)]
    for name in KERNEL_CACHES:
        assert any(env[name].startswith(volume + "/") for volume in volumes), (name, env.get(name), volumes)


def test_the_collector_runs_as_the_image_runs_it_and_answers_its_healthcheck(tmp_path: Path) -> None:
    instructions = _instructions(DOCKER / "collector.Dockerfile")
    (cmd,) = [_exec_form(a) for op, a in instructions if op == "CMD"]
    (probe,) = [a for op, a in instructions if op == "HEALTHCHECK"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [a.replace("/data", str(tmp_path)) for a in cmd]
    args[args.index("--port") + 1] = str(port)
    args[args.index("--host") + 1] = "127.0.0.1"
    server = subprocess.Popen([sys.executable, "-m", "collector", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, "the collector did not start"
                time.sleep(0.2)
        assert answer.status_code == 200
        # The image's HEALTHCHECK, as Docker would run it inside the container.
        check = shlex.split(probe.removeprefix("CMD "))
        check[-1] = check[-1].replace("127.0.0.1:8000", f"127.0.0.1:{port}")
        assert subprocess.run([sys.executable if c == "python" else c for c in check], timeout=30).returncode == 0
        assert (tmp_path / "flopfleet.duckdb").exists()
    finally:
        server.terminate()
        server.wait(30)
        assert server.stderr is not None
        server.stderr.close()

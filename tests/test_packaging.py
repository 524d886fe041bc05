"""The packaging promises: the agent needs no collector dependencies, the collector needs no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def _imported_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys; print(' '.join(sorted(m.split('.')[0] for m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    return set(out.stdout.split())


def test_the_collector_never_imports_torch() -> None:
    loaded = _imported_after("import collector.cli, collector.app, collector.report, collector.store")
    assert "torch" not in loaded and "transformers" not in loaded


def test_the_agent_never_imports_collector_dependencies() -> None:
    loaded = _imported_after("import agent.cli, agent.session, agent.upload, agent.runner, agent.suites")
    assert not loaded & {"duckdb", "fastapi", "uvicorn", "pyarrow", "starlette", "collector"}


def test_extras_keep_the_two_sides_apart() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    names = {key: {dep.split(">")[0].split("=")[0].split("<")[0] for dep in deps} for key, deps in extras.items()}
    assert not names["agent"] & {"duckdb", "fastapi", "uvicorn", "pyarrow"}
    assert "torch" not in names["collector"] and "transformers" not in names["collector"]
    assert project["requires-python"] == ">=3.10"
    assert project["scripts"] == {"flopfleet-agent": "agent.cli:main", "flopfleet-collector": "collector.cli:main"}


def test_every_package_in_the_tree_is_in_the_wheel() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("agent", "collector", "schemas")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found <= listed, f"missing from [tool.setuptools] packages: {sorted(found - listed)}"

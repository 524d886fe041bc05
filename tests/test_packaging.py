"""The packaging promises: the agent needs no collector dependencies, the collector needs no torch."""

from __future__ import annotations

import json
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
    loaded = _imported_after("import collector.cli.main, collector.web.app, collector.read.report, collector.store")
    assert "torch" not in loaded and "transformers" not in loaded


def test_the_agent_never_imports_collector_dependencies() -> None:
    loaded = _imported_after(
        "import agent.cli, agent.run.session, agent.run.upload, agent.run.runner, agent.harness.suites"
    )
    assert not loaded & {"duckdb", "fastapi", "uvicorn", "pyarrow", "starlette", "collector"}


def test_extras_keep_the_two_sides_apart() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    names = {key: {dep.split(">")[0].split("=")[0].split("<")[0] for dep in deps} for key, deps in extras.items()}
    assert not names["agent"] & {"duckdb", "fastapi", "uvicorn", "pyarrow"}
    assert "torch" not in names["collector"] and "transformers" not in names["collector"]
    assert project["requires-python"] == ">=3.10"
    assert project["scripts"] == {"flopfleet-agent": "agent.cli:main", "flopfleet-collector": "collector.cli.main:main"}


def test_every_package_in_the_tree_is_in_the_wheel() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("agent", "collector", "schemas")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert found <= listed, f"missing from [tool.setuptools] packages: {sorted(found - listed)}"


def test_the_wheel_the_readme_installs_works_outside_the_checkout(tmp_path: Path) -> None:
    """README's install line, `pip wheel .` then `pip install dist/flopfleet-*.whl`, from a copy of the tree (the
    build writes beside the sources), installed apart from this checkout: both CLIs start, templates and data come."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], capture_output=True, text=True,
                           check=True, cwd=ROOT).stdout.split()  # fmt: skip
    source = tmp_path / "source"
    for name in files:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((ROOT / name).read_bytes())
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(tmp_path / "dist"), str(source)],
                   check=True, capture_output=True, cwd=tmp_path)  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("flopfleet-*.whl")
    site = tmp_path / "site"
    subprocess.run([*pip, "install", "--no-deps", "--no-index", "--target", str(site), str(wheel)], check=True,
                   capture_output=True)  # fmt: skip
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "HOME": str(tmp_path)}  # dependencies from this venv

    def installed(command: str, *args: str) -> str:
        done = subprocess.run([str(site / "bin" / command), *args], capture_output=True, text=True, env=env,
                              cwd=tmp_path, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert installed("flopfleet-agent", "version").strip() == installed("flopfleet-collector", "version").strip()
    where = subprocess.run([sys.executable, "-c", "import agent, collector; print(agent.__file__, collector.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, check=True).stdout  # fmt: skip
    assert where.count(str(site)) == 2, where  # the wheel's code, not this checkout's
    db = str(tmp_path / "db.duckdb")
    assert "figures for" in installed("flopfleet-collector", "import-reference", "--db", db)  # the bundled table
    shipped = json.loads(installed("flopfleet-collector", "baseline", "list", "--db", db, "--format", "json"))
    bundled = sorted(card for b in shipped if b["origin"] == "bundled" for card in b["cards"])
    assert bundled == ["NVIDIA H100 80GB HBM3 79 GiB · 700 W", "NVIDIA H200 140 GiB · 700 W"]  # the wheel has both
    assert installed("flopfleet-collector", "report", "--db", db, "--format", "html").startswith("<!doctype html>")

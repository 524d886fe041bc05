"""A typo in ``--db`` is refused, not an empty fleet: a missing folder is one ``error:`` line and exit 66 unless
``--create`` asks for it, a command that only reads never creates a file, and a new database says it is new. Through
the real CLI, in child processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collector.store.errors import CollectorError, MissingDatabase
from collector.web.settings import Settings
from tests.conftest import ROOT


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    merged = {**os.environ, "COLUMNS": "60", **(env or {})}  # a narrow terminal: a refusal stays one line
    merged.pop("FLOPFLEET_DB", None)
    merged.pop("FLOPFLEET_CREATE", None)
    return subprocess.run([sys.executable, "-m", "collector", *args], capture_output=True, text=True, env=merged,
                          timeout=120, cwd=ROOT)  # fmt: skip


def _refused(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == MissingDatabase.exit_code == 66, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert all(w in lines[0] for w in words), lines[0]


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_serve_refuses_a_missing_folder_and_creates_nothing(tmp_path: Path) -> None:
    db = tmp_path / "typo" / "path" / "db.duckdb"
    _refused(_cli("serve", "--db", str(db), "--port", "0"), f"folder {db.parent} does not exist", "--create")
    assert _files(tmp_path) == []


def _serve_once(db: Path, port_file: Path, *flags: str, env: dict[str, str] | None = None) -> str:
    """``serve`` until it is ready (its port in ``port_file``), then SIGTERM: what it wrote on standard error."""
    port_file.unlink(missing_ok=True)
    merged = {**os.environ, **(env or {})}
    server = subprocess.Popen(
        [sys.executable, "-m", "collector", "serve", "--db", str(db), "--port", "0", "--port-file", str(port_file),
         "--log-level", "warning", *flags],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=merged, cwd=ROOT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600  # a hang guard, not a speed target
        while not (port_file.exists() and port_file.read_text()):
            assert server.poll() is None and time.monotonic() < deadline, "the collector did not start"
            time.sleep(0.05)
    finally:
        server.terminate()
        _, stderr = server.communicate(timeout=60)
    return stderr


def test_serve_with_create_makes_the_folder_and_says_the_database_is_new_once(tmp_path: Path) -> None:
    db = tmp_path / "new" / "fleet" / "db.duckdb"
    first = _serve_once(db, tmp_path / "port", "--create")
    assert f"new database created at {db}\n" in first, first
    assert db.is_file()
    again = _serve_once(db, tmp_path / "port")  # an existing database is opened without a word, --create or not
    assert "new database" not in again and "flopfleet collector" in again, again


def test_the_create_setting_comes_from_the_environment_too(tmp_path: Path) -> None:
    db = tmp_path / "from-env" / "db.duckdb"
    assert f"new database created at {db}\n" in _serve_once(db, tmp_path / "port", env={"FLOPFLEET_CREATE": "1"})
    assert (Settings.from_env({"FLOPFLEET_CREATE": "yes"}).create, Settings.from_env({}).create) == (True, False)
    assert Settings.from_env({"FLOPFLEET_CREATE": "0"}, create=None).create is False
    with pytest.raises(CollectorError, match="FLOPFLEET_CREATE='maybe'"):
        Settings.from_env({"FLOPFLEET_CREATE": "maybe"})


def test_token_create_refuses_a_missing_folder_unless_asked_to_create_it(tmp_path: Path) -> None:
    db = tmp_path / "typo" / "db.duckdb"
    _refused(_cli("token", "create", "--name", "lab-a", "--db", str(db)), f"folder {db.parent} does not exist")
    for command in (["list"], ["revoke", "lab-a"]):  # nothing to create: refused even where creating is allowed
        _refused(_cli("token", *command, "--db", str(db), env={"FLOPFLEET_CREATE": "1"}), "does not exist")
    assert _files(tmp_path) == []
    done = _cli("token", "create", "--name", "lab-a", "--db", str(db), "--create")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ffk_")
    assert f"no database at {db} yet" in done.stderr  # a token for a file name with a typo is not silent either
    assert not db.exists() and (tmp_path / "typo" / "db.duckdb.tokens.json").is_file()


def test_a_new_database_in_an_existing_folder_says_so_once(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    first = _cli("import-reference", "--db", str(db))
    assert first.returncode == 0 and first.stderr == f"new database created at {db}\n", first.stderr
    again = _cli("import-reference", "--db", str(db))
    assert again.returncode == 0 and again.stderr == "", again.stderr


READ_ONLY = [
    ["report", "--format", "md"],
    ["sql", "SELECT 1"],
    ["health"],
    ["prices", "list"],
    ["baseline", "list"],
    ["baseline", "show", "x"],
    ["snapshot", "--output", "{tmp}/copy.duckdb"],
    ["export", "--output", "{tmp}/out"],
    ["archive"],  # writes, but only to a database that exists
    ["baseline", "remove", "x"],
]


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: " ".join(c[:2]))
def test_a_command_that_needs_the_database_refuses_a_missing_file(tmp_path: Path, command: list[str]) -> None:
    db = tmp_path / "typo.duckdb"
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    _refused(_cli(*args, "--db", str(db), env={"FLOPFLEET_RETENTION_DAYS": "30"}), f"no database at {db}")
    assert _files(tmp_path) == []


def test_the_collector_doc_documents_the_exit_code_and_the_setting() -> None:
    doc = (ROOT / "docs" / "collector.md").read_text(encoding="utf-8")
    assert f"| {MissingDatabase.exit_code} | no database there: the `--db` folder does not exist" in doc
    assert "| `--create` | `FLOPFLEET_CREATE` |" in doc

"""``serve`` refuses a database file it must not open in one ``error:`` line, with an exit code a supervisor can act
on (``collector/errors.py``), and leaves the file as it found it."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from collector.errors import CorruptDatabase, DatabaseBusy, NewerDatabase
from collector.store import Store
from tests.collector.conftest import held_open
from tests.conftest import ROOT


def _serve(db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "60"}  # a narrow terminal: the refusal stays one line all the same
    return subprocess.run([sys.executable, "-m", "collector", "serve", "--db", str(db), "--port", "0"],
                          capture_output=True, text=True, env=env, timeout=60, cwd=ROOT)  # fmt: skip


def _fingerprint(db: Path) -> tuple[str, list[str]]:
    return hashlib.sha256(db.read_bytes()).hexdigest(), sorted(p.name for p in db.parent.iterdir())


def _assert_refused(done: subprocess.CompletedProcess[str], code: int, words: str) -> None:
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert words in lines[0], lines[0]


def test_a_corrupt_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    db.write_bytes(b"not a database " * 1000)
    before = _fingerprint(db)
    _assert_refused(_serve(db), CorruptDatabase.exit_code, "is not a readable DuckDB database")
    assert _fingerprint(db) == before


def test_a_file_from_a_newer_collector_is_refused_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    Store(db).close()
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = '99' WHERE key = 'db_version'")
    con.close()
    before = _fingerprint(db)
    _assert_refused(_serve(db), NewerDatabase.exit_code, "written by a newer collector (db_version 99")
    assert _fingerprint(db) == before
    with pytest.raises(NewerDatabase):  # read-only commands (report, sql) refuse it the same way
        Store(db, read_only=True)


def test_a_file_in_use_is_refused_as_busy(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    Store(db).close()
    with held_open(db):
        _assert_refused(_serve(db), DatabaseBusy.exit_code, "is in use by another process")


def test_the_readme_documents_each_refusals_exit_code() -> None:
    readme = (ROOT / "README.md").read_text()
    for error, words in ((DatabaseBusy, "in use"), (CorruptDatabase, "not a readable DuckDB"),
                         (NewerDatabase, "a newer collector")):  # fmt: skip
        assert f"| {error.exit_code} | the file is {words}" in readme or f"| {error.exit_code} | {words}" in readme
    assert len({DatabaseBusy.exit_code, CorruptDatabase.exit_code, NewerDatabase.exit_code, 1}) == 4

"""Settings: defaults, then environment, then flags; every setting documented in docs/collector.md's table."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from collector.store.errors import CollectorError
from collector.web.settings import Settings

DOC = (Path(__file__).resolve().parents[2] / "docs" / "collector.md").read_text(encoding="utf-8")


def test_environment_then_flags() -> None:
    env = {"FLOPFLEET_PORT": "9001", "FLOPFLEET_DB": "/tmp/x.duckdb", "FLOPFLEET_LOG_LEVEL": "debug"}
    s = Settings.from_env(env, port=None, log_level="warning")
    assert (s.port, s.db, s.log_level) == (9001, Path("/tmp/x.duckdb"), "warning")


def test_bad_values_are_named() -> None:
    with pytest.raises(CollectorError, match="FLOPFLEET_PORT='eighty'"):
        Settings.from_env({"FLOPFLEET_PORT": "eighty"})
    with pytest.raises(CollectorError, match="port 70000"):
        Settings(port=70000)
    with pytest.raises(CollectorError, match="db_threads"):
        Settings(db_threads=0)


def test_duckdb_threads_default_to_one_and_can_be_raised() -> None:
    assert Settings().db_threads == 1
    assert Settings.from_env({"FLOPFLEET_DB_THREADS": "3"}).db_threads == 3


def test_a_query_memory_share_is_a_part_of_duckdbs_or_a_size_within_it() -> None:
    whole = Settings(db_memory_limit="4GB")
    assert whole.sql_memory_bytes() == 4 * 10**8  # 10 % by default
    assert Settings(db_memory_limit="4GB", sql_memory_limit="512MiB").sql_memory_bytes() == 512 << 20
    assert (
        Settings.from_env({"FLOPFLEET_SQL_MEMORY_LIMIT": "10%", "FLOPFLEET_DB_MEMORY_LIMIT": "1GB"}).sql_memory_bytes()
        == 10**8
    )
    for bad in ("0%", "150%", "lots", "5"):
        with pytest.raises(CollectorError, match=f"sql_memory_limit '{bad}' is not a percentage"):
            Settings(sql_memory_limit=bad)
    with pytest.raises(CollectorError, match="sql_memory_limit 2GB is more than db_memory_limit"):
        Settings(db_memory_limit="1GB", sql_memory_limit="2GB")


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this system")
def test_validation_workers_follow_the_cores_the_collector_may_use() -> None:
    """A collector pinned to one core (taskset, a cpuset) validates in its own process, however many the host has:
    a real child process with its affinity set before it starts."""
    probe = "from collector.web.settings import Settings; print(Settings().validate_workers)"
    one_core = {min(os.sched_getaffinity(0))}
    pinned = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                            preexec_fn=lambda: os.sched_setaffinity(0, one_core))  # fmt: skip
    assert pinned.stdout.strip() == "0"
    free = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert free.stdout.strip() == str(min(4, len(os.sched_getaffinity(0)) - 1))


@pytest.mark.parametrize("name", [f.name for f in fields(Settings)])
def test_every_setting_is_documented(name: str) -> None:
    assert f"| `FLOPFLEET_{name.upper()}` |" in DOC.split("\n## Settings\n")[1].split("\n## ")[0]

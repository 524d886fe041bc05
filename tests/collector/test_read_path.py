"""The read path's layers: renderers never see the database, no module reaches into another's private names, the
summaries kept at ingest agree with the raw tables, and ``flopfleet-collector sql`` has the HTTP API's limits."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import duckdb

from collector.store import SUMMARY_TABLES, Store
from tests.collector.conftest import query
from tests.conftest import ROOT
from tests.factories import T0, bandwidth, gpu, make_run, matmul
from tests.fixture_db import build_fixture_db

PACKAGES = ("agent", "collector", "schemas", "benchmarks")


def _imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every ``from module import name`` in ``path``, relative imports resolved."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    package = parts[:-1]  # a module's package, and an __init__'s own
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[: len(package) - node.level + 1], *([base] if base else [])])
            found += [(base, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, "") for alias in node.names]
    return found


def _sources(*roots: str) -> list[Path]:
    return [p for root in roots for p in (ROOT / root).rglob("*.py")]


def test_renderers_import_no_database() -> None:
    for path in _sources("collector/render", "collector/templates"):
        for module, _ in _imports(path):
            assert not module.startswith(("duckdb", "collector.store")), f"{path} imports {module}"


def test_no_module_imports_another_modules_private_names() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: {module}.{name}"
        for path in _sources(*PACKAGES, "tests")
        for module, name in _imports(path)
        if name.startswith("_") and not name.startswith("__") and module.split(".")[0] in (*PACKAGES, "tests")
    ]
    assert offenders == []


def test_the_summaries_agree_with_the_raw_tables_and_survive_a_lost_refresh(tmp_path: Path) -> None:
    # The fixture's A100s run before and after an upgrade: each device's latest figure is its newest run's.
    store = build_fixture_db(tmp_path / "f.duckdb")
    latest_from_raw = """
        SELECT d.device_id, f.figure, arg_max(f.value, d.started_at) FROM figures f
        JOIN devices d ON d.run_id = f.run_id AND d.gpu_index IS NOT DISTINCT FROM f.gpu_index GROUP BY ALL"""
    summary = "SELECT device_id, figure, value FROM latest_figures"
    assert sorted(query(store, summary).fetchall()) == sorted(query(store, latest_from_raw).fetchall())
    counts = "SELECT device_id, runs FROM device_latest ORDER BY 1"
    raw_counts = "SELECT device_id, count(*) FROM devices GROUP BY 1 ORDER BY 1"
    assert query(store, counts).fetchall() == query(store, raw_counts).fetchall()
    before = {t: sorted(map(str, query(store, f"SELECT * FROM {t}").fetchall())) for t in SUMMARY_TABLES}
    store.close()
    # As a crash between a commit and its refresh leaves it (or an older collector's file): no summaries at all.
    con = duckdb.connect(str(tmp_path / "f.duckdb"))
    for table in SUMMARY_TABLES:
        con.execute(f"DELETE FROM {table}")
    con.close()
    with Store(tmp_path / "f.duckdb") as again:
        after = {t: sorted(map(str, query(again, f"SELECT * FROM {t}").fetchall())) for t in SUMMARY_TABLES}
    assert after == before


def test_an_older_run_posted_late_does_not_replace_a_newer_latest(tmp_path: Path) -> None:
    from datetime import timedelta

    def run(value: float, hours: int) -> object:
        return make_run([matmul(8192, "bf16", value), bandwidth(1 << 26, 3000.0)], gpus=[gpu("NVIDIA H100 80GB HBM3")],
                        started=T0 + timedelta(hours=hours))  # fmt: skip

    with Store(tmp_path / "db.duckdb") as store:
        store.add_run(run(700.0, hours=5))  # type: ignore[arg-type]
        store.add_run(run(500.0, hours=1))  # type: ignore[arg-type]
        latest = query(store, "SELECT value FROM latest_figures WHERE figure = 'matmul_bf16'").fetchall()
        runs = query(store, "SELECT runs FROM device_latest").fetchall()
    assert latest == [(700.0,)] and runs == [(2,)]


def test_the_sql_command_stops_an_endless_query_at_the_sql_time_limit(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    with Store(db) as store:
        store.add_run(make_run([matmul(64, "fp32", 1.0)]))
    env = {**os.environ, "FLOPFLEET_SQL_TIMEOUT_S": "2"}
    done = subprocess.run(
        [sys.executable, "-m", "collector", "sql", "--db", str(db), "SELECT count(*) FROM range(100000000000000)"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1 and "2 s" in done.stderr, done.stderr


def test_the_sql_command_caps_rows_at_the_setting(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    with Store(db):
        pass
    env = {**os.environ, "FLOPFLEET_SQL_MAX_ROWS": "7"}
    done = subprocess.run(
        [sys.executable, "-m", "collector", "sql", "--db", str(db), "--format", "csv", "--max-rows", "100",
         "SELECT * FROM range(50)"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.strip().splitlines()) == 1 + 7 and "stopped after 7 rows" in done.stderr

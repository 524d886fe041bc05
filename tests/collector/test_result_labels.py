"""``result_facts`` labels each result from the rows the store keeps per device of each run (``device_runs``), and
every view answers as it did when it joined the raw ``runs`` and ``gpus`` with a subquery per result: on runs with
several GPUs, results that name none, a CPU run and a run whose first GPU is not 0; and
a file an older collector kept, once opened, answers as a new one does."""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from collector.store import DB_VERSION, Store
from collector.store.aggregates import RUN_FIELDS
from collector.store.figures import RUN_COPY, TRUSTED
from collector.store.sqlviews import VIEWS
from schemas import RunSubmission
from tests.factories import T0, bandwidth, collective, gpu, inference, matmul, run_dict, training

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"

#: The views as they were before they read kept rows: each result joined to ``runs`` and to the ``devices`` view, a
#: result that names no GPU to its run's first through a subquery, and each run's best copy by a window.
BEFORE = {
    "result_facts": f"""
        SELECT r.*, {TRUSTED} AS trusted, d.card, d.gpu_model, d.gpu_name, d.device_id AS gpu_uuid, d.power_limit_w,
               d.power_limit_default_w, d.pcie_gen, d.pcie_gen_max, d.pcie_width, d.pcie_width_max, ru.hostname,
               ru.started_at, ru.suite, ru.device, ru.source, ru.torch, ru.cuda, ru.driver, ru.transformers,
               ru.agent_version
        FROM results r JOIN runs ru USING (run_id)
        JOIN devices d ON d.run_id = r.run_id AND d.gpu_index IS NOT DISTINCT FROM coalesce(
            r.gpu_index, (SELECT min(g.gpu_index) FROM gpus g WHERE g.run_id = r.run_id))""",
    "inference": VIEWS["inference"].split("FROM (SELECT f.*")[0]
    + f"""FROM (SELECT *, {RUN_COPY} AS copy_gbps FROM result_facts WHERE benchmark IN ('inference', 'bandwidth'))
          WHERE trusted AND benchmark = 'inference'""",
    "gpu_counters": VIEWS["gpu_counters"]
    .replace("d.hostname, d.started_at", "ru.hostname, ru.started_at")
    .replace(
        "FROM gpus g JOIN device_runs d ON",
        "FROM gpus g JOIN runs ru USING (run_id) JOIN devices d ON d.run_id = g.run_id AND",
    ),
}


def _run(
    results: list[dict[str, Any]], gpus: list[dict[str, Any]], host: str, hours: int, **software: str
) -> RunSubmission:
    run = run_dict(results, gpus, hostname=host, started=T0 + timedelta(hours=hours))
    run["software"].update(software)
    return RunSubmission.model_validate_json(json.dumps(run))


def _runs() -> list[RunSubmission]:
    two = [gpu(H100, 0, host="n1"), gpu(H100, 1, host="n1", power_limit_w=500.0)]
    starved_copy = {**bandwidth(1 << 24, 3300.0, op="copy"), "gpu_index": 1, "flags": ["starved"]}
    return [
        _run(  # two GPUs: results of each, a copy on the second only, results that span both
            [matmul(4096, "bf16", 700.0), matmul(4096, "bf16", 600.0, gpu_index=1),
             {**bandwidth(1 << 26, 3000.0, op="copy"), "gpu_index": 1}, starved_copy,
             {**inference("decode", 1, 1024, 5e-3, datasheet=3350), "gpu_index": 1},
             inference("decode", 1, 1024, 6e-3, datasheet=3350), collective("all_reduce", 1 << 30, 300.0),
             {**training("gpt2-medium", 40_000.0), "gpu_index": None},
             matmul(1024, "fp16", 1.0, status="error", reason="out of memory", metrics=None, timing=None)],
            two, "n1", 0, transformers="4.57.0"),
        _run([matmul(4096, "bf16", 710.0), collective("all_gather", 1 << 20, 100.0)], two, "n1", 5),
        _run(  # a run of a GPU whose index is not 0: a machine-wide result is labelled with it
            [matmul(4096, "bf16", 280.0, gpu_index=2), collective("all_reduce", 1 << 28, 90.0)],
            [gpu(A100, 2, host="n2")], "n2", 1),
        _run([matmul(512, "fp32", 1.0, gpu_index=None), {**bandwidth(1 << 20, 20.0), "gpu_index": None}], [],
             "cpu1", 2),  # a CPU run
    ]  # fmt: skip


def _answers(db: Path) -> dict[str, list[str]]:
    """Every row of every view and of ``device_runs``, each view's as a multiset (views keep no order)."""
    with duckdb.connect(str(db), read_only=True) as con:
        return {
            name: sorted(map(repr, con.execute(f"SELECT * FROM {name}").fetchall())) for name in (*VIEWS, "device_runs")
        }


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("labels") / "fresh.duckdb"
    with Store(db) as store:
        for run in _runs():
            store.add_run(run)
    return db


def test_the_views_answer_from_kept_rows_as_they_did_from_the_raw_tables(fresh: Path, tmp_path: Path) -> None:
    before = tmp_path / "before.duckdb"
    shutil.copy(fresh, before)
    with duckdb.connect(str(before)) as con:
        for name, sql in BEFORE.items():
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
    answers = _answers(fresh)
    assert answers == _answers(before)
    with duckdb.connect(str(fresh), read_only=True) as con:
        rows = con.execute(
            "SELECT benchmark, coalesce(CAST(gpu_index AS VARCHAR), '-'), card, hostname FROM result_facts "
            "WHERE benchmark IN ('collective', 'training') OR hostname = 'cpu1'"
        ).fetchall()
        copies = con.execute("SELECT copy_gbps, copy_fraction IS NOT NULL FROM inference ORDER BY copy_gbps").fetchall()
    # What the data holds for the labels to get right: results that name no GPU labelled with the run's first (index
    # 2 on n2), a CPU run's with its CPU; the best trusted copy of the same GPU, or none.
    assert sorted(rows) == sorted([
        ("collective", "-", f"{H100} 80 GiB · 700 W", "n1"), ("training", "-", f"{H100} 80 GiB · 700 W", "n1"),
        ("collective", "-", f"{H100} 80 GiB · 700 W", "n1"), ("collective", "-", f"{A100} 80 GiB · 700 W", "n2"),
        ("matmul", "-", "CPU: Xeon", "cpu1"), ("bandwidth", "-", "CPU: Xeon", "cpu1")])  # fmt: skip
    assert copies == [(3000.0, True), (None, False)]


def test_an_older_file_once_opened_answers_as_a_new_one(fresh: Path, tmp_path: Path) -> None:
    old = tmp_path / "old.duckdb"
    shutil.copy(fresh, old)
    with duckdb.connect(str(old)) as con:  # as a collector before device_runs kept the runs' fields left it
        con.execute("DROP INDEX device_runs_device")
        con.execute(f"CREATE TABLE older AS SELECT * EXCLUDE ({', '.join(RUN_FIELDS)}, first_in_run) FROM device_runs")
        con.execute("DROP TABLE device_runs")
        con.execute("ALTER TABLE older RENAME TO device_runs")
        for name, sql in BEFORE.items():
            con.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
        con.execute("UPDATE meta SET value = ? WHERE key = 'db_version'", [str(DB_VERSION - 1)])
    Store(old).close()
    assert _answers(old) == _answers(fresh)
    later = _run([matmul(4096, "bf16", 690.0, gpu_index=1), collective("all_reduce", 1 << 30, 310.0)],
                 [gpu(H100, 1, host="n1")], "n1", 9)  # fmt: skip
    for db in (old, fresh):  # and stores runs as a new one does
        with Store(db) as store:
            store.add_run(later)
    assert _answers(old) == _answers(fresh)
    with duckdb.connect(str(old), read_only=True) as con:
        index = "SELECT count(*) FROM duckdb_indexes() WHERE index_name = 'device_runs_device'"
        assert con.execute(index).fetchone() == (1,)

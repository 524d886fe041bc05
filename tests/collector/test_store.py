"""The DuckDB store on a real file: whole runs, once; typed columns; read-only SQL."""

from __future__ import annotations

import contextlib
import json
import threading
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from collector.store import SUMMARY_TABLES, Store
from collector.store.errors import DatabaseBusy, QueryRefused, RunConflict
from collector.store.figures import EXTRA, FIGURES, MATCHED, PER_WATT
from collector.store.sqlguard import QueryTimeout
from collector.store.sqlviews import VIEWS
from schemas import RunSubmission
from schemas.health_figures import UNTRUSTED_FLAGS
from schemas.labels import PER_WATT_SUFFIX
from scripts.results_files import json_files, read_text
from tests.collector.conftest import held_open, query
from tests.factories import T0, bandwidth, layer, make_run, matmul


def test_a_run_is_stored_whole_with_typed_columns(tmp_path: Path) -> None:
    run = make_run([matmul(8192, "bf16", 700.0), layer("bert_layer", "fwd", 64, 512, 390.0), bandwidth(1 << 26, 4200)])
    with Store(tmp_path / "db.duckdb") as store:
        stored = store.add_run(run)
        assert stored.status == "created" and stored.results == 3
        assert query(store, "SELECT count(*) FROM runs").fetchone() == (1,)
        assert query(store, "SELECT count(*) FROM gpus").fetchone() == (1,)
        row = query(store, "SELECT dtype, n, tflops, timing_method FROM results WHERE benchmark = 'matmul'").fetchone()
        assert row == ("bf16", 8192, 700.0, "cuda_event")
        types = dict(query(store, "SELECT column_name, data_type FROM information_schema.columns "
                                 "WHERE table_name = 'results'").fetchall())  # fmt: skip
        assert (types["tflops"], types["n"], types["flags"], types["run_id"]) == (
            "DOUBLE",
            "BIGINT",
            "VARCHAR[]",
            "UUID",
        )


def test_the_same_run_twice_is_stored_once_and_a_changed_one_is_a_conflict(tmp_path: Path) -> None:
    run = make_run([matmul(64, "fp32", 1.0)])
    changed = make_run([matmul(64, "fp32", 2.0)], run_id=str(run.run_id))
    with Store(tmp_path / "db.duckdb") as store:
        assert store.add_run(run).status == "created"
        assert store.add_run(run).status == "duplicate"
        with pytest.raises(RunConflict, match=str(run.run_id)):
            store.add_run(changed)
        assert query(store, "SELECT count(*) FROM results").fetchone() == (1,)


def test_views_answer_with_the_card_name(tmp_path: Path) -> None:
    with Store(tmp_path / "db.duckdb") as store:
        store.add_run(make_run([matmul(4096, "fp16", 600.0)]))
        for view in VIEWS:
            query(store, f"SELECT * FROM {view} LIMIT 1").fetchall()
        assert query(store, "SELECT card, tflops FROM matmul").fetchall() == [
            ("NVIDIA H100 80GB HBM3 80 GiB · 700 W", 600.0)
        ]


def test_a_read_only_store_refuses_writes_and_the_guard_names_the_statement(tmp_path: Path) -> None:
    path = tmp_path / "db.duckdb"
    with Store(path) as store:
        store.add_run(make_run([matmul(64, "fp32", 1.0)]))
    with Store(path, read_only=True) as store:
        assert store.sql("SELECT count(*) AS n FROM runs", max_rows=10).rows == [(1,)]
        for sql, kind in (("DELETE FROM runs", "DELETE"), ("COPY runs TO 'x.csv'", "COPY"),
                          ("ATTACH 'x.db' AS x", "ATTACH"), ("PRAGMA version", "PRAGMA")):  # fmt: skip
            with pytest.raises(QueryRefused, match=kind):
                store.sql(sql, max_rows=10)
        with pytest.raises(QueryRefused, match="exactly one statement"):
            store.sql("SELECT 1; SELECT 2", max_rows=10)
    # Below the guard, DuckDB itself refuses: the file is open read-only.
    con = duckdb.connect(str(path), read_only=True)
    with pytest.raises(duckdb.Error):
        con.execute("INSERT INTO meta VALUES ('a', 'b')")
    con.close()


def test_row_cap_sets_truncated(tmp_path: Path) -> None:
    with Store(tmp_path / "db.duckdb") as store:
        result = store.sql("SELECT * FROM range(100)", max_rows=10)
    assert len(result.rows) == 10 and result.truncated


def test_a_database_held_by_a_writer_is_reported_busy(tmp_path: Path) -> None:
    path = tmp_path / "db.duckdb"
    Store(path).close()
    with held_open(path), pytest.raises(DatabaseBusy, match="in use by another process"):
        Store(path, read_only=True)


def test_a_database_from_before_new_columns_gains_them_and_keeps_its_runs(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    with Store(db) as store:
        store.add_run(make_run([matmul(1024, "bf16", 500.0)]))
    # What a database written before multi-GPU results looked like: these columns did not exist.
    con = duckdb.connect(str(db))
    for view in VIEWS:
        con.execute(f"DROP VIEW IF EXISTS {view}")
    for table, column in (("results", "nodes"), ("results", "scaling_efficiency"), ("runs", "topology"),
                          ("gpus", "nvlink_active")):  # fmt: skip
        con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    con.close()
    with Store(db) as store:
        collective = {
            "benchmark": "collective", "name": "collective", "gpu_index": None, "status": "ok",
            "params": {"op": "all_reduce", "backend": "nccl", "dtype": "fp32", "bytes": 1 << 30, "world_size": 2,
                       "nodes": 2},
            "metrics": {"algbw_gbps": 100.0, "busbw_gbps": 100.0, "rel_error": 0.0},
            "timing": matmul(1024, "bf16", 500.0)["timing"],
        }  # fmt: skip
        store.add_run(make_run([collective], topology="GPU0 X NV18"))
        rows = query(store, "SELECT nodes, busbw_gbps FROM collectives").fetchall()
        assert rows == [(2, 100.0)]
        assert query(store, "SELECT count(*) FROM matmul").fetchone() == (1,)


def test_the_writer_folds_the_log_into_the_file_once_runs_stop_coming(tmp_path: Path) -> None:
    # A checkpoint inside a commit stalled every run in it; the writer now checkpoints when idle. Without that,
    # the write-ahead log would stay until the store closes.
    import time

    db = tmp_path / "db.duckdb"
    wal = db.with_name(db.name + ".wal")
    with Store(db, threads=1) as store:
        # A reader's long query (its read transaction open meanwhile) does not stop it.
        def read() -> None:
            with contextlib.suppress(QueryTimeout):  # on a loaded machine it may reach its time limit: still a reader
                store.sql("SELECT sum(range) FROM range(3000000000)", timeout_s=15)

        slow = threading.Thread(target=read)
        slow.start()
        store.add_run(make_run([matmul(2048, "fp16", 300.0)]))
        deadline = time.monotonic() + 600
        while wal.exists() and wal.stat().st_size > 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        folded_while_reading = slow.is_alive()
        assert not wal.exists() or wal.stat().st_size == 0
        slow.join()
        assert folded_while_reading
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM results").fetchone() == (1,)
    con.close()


def _expected_figures(run: RunSubmission) -> dict[tuple[int | None, str], float]:
    """Each figure worked out in Python from the run's results: the oracle for the store's join; and each one's twin
    per watt, over the power its best result read."""
    best: dict[tuple[int | None, str], float] = {}
    power: dict[tuple[int | None, str], float | None] = {}
    trusted = [r for r in run.model_dump(mode="json")["results"]
               if r["status"] == "ok" and not UNTRUSTED_FLAGS & set(r.get("flags") or [])]  # fmt: skip
    copies: dict[int | None, float] = {}  # each GPU's best copy in the run: what copy_fraction divides by
    for r in trusted:
        if r["benchmark"] == "bandwidth" and r["params"]["op"] == "copy":
            copies[r.get("gpu_index")] = max(copies.get(r.get("gpu_index"), 0.0), r["metrics"]["gbps"])
    for result in trusted:
        params, metrics = result["params"], result.get("metrics") or {}
        if result.get("gpu_index") in copies and metrics.get("gbps") is not None:
            metrics = {**metrics, "copy_fraction": metrics["gbps"] / copies[result.get("gpu_index")]}
        for f in (*FIGURES, *EXTRA):
            wanted = {m: getattr(f, m) for m in MATCHED if getattr(f, m) is not None}
            if result["benchmark"] != f.benchmark or any(params.get(m) != v for m, v in wanted.items()):
                continue
            if f.dtype_prefix and not str(params.get("dtype", "")).startswith(f.dtype_prefix):
                continue
            source = result if f.value == "peak_fraction" else metrics  # the fraction is the result's own
            if source.get(f.value) is None:
                continue
            key = (result.get("gpu_index"), f.key)
            value = source[f.value] * f.scale
            if value > best.get(key, float("-inf")):
                best[key], power[key] = value, (result.get("timing") or {}).get("power_w")
    twins = {f.key.removesuffix(PER_WATT_SUFFIX): f.key for f in PER_WATT}
    for (gpu, key), value in list(best.items()):
        watts = power.get((gpu, key))
        if key in twins and watts:
            best[(gpu, twins[key])] = value / watts
    return best


def test_figures_are_the_best_value_of_each_kind_on_real_runs(tmp_path: Path) -> None:
    """Every run file measured on the H200s (one GPU and two): the figures the store keeps are exactly those a
    reading of the definitions in Python finds, FP8 formats, pinned copies and MFU percentages included."""
    files = json_files((Path(__file__).parents[2] / "docs" / "results").glob("h200*"))
    runs = []
    for path in files:
        text = read_text(path)
        data = json.loads(text)
        if isinstance(data, dict) and "results" in data and "schema_version" in data:
            runs.append(RunSubmission.model_validate_json(text))
    assert len(runs) >= 8
    # and one where FP8 is not the fastest matmul
    runs.append(make_run([matmul(4096, "fp16", 900.0), matmul(4096, "fp8_e4m3", 800.0), matmul(64, "bf16", 5.0)]))
    with Store(tmp_path / "db.duckdb") as store:
        for run in runs:
            store.add_run(run)
        for run in runs:
            stored = {
                (gpu, figure): value
                for gpu, figure, value in query(
                    store, f"SELECT gpu_index, figure, value FROM figures WHERE run_id = '{run.run_id}'"
                ).fetchall()
            }
            expected = _expected_figures(run)
            assert stored.keys() == expected.keys(), run.run_id
            assert all(stored[k] == pytest.approx(v, rel=1e-12) for k, v in expected.items()), run.run_id
        kinds = {f for (f,) in query(store, "SELECT DISTINCT figure FROM figures").fetchall()}
        assert {"matmul_fp8", "h2d", "train_bert_mfu", "memory", "bert_fwdbwd"} <= kinds


def test_runs_left_without_figures_get_them_when_the_store_opens(tmp_path: Path) -> None:
    """Figures and summaries follow their run's commit by a moment (one transaction): runs a crash left without
    them get them when the store next opens, the same as if nothing had happened, and runs that have them are not
    counted twice."""
    runs = [make_run([matmul(4096, "bf16", 700.0 + i), bandwidth(1 << 26, 4000.0 + i)], started=T0 + timedelta(hours=i))
            for i in range(3)]  # fmt: skip
    tables = ("figures", *SUMMARY_TABLES)

    def contents(store: Store) -> dict[str, list[str]]:
        return {t: sorted(map(str, query(store, f"SELECT * FROM {t}").fetchall())) for t in tables}

    with Store(tmp_path / "whole.duckdb") as store:
        for run in runs:
            store.add_run(run)
        expected = contents(store)
    path = tmp_path / "crashed.duckdb"
    with Store(path) as store:
        store.add_run(runs[0])
        store.add_group([runs[1].model_dump_json().encode()])  # committed; the store closes before its refresh
        assert query(store, f"SELECT count(*) FROM figures WHERE run_id = '{runs[1].run_id}'").fetchone() == (0,)
    with Store(path) as store:
        store.add_run(runs[2])
        assert contents(store) == expected
    assert len({row.split(",")[0] for row in expected["figures"]}) == 3

"""One shape: the tables' typed columns come from the models, so a field cannot drift from its column unnoticed, and
what a served collector stores is the validated run's values (issue 30, item 2)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
from pydantic import BaseModel

from collector.store import Store
from collector.store.columns import Column, sql_type
from collector.store.tables import LEFT_OUT, METRICS, PARAMS, TABLES, Table, ddl
from schemas import RunSubmission
from schemas.environment import Gpu, GpuCounters, GpuSamples, Host, Software, StateSummary
from schemas.results import Result, TimingStats
from scripts.results_files import read_text
from tests.conftest import ROOT
from tests.factories import layer, matmul, run_dict
from tests.servers import Collector, serve_collector

EXPECTED = Path(__file__).with_name("expected")
#: Real runs that together hold every kind of result, GPU counters, XIDs, several GPUs and a failed case.
RUN_FILES = [
    ROOT / "docs" / "results" / "h200" / "standard1.json",
    ROOT / "docs" / "results" / "h200" / "standard-with-inference.json",
    ROOT / "docs" / "results" / "h200" / "mamf.json",
    ROOT / "docs" / "results" / "h200-x2" / "multi1.json",
]
RESULT_KINDS: list[type[BaseModel]] = list(get_args(get_args(Result)[0]))


def _post(served: Collector, body: bytes) -> httpx.Response:
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip", **served.auth}
    return httpx.post(f"{served.url}/api/v1/runs", content=gzip.compress(body), headers=headers, timeout=60)


def _field(model: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        model = getattr(model, part, None)
    return model


def _sent(raw: Any, path: tuple[str, ...]) -> tuple[bool, Any]:
    """Whether the agent sent the field at ``path`` of this element's JSON, and its JSON value."""
    for part in path:
        if not isinstance(raw, dict) or part not in raw:
            return False, None
        raw = raw[part]
    return True, raw


def _expected(element: Any, raw: dict[str, Any], column: Column) -> Any:
    """What ``column`` should hold for ``element``, as DuckDB hands it back: the validated value of a field the agent
    sent (a whole column: its JSON as sent), NULL for one it left out."""
    sent, value = _sent(raw, column.path)
    if not sent:
        return None
    if column.whole:
        return value
    value = _field(element, column.path)
    return list(value) if isinstance(value, tuple) else value


def _rows(store: Store, table: Table, run_id: str, order: str) -> list[dict[str, Any]]:
    answer = store.sql(f"SELECT * FROM {table.name} WHERE run_id = '{run_id}' ORDER BY {order}", max_rows=100_000)
    return [dict(zip(answer.columns, row, strict=True)) for row in answer.rows]


def _check(table: Table, stored: dict[str, Any], element: Any, raw: dict[str, Any]) -> None:
    for column in table.columns:
        if not column.path:
            continue
        value = stored[column.name]
        got = json.loads(value) if column.whole and value is not None else value
        assert got == _expected(element, raw, column), f"{table.name}.{column.name}"


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real runs posted to a real collector whose validation worker is its own process, as in production."""
    db = tmp_path_factory.mktemp("one-shape") / "db.duckdb"
    with serve_collector(db, validate_workers=1) as served:
        for path in RUN_FILES:
            answer = _post(served, read_text(path).encode())
            assert answer.status_code == 201, answer.text
    return db


def test_the_typed_columns_hold_the_validated_runs_values(stored: Path) -> None:
    with Store(stored, read_only=True) as store:
        for path in RUN_FILES:
            run = RunSubmission.model_validate_json(body := read_text(path))
            raw = json.loads(body)
            run_id = str(run.run_id)
            (runs_row,) = _rows(store, TABLES["runs"], run_id, "run_id")
            _check(TABLES["runs"], runs_row, run, raw)
            assert runs_row["source"] == "agent" and runs_row["received_at"] is not None
            results = _rows(store, TABLES["results"], run_id, "seq")
            assert [r["seq"] for r in results] == list(range(len(run.results)))
            for row, result, sent in zip(results, run.results, raw["results"], strict=True):
                _check(TABLES["results"], row, result, sent)
            gpus = _rows(store, TABLES["gpus"], run_id, "gpu_index")
            by_index = sorted(zip(run.gpus, raw["gpus"], strict=True), key=lambda pair: pair[0].index)
            for row, (gpu, sent) in zip(gpus, by_index, strict=True):
                _check(TABLES["gpus"], row, gpu, sent)
            samples = store.sql(
                f"SELECT t_s, gpu_index, power_w FROM gpu_samples WHERE run_id = '{run_id}'", max_rows=100_000
            ).rows
            expected = zip(run.gpu_samples.t_s, run.gpu_samples.gpu_index, run.gpu_samples.power_w, strict=True)
            assert sorted(samples, key=repr) == sorted(expected, key=repr)
            summary = store.sql(f"SELECT results, gpu_names FROM run_summaries WHERE run_id = '{run_id}'").rows
            assert summary == [(len(run.results), [g.name for g in sorted(run.gpus, key=lambda g: g.index)])]


def test_nothing_sent_is_lost_and_an_unknown_field_is_refused_by_name(stored: Path, tmp_path: Path) -> None:
    body = read_text(RUN_FILES[0]).encode()
    run = RunSubmission.model_validate_json(body)
    with Store(stored, read_only=True) as store:
        # The run as sent, byte for byte; a param without a column of its own is in the params JSON.
        assert store.run_payload(str(run.run_id)).encode() == body
        (params,) = store.sql(
            f"SELECT params FROM results WHERE run_id = '{run.run_id}' AND benchmark = 'layer' ORDER BY seq LIMIT 1"
        ).rows[0]
    first_layer = next(r for r in json.loads(body)["results"] if r["benchmark"] == "layer")
    assert "hidden" not in {c.name for c in TABLES["results"].columns}
    assert json.loads(params) == first_layer["params"] and "hidden" in json.loads(params)
    unknown = run_dict([matmul(1024, "bf16", 500.0), layer("bert_layer", "fwd", 8, 128, 90.0)])
    unknown["results"][1]["params"]["attention_heads"] = 16
    wrong = run_dict([matmul(1024, "bf16", 500.0)])
    wrong["results"][0]["params"]["n"] = "1024"
    with serve_collector(tmp_path / "db.duckdb", validate_workers=1) as served:
        for bad, field in ((unknown, "results.1.layer.params.attention_heads"), (wrong, "results.0.matmul.params.n")):
            answer = _post(served, json.dumps(bad).encode())
            assert answer.status_code == 422 and field in answer.json()["error"]["message"], answer.text
            assert answer.json()["error"]["details"][0]["loc"] == field


def test_every_field_of_the_models_has_its_column_or_is_left_out_by_name() -> None:
    """A field added to a model gets a typed column (added to old files by the migration) or is named in
    ``tables.LEFT_OUT``; params and metrics people do not filter on stay whole in their JSON column."""
    tables_of = {"gpus": "gpus", "results": "results", "gpu_samples": "gpu_samples"}  # the run's arrays: tables
    expanded = [
        ("runs", "", [RunSubmission]), ("runs", "host", [Host]), ("runs", "software", [Software]),
        ("gpus", "", [Gpu]), ("gpus", "counters_before", [GpuCounters]), ("gpus", "counters_after", [GpuCounters]),
        ("results", "", RESULT_KINDS), ("results", "timing", [TimingStats]), ("results", "state", [StateSummary]),
        ("gpu_samples", "", [GpuSamples]),
    ]  # fmt: skip
    for table, under, models in expanded:
        paths = [c.path for c in TABLES[table].columns]
        left = LEFT_OUT.get((table, under), ())
        for model in models:
            for name in model.model_fields:
                path = (under, name) if under else (name,)
                has = any(p[: len(path)] == path for p in paths) or (table == "runs" and name in tables_of)
                assert has != (name in left), f"{model.__name__}.{name}: a column in {table}, or in LEFT_OUT"
    whole = {c.path[0] for c in TABLES["results"].columns if c.whole}
    assert {"params", "metrics"} <= whole
    for under, typed in (("params", PARAMS), ("metrics", METRICS)):
        kinds = [kind.model_fields[under].annotation for kind in RESULT_KINDS]
        models = [m for a in kinds for m in (get_args(a) or (a,)) if isinstance(m, type) and issubclass(m, BaseModel)]
        for name in typed:
            infos = [m.model_fields[name] for m in models if name in m.model_fields]
            assert infos, f"{under}.{name} is a column but no {under} model has it"
            column = next(c for c in TABLES["results"].columns if c.path == (under, name))
            derived = {sql_type(info) for info in infos}
            assert len(derived) == 1 and column.sql in {*derived, "BIGINT"}, (name, derived, column.sql)


def test_the_stored_layout_is_unchanged() -> None:
    """Columns, types and their order as files on disk have them: a change needs a migration (store/layout.py)."""
    assert ";\n\n".join(ddl(t) for t in TABLES) + ";\n" == (EXPECTED / "tables.sql").read_text()

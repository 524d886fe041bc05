"""One source of truth for health: the figure table's SQL (the collector's definitions) and Python (the agent's
``figure_values``) pick the same values from real runs. Real runs from the H200, a real DuckDB file."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agent.suites import HEALTH
from collector.figures import BY_KEY, MATCHED
from collector.store import Store
from schemas import RunSubmission
from schemas.health_figures import HEALTH_FIGURES, figure_values, health_figure
from tests.conftest import ROOT

RESULTS = ROOT / "docs" / "results"


def _real_runs() -> list[RunSubmission]:
    """Every run file measured on the H200s (docs/results/h200*), leaving out the other tables kept beside them."""
    runs = []
    for path in sorted(RESULTS.glob("h200*/**/*.json")):
        try:
            runs.append(RunSubmission.model_validate_json(path.read_text()))
        except ValidationError:
            continue  # a summary table, not a run
    return runs


def test_the_sql_and_the_python_of_each_health_figure_pick_the_same_values_from_real_runs(tmp_path: Path) -> None:
    runs = {run.run_id: run for run in _real_runs()}.values()
    python = {(str(run.run_id), *key): value for run in runs for key, value in figure_values(run.results).items()}
    with Store(tmp_path / "f.duckdb") as store:
        for run in runs:
            store.add_run(run)
        store.settle()
        keys = ", ".join(f"'{k}'" for k in HEALTH_FIGURES)
        rows = store.sql(f"SELECT run_id, gpu_index, figure, value FROM figures WHERE figure IN ({keys})",
                         max_rows=10_000).rows  # fmt: skip
    sql = {(str(r), g, f): v for r, g, f, v in rows}
    assert sql.keys() == python.keys()
    assert all(sql[k] == pytest.approx(python[k], rel=1e-12) for k in sql)
    assert {f for _, _, f in sql} == set(HEALTH_FIGURES)  # every figure was read from something
    starved = [r for run in runs for r in run.results if "starved" in r.flags]
    assert any(health_figure(r) for r in starved)  # a busy host's BERT layer (busy-host/loaded.json): left out by both


def test_each_health_figure_is_defined_once_and_measured_by_the_health_profile() -> None:
    for key, figure in HEALTH_FIGURES.items():
        assert set(figure.match) <= set(MATCHED)
        assert BY_KEY[key].label == figure.label and BY_KEY[key].unit == figure.unit  # generated, not copied
        assert figure.measured_by in HEALTH.grids  # what check runs again to confirm it

"""One source of truth for health: the figure table's SQL (the collector's definitions) and Python (the agent's
``figure_values``) pick the same values from real runs, and the agent judging a machine alone says what the collector
says of the same runs (both hand their observations to ``schemas.observations.judge_fleet``). Real runs from the H200,
a real DuckDB file."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent.harness.suites import HEALTH
from agent.run.check import judge_locally
from collector.read.views import fleet_health
from collector.store import Store
from collector.store.figures import BY_KEY, MATCHED
from schemas import RunSubmission
from schemas.baselines import BaselineIndex, bundled
from schemas.health_figures import HEALTH_FIGURES, figure_values, health_figure
from schemas.verdicts import GpuVerdict, Level
from scripts.bundle_baselines import committed
from scripts.results_files import json_files, read_text
from tests.conftest import ROOT
from tests.factories import T0, bandwidth, gpu, layer, make_run, matmul, transfer

RESULTS = ROOT / "docs" / "results"


def _real_runs() -> list[RunSubmission]:
    """Every run file measured on the H200s (docs/results/h200*), leaving out the other tables kept beside them."""
    runs = []
    for path in json_files(RESULTS.glob("h200*")):
        try:
            runs.append(RunSubmission.model_validate_json(read_text(path)))
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


def test_a_figure_of_one_size_is_that_products_value_not_the_best_on_both_sides(tmp_path: Path) -> None:
    # matmul_fp32_4096 matches n; matmul_fp32 (the table's row) is the best of any size
    run = make_run([matmul(4096, "fp32", 51.3), matmul(8192, "fp32", 51.9), matmul(8192, "bf16", 690.0)],
                   gpus=[gpu(H200)], suite="health")  # fmt: skip
    python = figure_values(run.results)
    assert python[(0, "matmul_fp32_4096")] == 51.3 and python[(0, "matmul_bf16")] == 690.0
    with Store(tmp_path / "f.duckdb") as store:
        store.add_run(run)
        store.settle()
        rows = dict(store.sql("SELECT figure, value FROM figures", max_rows=1000).rows)
    assert rows["matmul_fp32_4096"] == 51.3 and rows["matmul_fp32"] == 51.9 and rows["matmul_bf16"] == 690.0


def test_each_health_figure_is_defined_once_and_measured_by_the_health_profile() -> None:
    for key, figure in HEALTH_FIGURES.items():
        assert set(figure.match) <= set(MATCHED)
        assert BY_KEY[key].label == figure.label and BY_KEY[key].unit == figure.unit  # generated, not copied
        assert figure.measured_by in HEALTH.grids  # what check runs again to confirm it


def test_the_health_page_of_the_docs_lists_the_figures_as_the_table_defines_them() -> None:
    lines = (ROOT / "docs" / "health.md").read_text().splitlines()
    start = lines.index("| figure | label | what measures it | unit |") + 2
    rows = lines[start : next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    assert [(c[0], c[1], c[-1]) for c in cells] == [(f"`{f.key}`", f.label, f.unit) for f in HEALTH_FIGURES.values()]


H200 = "NVIDIA H200"
HOST = "n1"
#: Near the bundled H200 baseline of the health profile, so that every reference is in play.
HEALTHY = {"matmul_bf16": 690.0, "memory": 4250.0, "h2d": 55.0, "bert_fwdbwd": 466.0}


def _machine(values: dict[int, dict[str, float]], hour: int, **fields: dict[str, Any]) -> RunSubmission:
    """One health run of an 8-GPU-style H200 machine: each GPU in ``values`` with its figures."""
    results = []
    for index, figures in values.items():
        v = {**HEALTHY, **figures}
        made = [matmul(8192, "bf16", v["matmul_bf16"]), bandwidth(1 << 28, v["memory"]), transfer("h2d", v["h2d"]),
                layer("bert_layer", "fwd+bwd", 64, 512, v["bert_fwdbwd"])]  # fmt: skip
        results += [{**r, "gpu_index": index} for r in made]
    gpus = [gpu(H200, index=i, memory_gib=140, host=HOST, **fields.get(str(i), {})) for i in values]
    return make_run(results, gpus=gpus, hostname=HOST, suite="health", started=T0 + timedelta(hours=hour),
                    run_id=str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{HOST}-{hour}")))  # fmt: skip


def _both(tmp_path: Path, runs: list[RunSubmission]) -> tuple[list[GpuVerdict], dict[str | None, GpuVerdict]]:
    """The agent's verdicts of ``runs`` (newest first) with the bundled baselines, and the collector's of the same
    runs stored one at a time, by UUID: judged after each, as a collector taking them does (the verdicts it keeps
    between refreshes, ``read.verdicts``)."""
    agent = judge_locally(runs, BaselineIndex((b, "bundled") for b in bundled()))
    with Store(tmp_path / "f.duckdb") as store:
        for run in reversed(runs):
            store.add_run(run)
            store.settle()
            fleet_health(store.reads())
        collector = {v.device: v.wire("collector") for v in fleet_health(store.reads())}
    return agent, collector


def _same(agent: GpuVerdict, collector: GpuVerdict) -> None:
    """Equal but for who judged, and the likely causes the collector adds after the judge's reasons."""
    assert collector.reasons[: len(agent.reasons)] == agent.reasons
    assert collector.model_copy(update={"judged_by": "agent", "reasons": agent.reasons}) == agent


def test_the_agent_alone_and_the_collector_judge_a_machines_runs_alike(tmp_path: Path) -> None:
    # Four GPUs: GPU 1 faulty (an uncorrectable ECC error), GPU 3 low in BF16 matmul, measured again (check's
    # re-measurement, only that GPU and figure's run) and still low: confirmed.
    fault = {"1": {"counters_after": {"ecc_uncorrected_volatile": 1}}}
    profile = _machine({0: {}, 1: {}, 2: {"memory": 4230.0}, 3: {"matmul_bf16": 560.0}}, 0, **fault)
    again = _machine({3: {"matmul_bf16": 565.0}}, 1)
    agent, collector = _both(tmp_path, [again, profile])
    assert [v.level for v in agent] == [Level.ok, Level.faulty, Level.ok, Level.slow]
    assert {ref for f in agent[0].figures for ref in ("peers", "baseline", "floor") if getattr(f, ref)} == {
        "peers", "baseline", "floor"}  # fmt: skip
    for v in agent:
        _same(v, collector[v.uuid])


def test_the_agent_alone_and_the_collector_judge_real_health_runs_alike(tmp_path: Path) -> None:
    # The health profiles of the H200 with the most of them (docs/results/h200.md, "Baselines"): enough to take the
    # threshold from the GPU's own spread on both sides.
    health = [r for r in _real_runs() if r.suite == "health" and r.gpus]
    most = max({r.gpus[0].uuid for r in health}, key=lambda u: sum(r.gpus[0].uuid == u for r in health))
    runs = sorted((r for r in health if r.gpus[0].uuid == most), key=lambda r: r.started_at, reverse=True)
    assert len(runs) >= 5
    agent, collector = _both(tmp_path, runs)
    (v,) = agent
    measured = {f for r in runs for f in HEALTH_FIGURES if any(HEALTH_FIGURES[f].selects(x) for x in r.results)}
    assert v.level is Level.ok and {f.figure for f in v.figures} == measured >= {"matmul_bf16", "memory", "h2d"}
    assert all(f.window == 3 and f.baseline for f in v.figures)
    _same(v, collector[v.uuid])


def _slower(run: RunSubmission, figure: str, by: float, hour: int, only: str | None = None) -> RunSubmission:
    """``run`` with ``figure``'s results ``by`` lower (a crafted cause: the brief's way to test a clock or power
    cause without touching a GPU's settings), as a new run ``hour`` hours later; ``only``: that benchmark's results."""
    results = []
    for r in run.results:
        if only and r.benchmark != only:
            continue
        if HEALTH_FIGURES[figure].selects(r) and r.metrics is not None:
            r = r.model_copy(update={"metrics": r.metrics.model_copy(update={"tflops": r.metrics.tflops * (1 - by)})})
        results.append(r)
    return run.model_copy(update={"results": tuple(results), "started_at": run.started_at + timedelta(hours=hour),
                                  "run_id": uuid.uuid5(run.run_id, f"{figure}-{hour}")})  # fmt: skip


def test_a_gpu_doing_5_percent_less_work_at_full_clock_is_caught_on_its_first_check_and_one_at_the_limit_is_not() -> (
    None
):
    # A real healthy first check of an H200 new to the bundle when it ran (full-clock/call5), with one figure 5 % lower
    # in the check and in check's re-measurement of it, judged as check judges it without a collector.
    runs = [c.run for c in committed() if c.path.startswith("full-clock/call5-") and c.run.suite == "health"
            and not any("busy" in x.flags for x in c.run.results)]  # fmt: skip
    first = min(runs, key=lambda r: r.started_at)
    index = BaselineIndex((b, "bundled") for b in bundled())
    (healthy,) = judge_locally([first], index)
    assert healthy.level is Level.ok
    (slow,) = judge_locally([_slower(first, "matmul_fp32_4096", 0.05, 2, "matmul"),
                             _slower(first, "matmul_fp32_4096", 0.05, 1)], index)  # fmt: skip
    assert slow.level is Level.slow and len(slow.reasons) == 1 and slow.reasons[0].startswith("FP32 matmul n=4096 ")
    fp32 = next(f for f in slow.figures if f.figure == "matmul_fp32_4096")
    assert fp32.baseline_threshold == pytest.approx(0.03) and fp32.failing == 2
    # bf16 at 8192^3, at the power limit: healthy H200s differ by 0.9 %, so 5 % alone is inside its threshold
    (limit,) = judge_locally([_slower(first, "matmul_bf16", 0.05, 2, "matmul"),
                              _slower(first, "matmul_bf16", 0.05, 1)], index)  # fmt: skip
    bf16 = next(f for f in limit.figures if f.figure == "matmul_bf16")
    assert limit.level is Level.ok and bf16.baseline_threshold is not None and bf16.baseline_threshold > 0.05

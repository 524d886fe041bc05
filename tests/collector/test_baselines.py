"""Baselines between real collectors: a fleet's healthy runs exported over HTTP and by the CLI, imported into a fresh
collector that then judges a lone GPU from its first run; tampered and newer bundles refused with nothing stored;
the thresholds of a one-GPU and a many-GPU baseline; software differences named; SuperBench and AzNHC exports
evaluated as those tools evaluate them, against flopfleet's own verdict."""

from __future__ import annotations

import gzip
import json
import random
import re
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent.run.check import judge_locally
from collector.read.views import fleet_health
from collector.store import Store
from schemas import RunSubmission
from schemas.baselines import BaselineIndex, bundled, card_key, parse_bundle
from schemas.verdicts import Level, baseline_reference
from scripts.results_files import read, read_text
from tests.conftest import ROOT, collector_cli
from tests.factories import T0, bandwidth, gpu, layer, make_run, matmul, run_dict, transfer
from tests.servers import serve_collector

H100 = "NVIDIA H100 80GB HBM3"
CARD = "NVIDIA H100 80GB HBM3 80 GiB · 700 W"
HEALTHY = {"matmul_bf16": 700.0, "memory": 3000.0, "h2d": 55.0, "d2h": 54.0, "bert_fwdbwd": 460.0}


def _results(scale: float = 1.0, jitter: random.Random | None = None) -> list[dict[str, Any]]:
    def v(key: str) -> float:
        return HEALTHY[key] * scale * (1 + (jitter.uniform(-0.004, 0.004) if jitter else 0.0))

    return [matmul(8192, "bf16", v("matmul_bf16")), bandwidth(1 << 28, v("memory")), transfer("h2d", v("h2d")),
            transfer("d2h", v("d2h")), layer("bert_layer", "fwd+bwd", 64, 512, v("bert_fwdbwd"))]  # fmt: skip


def _run(host: str, hour: int, scale: float = 1.0, *, seed: int = 0, torch: str = "2.11.0", **gpu_fields: Any) -> str:
    """One health-suite run of one H100 as its JSON (a GPU per host; ``scale`` its speed)."""
    data = run_dict(
        _results(scale, random.Random(seed * 1000 + hour)),
        gpus=[gpu(H100, memory_gib=80, host=host, **gpu_fields)],
        hostname=host,
        started=T0 + timedelta(hours=hour),
        run_id=str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{host}-{hour}-{scale}")),
        torch=torch,
        suite="health",
    )
    return json.dumps(data)


@pytest.fixture(scope="module")
def fleet_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A fleet of five healthy H100s (four runs each) and one slow one, served by a real collector; its baseline
    exported over HTTP. Yields (the fleet's database, the bundle)."""
    db = tmp_path_factory.mktemp("fleet") / "fleet.duckdb"
    with serve_collector(db) as site:
        for host in ("a", "b", "c", "d", "e"):
            for hour in range(4):
                posted = httpx.post(f"{site.url}/api/v1/runs", content=_run(host, hour, seed=ord(host)),
                                    headers={**site.auth, "Content-Type": "application/json"}, timeout=30)  # fmt: skip
                assert posted.status_code == 201, posted.text
        for hour in range(4):  # a slow GPU: confirmed slow, so none of its runs enter the baseline
            httpx.post(f"{site.url}/api/v1/runs", content=_run("slow", hour, 0.8), timeout=30,
                       headers={**site.auth, "Content-Type": "application/json"}).raise_for_status()  # fmt: skip
        answer = httpx.get(f"{site.url}/api/v1/baselines/export", params={"model": "H100", "name": "lab-a"},
                           headers=site.auth, timeout=30)  # fmt: skip
        assert answer.status_code == 200, answer.text
    return db, answer.json()  # the server stopped: its file is free for the CLI


def test_a_fleets_baseline_stands_on_its_healthy_gpus_each_counted_once(fleet_bundle: tuple[Path, Any]) -> None:
    _, data = fleet_bundle
    bundle = parse_bundle(json.dumps(data))  # its hash holds
    (card,) = bundle.cards
    assert (card.card, card.suite, card.kind) == (CARD, "health", "measured")
    figures = {f.figure: f for f in card.figures}
    memory = figures["memory"]
    assert (memory.gpus, memory.runs) == (5, 20)  # the slow GPU left out; each of five GPUs four runs
    assert memory.value == pytest.approx(3000.0, rel=0.005) and memory.low < memory.value < memory.high
    assert memory.between_gpus is not None and 0 < memory.between_gpus < 0.01
    assert memory.within_gpu is not None and 0 < memory.within_gpu < 0.01
    assert card.software.torch == ("2.11",) and card.software.cuda == ("13.0",)
    assert bundle.source.filters == {"model": "H100"}


def test_the_cli_exports_from_the_file_and_refuses_a_model_without_data(fleet_bundle: tuple[Path, Any]) -> None:
    db, over_http = fleet_bundle
    done = collector_cli("baseline", "export", "--db", str(db), "--model", "H100", "--name", "lab-a")
    assert done.returncode == 0, done.stderr
    assert "left out: 1 GPU judged slow, faulty or suspect now" in _err(done)
    from_file = json.loads(done.stdout)
    assert [c["figures"] for c in from_file["cards"]] == [c["figures"] for c in over_http["cards"]]
    none = collector_cli("baseline", "export", "--db", str(db), "--model", "A100")
    assert none.returncode == 1 and "nothing to export" in _err(none)
    bad = collector_cli("baseline", "export", "--db", str(db), "--model", "H100(")
    assert bad.returncode == 1 and "is not a regular expression" in _err(bad)


def test_a_fresh_collector_judges_a_lone_gpu_from_its_first_run(tmp_path: Path, fleet_bundle: tuple[Path, Any]) -> None:
    _, data = fleet_bundle
    with serve_collector(tmp_path / "fresh.duckdb") as site:
        imported = httpx.post(f"{site.url}/api/v1/baselines", content=json.dumps(data), headers=site.auth, timeout=30)
        assert imported.status_code == 201 and imported.json()["cards"] == [CARD]
        again = httpx.post(f"{site.url}/api/v1/baselines", content=json.dumps(data), headers=site.auth, timeout=30)
        assert again.status_code == 200 and again.json()["status"] == "duplicate"
        for host, scale in (("new-slow", 0.85), ("new-good", 1.0)):
            httpx.post(f"{site.url}/api/v1/runs", content=_run(host, 10, scale, seed=9), timeout=30,
                       headers={**site.auth, "Content-Type": "application/json"}).raise_for_status()  # fmt: skip
        uuids = [("uuid", gpu(H100, memory_gib=80, host=host)["uuid"]) for host in ("new-slow", "new-good")]
        answer = httpx.get(f"{site.url}/api/v1/verdicts", params=uuids, headers=site.auth, timeout=30)
    verdicts = {v["host"]: v for v in answer.json()}
    slow, good = verdicts["new-slow"], verdicts["new-good"]
    assert good["level"] == "ok" and "baseline 'lab-a'" in good["baseline"] and "5 GPUs, 20 runs" in good["baseline"]
    assert slow["level"] == "suspect"  # flagged on its first run; a re-measurement (check) would confirm it
    memory = next(r for r in slow["reasons"] if r.startswith("memory"))
    assert re.match(rf"memory 2,5\d\d GB/s is 15% below the {re.escape(CARD)} baseline \(\d,\d{{3}}, 5 GPUs, 20 runs, "
                    r"2026-11\) \(threshold 3%\), in its latest measurement only", memory), memory  # fmt: skip
    assert all(f["baseline"] and f["peers"] for f in slow["figures"])  # each other's peers, and the baseline


def _verdict_hosts(db: Path) -> dict[str, Any]:
    with Store(db) as store:
        store.settle()
        return {v.hostname: v for v in fleet_health(store.reads())}


def test_an_imported_baseline_is_the_first_reference_of_a_lone_gpu(tmp_path: Path, fleet_bundle: Any) -> None:
    _, data = fleet_bundle
    db = tmp_path / "b.duckdb"
    with Store(db) as store:
        store.add_baseline(parse_bundle(json.dumps(data)))
        store.add_run(RunSubmission.model_validate_json(_run("lone", 10, 0.85, seed=3)))
    v = _verdict_hosts(db)["lone"]
    assert v.level is Level.suspect and v.figures["memory"].references[0].name == "baseline"


def test_the_agent_judges_against_the_same_bundle_alike(fleet_bundle: tuple[Path, Any]) -> None:
    _, data = fleet_bundle
    index = BaselineIndex([(parse_bundle(json.dumps(data)), "file")])
    for scale, level in ((0.85, Level.suspect), (1.0, Level.ok)):
        run = RunSubmission.model_validate_json(_run("here", 10, scale, seed=4))
        (v,) = judge_locally([run], index)
        assert v.level is level
        assert v.baseline is not None and "5 GPUs" in v.baseline
    run = RunSubmission.model_validate_json(_run("here", 10, 0.85, seed=4))
    again = RunSubmission.model_validate_json(_run("here", 11, 0.86, seed=5))
    (confirmed,) = judge_locally([again, run], index)  # check's re-measurement, newest first
    assert confirmed.level is Level.slow


def test_a_tampered_or_newer_bundle_is_refused_and_nothing_is_stored(tmp_path: Path, fleet_bundle: Any) -> None:
    _, data = fleet_bundle
    db = tmp_path / "t.duckdb"
    Store(db).close()  # a collector's file, with its bundled baselines only
    tampered = json.loads(json.dumps(data))
    tampered["cards"][0]["figures"][0]["value"] *= 0.5
    bad = tmp_path / "tampered.json"
    bad.write_text(json.dumps(tampered))
    done = collector_cli("baseline", "import", "--db", str(db), str(bad))
    assert done.returncode == 1 and "does not match its sha256" in _err(done) and "nothing was imported" in _err(done)
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({**data, "schema_version": 99}))
    done = collector_cli("baseline", "import", "--db", str(db), str(newer))
    assert done.returncode == 1 and "schema_version 99" in _err(done) and "upgrade" in _err(done)
    pinned = tmp_path / "good.json"
    pinned.write_text(json.dumps(data))
    done = collector_cli("baseline", "import", "--db", str(db), str(pinned), "--sha256", "00" * 6)
    assert done.returncode == 1 and "not the 000000000000 expected" in _err(done)
    listed = collector_cli("baseline", "list", "--db", str(db), "--format", "json")
    assert [r["origin"] for r in json.loads(listed.stdout)] == ["bundled"] * len(bundled())
    done = collector_cli("baseline", "import", "--db", str(db), str(pinned), "--sha256", data["sha256"][:12])
    assert done.returncode == 0 and "created" in done.stdout
    shown = collector_cli("baseline", "show", "--db", str(db), data["sha256"][:8])
    assert parse_bundle(shown.stdout).sha256 == data["sha256"]  # handed on, its hash holds
    assert collector_cli("baseline", "remove", "--db", str(db), "lab-a").returncode == 0
    refused = collector_cli("baseline", "remove", "--db", str(db), bundled()[0].id)
    assert refused.returncode == 1 and "bundled" in _err(refused)


def _err(done: Any) -> str:
    """What a command said on stderr, its lines joined (the console wraps long ones)."""
    return " ".join(str(done.stderr).split())


def _fleet(db: Path, hosts: list[str], runs: int) -> dict[str, Any]:
    """A baseline exported from ``hosts`` healthy H100s of ``runs`` runs each."""
    with Store(db) as store:
        for i, host in enumerate(hosts):
            for hour in range(runs):
                store.add_run(RunSubmission.model_validate_json(_run(host, hour, seed=i)))
    done = collector_cli("baseline", "export", "--db", str(db), "--name", db.stem)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def test_each_gpu_counts_once_and_too_few_runs_are_refused_with_the_reason(tmp_path: Path) -> None:
    # One GPU with nine runs 1 % slow and two with three runs each: the median of all fifteen runs would be the busy
    # GPU's value; the median of the three GPUs' medians is the middle GPU's.
    db = tmp_path / "uneven.duckdb"
    with Store(db) as store:
        for host, scale, runs in (("busy", 0.99, 9), ("mid", 1.0, 3), ("top", 1.01, 3)):
            for hour in range(runs):
                store.add_run(RunSubmission.model_validate_json(_run(host, hour, scale, seed=len(host))))
        store.add_run(RunSubmission.model_validate_json(_run("new", 0, seed=1).replace(H100, "NVIDIA L40S")))
    done = collector_cli("baseline", "export", "--db", str(db))
    assert done.returncode == 0, done.stderr
    (card,) = parse_bundle(done.stdout).cards  # the L40S has one run: left out, with the reason
    assert "left out: NVIDIA L40S 80 GiB · 700 W, health suite, memory: 1 healthy run of 1 GPU, at least 3 needed" in (
        _err(done)
    )
    memory = next(f for f in card.figures if f.figure == "memory")
    assert (memory.gpus, memory.runs) == (3, 15)
    assert memory.value == pytest.approx(3000.0, rel=0.003)  # not 2,970: the busy GPU's nine runs count once
    assert memory.low == pytest.approx(2970.0, rel=0.003) and memory.high == pytest.approx(3030.0, rel=0.003)
    few = tmp_path / "few.duckdb"
    with Store(few) as store:
        for hour in range(2):
            store.add_run(RunSubmission.model_validate_json(_run("solo", hour)))
    refused = collector_cli("baseline", "export", "--db", str(few))
    assert refused.returncode == 1 and refused.stdout == ""
    assert "nothing to export" in _err(refused) and "2 healthy runs of 1 GPU, at least 3 needed" in _err(refused)


def test_runs_beside_another_process_or_flagged_busy_or_starved_stay_out(tmp_path: Path) -> None:
    db = tmp_path / "shared.duckdb"
    with Store(db) as store:
        for host in ("h1", "h2", "h3", "shared", "flagged", "starved"):
            for hour in range(4):
                data = json.loads(_run(host, hour, seed=len(host), other_processes=int(host == "shared")))
                if host == "flagged":  # measured with --when-busy measure: every result says so
                    data["results"] = [{**r, "flags": ["busy"]} for r in data["results"]]
                if host == "starved":  # one window the loaded host starved: its other figures are suspect too
                    data["results"][0]["flags"] = ["starved"]
                store.add_run(RunSubmission.model_validate_json(json.dumps(data)))
        store.settle()
        assert {v.level for v in fleet_health(store.reads())} == {Level.ok}  # none is left out for its verdict
    done = collector_cli("baseline", "export", "--db", str(db))
    assert done.returncode == 0, done.stderr
    (card,) = parse_bundle(done.stdout).cards
    assert {(f.gpus, f.runs) for f in card.figures} == {(3, 12)}


def test_export_filters_by_tag_and_day(tmp_path: Path) -> None:
    db = tmp_path / "pools.duckdb"
    with Store(db) as store:  # pool a measured on 2026-11-01, pool b on 2026-11-03
        for host, pool, first in (("a1", "a", 0), ("a2", "a", 0), ("b1", "b", 48)):
            for hour in range(first, first + 4):
                data = {**json.loads(_run(host, hour, seed=len(host))), "tags": {"pool": pool}}
                store.add_run(RunSubmission.model_validate_json(json.dumps(data)))

    def exported(*filters: str) -> Any:
        done = collector_cli("baseline", "export", "--db", str(db), *filters)
        assert done.returncode == 0, done.stderr
        bundle = parse_bundle(done.stdout)
        (card,) = bundle.cards
        memory = next(f for f in card.figures if f.figure == "memory")
        return bundle.source.filters, (memory.gpus, memory.runs, str(memory.first), str(memory.last))

    assert exported("--tag", "pool=a") == ({"tag:pool": "a"}, (2, 8, "2026-11-01", "2026-11-01"))
    assert exported("--since", "2026-11-02") == ({"since": "2026-11-02"}, (1, 4, "2026-11-03", "2026-11-03"))
    assert exported() == ({}, (3, 12, "2026-11-01", "2026-11-03"))
    none = collector_cli("baseline", "export", "--db", str(db), "--tag", "pool=a", "--since", "2026-11-02")
    assert none.returncode == 1 and "nothing to export" in _err(none)


def test_a_one_gpu_baseline_is_judged_with_the_wider_threshold(tmp_path: Path, fleet_bundle: Any) -> None:
    one = BaselineIndex([(parse_bundle(json.dumps(_fleet(tmp_path / "one.duckdb", ["solo"], 4))), "file")])
    many = BaselineIndex([(parse_bundle(json.dumps(fleet_bundle[1])), "file")])
    run = RunSubmission.model_validate_json(_run("x", 20, 0.93, seed=7))  # 7 % slow
    (against_one,) = judge_locally([run], one)
    (against_many,) = judge_locally([run], many)
    memory_one = next(f for f in against_one.figures if f.figure == "memory")
    assert memory_one.baseline_threshold == 0.10 and against_one.level is Level.ok  # SuperBench's 10 %
    assert "1 GPU, 4 runs" in (memory_one.baseline_of or "")
    assert against_many.level is Level.suspect  # five GPUs agreeing within 1 %: a 7 % drop is news
    memory_many = next(f for f in against_many.figures if f.figure == "memory")
    assert memory_many.baseline_threshold is not None and memory_many.baseline_threshold < 0.05


def test_software_differences_are_named_where_the_figure_depends_on_them(fleet_bundle: Any) -> None:
    index = BaselineIndex([(parse_bundle(json.dumps(fleet_bundle[1])), "file")])
    run = RunSubmission.model_validate_json(_run("y", 20, 0.8, seed=8, torch="2.13.0"))
    (v,) = judge_locally([run], index)
    notes = {f.figure: f.note for f in v.figures}
    assert notes["bert_fwdbwd"] == "measured with torch 2.13 (baseline: 2.11)"
    assert notes["memory"] is None and notes["matmul_bf16"] is None  # a copy kernel; cuBLAS comes with CUDA
    assert any("torch 2.13 (baseline: 2.11)" in r for r in v.reasons if r.startswith("BERT"))


def test_the_collector_names_software_differences_alike(tmp_path: Path, fleet_bundle: Any) -> None:
    _, data = fleet_bundle
    with serve_collector(tmp_path / "sw.duckdb") as site:
        assert httpx.post(f"{site.url}/api/v1/baselines", content=json.dumps(data), headers=site.auth,
                          timeout=30).status_code == 201  # fmt: skip
        httpx.post(f"{site.url}/api/v1/runs", content=_run("newer", 10, 0.8, seed=6, torch="2.13.0"), timeout=30,
                   headers={**site.auth, "Content-Type": "application/json"}).raise_for_status()  # fmt: skip
        uuid_ = gpu(H100, memory_gib=80, host="newer")["uuid"]
        (v,) = httpx.get(f"{site.url}/api/v1/verdicts", params={"uuid": uuid_}, headers=site.auth, timeout=30).json()
    notes = {f["figure"]: f["note"] for f in v["figures"]}
    assert notes["bert_fwdbwd"] == "measured with torch 2.13 (baseline: 2.11)"
    assert notes["memory"] is None and notes["matmul_bf16"] is None
    assert any(r.startswith("BERT") and r.endswith("measured with torch 2.13 (baseline: 2.11)") for r in v["reasons"])


def test_a_power_capped_gpu_is_held_to_its_cards_baseline_at_the_default_limit(fleet_bundle: Any) -> None:
    index = BaselineIndex([(parse_bundle(json.dumps(fleet_bundle[1])), "file")])
    run = RunSubmission.model_validate_json(_run("capped", 20, 0.8, seed=9, power_limit_w=400.0))
    (v,) = judge_locally([run], index)
    assert v.level is Level.suspect and CARD in (v.baseline or "")
    assert all("power limit is below the default" in (f.note or "") for f in v.figures)
    assert card_key(H100, 80 << 30, 400.0) == "NVIDIA H100 80GB HBM3 80 GiB · 400 W"


def test_the_card_of_a_baseline_is_the_collectors_card(tmp_path: Path) -> None:
    with Store(tmp_path / "c.duckdb") as store:
        store.add_run(make_run(_results(), gpus=[gpu(H100, memory_gib=80, power_limit_w=699.6)]))
        (row,) = store.sql("SELECT card FROM devices").rows
    assert row[0] == card_key(H100, 80 << 30, 699.6)


def _superbench_benchmark(metric: str) -> str:
    """The benchmark a metric (or a rule's metric pattern) belongs to: RuleBase._get_metrics_by_benchmarks."""
    name = metric.split("/")[0]
    return metric.split(":")[0] if ":" in name else name


def _superbench_baseline_of(baseline: dict[str, float], metric: str) -> float | None:
    """DataDiagnosis._get_baseline_of_metric: the full name, else the name without its ``:rank``."""
    if metric in baseline:
        return baseline[metric]
    short = metric.strip(metric.split(":")[-1]).strip(":") if ":" in metric else metric.split("/")[0]
    return baseline.get(short)


def _superbench_diagnosis(baseline: dict[str, float], rules: dict[str, Any], raw: dict[str, float]) -> set[str]:
    """``sb result diagnosis`` of one node's raw metrics, as SuperBench's analyzer does it (700d6501:
    data_diagnosis.py, rule_base.py, diagnosis_rule_op.py): each rule checked for its fields, its criteria evaluated
    as the Python lambda it is; its metric patterns matched against the raw metrics of the same benchmark (the full
    name, else ``re.search``); a ``variance`` rule applies its criteria to (value - baseline) / baseline, a ``value``
    rule to the value. Returns the raw metrics that violate a rule."""
    by_benchmark: dict[str, set[str]] = {}
    for metric in raw:
        by_benchmark.setdefault(_superbench_benchmark(metric), set()).add(metric)
    violated = set()
    for name, rule in rules["superbench"]["rules"].items():
        assert {"function", "criteria", "categories", "metrics"} <= set(rule), name  # _check_and_format_rules
        criteria = eval(rule["criteria"])  # SuperBench evaluates it so; the file is the one just exported
        assert isinstance(criteria(0), bool), name  # RuleOp.check_criterion_with_a_value
        patterns = [rule["metrics"]] if isinstance(rule["metrics"], str) else rule["metrics"]
        matched = {m for p in patterns for m in by_benchmark.get(_superbench_benchmark(p), ())
                   if m in patterns or re.search(p, m)}  # fmt: skip
        for metric in matched:
            value = raw[metric]
            if rule["function"] == "variance":
                base = _superbench_baseline_of(baseline, metric)
                assert base, f"{metric}: no baseline (SuperBench raises)"
                value = (value - base) / base
            else:
                assert rule["function"] == "value", name
            if criteria(value):
                violated.add(metric)
    return violated


SB_METRICS = {"matmul_bf16": "cublaslt-gemm/bf16_0_8192_8192_8192_flops", "h2d": "mem-bw/h2d_bw",
              "d2h": "mem-bw/d2h_bw"}  # fmt: skip


def test_the_superbench_export_flags_what_flopfleet_flags(tmp_path: Path, fleet_bundle: Any) -> None:
    db, data = fleet_bundle
    folder = tmp_path / "sb"
    done = collector_cli("baseline", "export", "--db", str(db), "--model", "H100", "--format", "superbench",
                         "--output", str(folder))  # fmt: skip
    assert done.returncode == 0, done.stderr
    slug = "NVIDIA_H100_80GB_HBM3_80_GiB_700_W"
    assert sorted(p.name for p in folder.iterdir()) == [f"{slug}.baseline.json", f"{slug}.rules.yaml"]
    baseline = json.loads((folder / f"{slug}.baseline.json").read_text())  # as file_handler.read_baseline reads it
    rules = yaml.safe_load((folder / f"{slug}.rules.yaml").read_text())  # as file_handler.read_rules reads it
    assert set(baseline) == set(SB_METRICS.values()) and all(isinstance(v, float) for v in baseline.values())
    bundle = parse_bundle(json.dumps(data))  # the same fleet's baseline, as flopfleet judges with it
    (card,) = bundle.cards
    figures = {f.figure: f for f in card.figures}
    assert baseline == {name: round(figures[key].value, 4) for key, name in SB_METRICS.items()}
    index = BaselineIndex([(bundle, "file")])
    healthy_raw = {f"{name}:0": baseline[name] for name in SB_METRICS.values()}
    assert _superbench_diagnosis(baseline, rules, {**healthy_raw, "mem-bw/return_code:0": 0.0}) == set()
    failed = _superbench_diagnosis(baseline, rules, {**healthy_raw, "mem-bw/return_code:0": 1.0})
    assert failed == {"mem-bw/return_code:0"}  # a benchmark that failed is a failure in SuperBench's terms too
    seen = set()
    for scale in (0.97, 0.95, 0.92, 0.90, 0.85):
        text = _run("z", 30, scale, seed=11)
        (v,) = judge_locally([RunSubmission.model_validate_json(text)], index)
        levels = {f.figure: f for f in v.figures}
        raw = {f"{SB_METRICS[k]}:0": levels[k].value for k in ("matmul_bf16", "h2d")}
        # d2h is no verdict figure: flopfleet's rule for it is the baseline reference verdicts would use
        d2h = next(r["metrics"]["gbps"] for r in json.loads(text)["results"] if r["params"].get("direction") == "d2h")
        raw[f"{SB_METRICS['d2h']}:0"] = d2h
        d2h_ref, _ = baseline_reference(index, "d2h", CARD, None, "health", {})
        assert d2h_ref is not None
        ours = {f"{SB_METRICS[k]}:0" for k in ("matmul_bf16", "h2d") if levels[k].level is not Level.ok}
        ours |= {f"{SB_METRICS['d2h']}:0"} if d2h_ref.fails(d2h) else set()
        flagged = _superbench_diagnosis(baseline, rules, raw)
        assert flagged == ours, (scale, flagged, ours)
        seen.add(len(flagged))
    assert min(seen) == 0 and max(seen) == 3  # healthy and slow runs both among them: the test can tell


def test_the_azure_nhc_floor_fails_what_flopfleet_fails(fleet_bundle: Any) -> None:
    db, data = fleet_bundle
    done = collector_cli("baseline", "export", "--db", str(db), "--model", "H100", "--format", "azure-nhc")
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if not x.startswith("#")]
    floor = float(re.fullmatch(r" \* \|\| check_gpu_bw ([0-9.]+)", line).group(1))  # type: ignore[union-attr]
    index = BaselineIndex([(parse_bundle(json.dumps(data)), "file")])
    judged = set()
    for scale in (0.99, 0.95, 0.85):
        run = RunSubmission.model_validate_json(_run("w", 40, scale, seed=12))
        (v,) = judge_locally([run], index)
        h2d = next(f for f in v.figures if f.figure == "h2d")
        # AzNHC: a GPU below the floor fails (NHC2020); flopfleet: below its baseline threshold
        assert (h2d.value < floor) == (h2d.level is not Level.ok), scale
        judged.add(h2d.level)
    assert judged == {Level.ok, Level.suspect}


def test_the_bundled_h200_baseline_judges_a_healthy_lone_h200(tmp_path: Path) -> None:
    (h200,) = [b for b in bundled() if "H200" in b.name]
    assert {c.suite for c in h200.cards} == {"health", "standard"}
    health = next(c for c in h200.cards if c.suite == "health")
    assert {f.figure for f in health.figures} >= {"matmul_bf16", "memory", "h2d", "bert_fwdbwd"}
    # every figure stands on the GPUs whose health runs were kept with their UUID, each counted once
    # (per-watt twins stand on fewer GPUs, and so do the fp32 figures, measured by the profile since 2026-12-04)
    plain = [f for f in health.figures if not f.figure.endswith("_per_w") and not f.figure.startswith("matmul_fp32")]
    assert len({(f.gpus, f.runs) for f in plain}) == 1 and plain[0].gpus >= 1
    lent = {"memory_gib": 0, "memory_bytes": 150754820096, "power_limit_w": 700.0, "power_limit_default_w": 700.0}
    values = {f.figure: f.value for f in health.figures}
    results = [
        matmul(8192, "bf16", values["matmul_bf16"] * 0.99),
        matmul(4096, "fp32", values["matmul_fp32_4096"]),
        bandwidth(1 << 28, values["memory"]),
        transfer("h2d", values["h2d"]),
        layer("bert_layer", "fwd+bwd", 64, 512, values["bert_fwdbwd"]),
    ]
    run = make_run(results, gpus=[gpu("NVIDIA H200", **lent)], suite="health")
    (v,) = judge_locally([run], BaselineIndex((b, "bundled") for b in bundled()))
    assert v.level is Level.ok and "NVIDIA H200 140 GiB · 700 W baseline" in (v.baseline or "")
    with Store(tmp_path / "fresh.duckdb") as store:  # a fresh collector has it too
        store.add_run(run)
        store.settle()
        (seen,) = fleet_health(store.reads())
    assert seen.level is Level.ok and seen.figures["memory"].references[0].name == "baseline"


def test_the_bundled_baselines_are_what_the_projects_measurements_give() -> None:
    # scripts/bundle_baselines.py rebuilds each from docs/results/<card>/ through the store and the export's builder
    from scripts import bundle_baselines

    for card in bundle_baselines.SHIPPED.values():
        assert bundle_baselines.bundle_text(card) == card.output.read_text(), card.key


def test_the_card_page_report_and_metrics_show_the_baseline(tmp_path: Path, fleet_bundle: Any) -> None:
    db = tmp_path / "p.duckdb"
    with Store(db) as store:
        store.add_baseline(parse_bundle(json.dumps(standard_too(fleet_bundle[1]))))
        for hour in range(2):
            store.add_run(RunSubmission.model_validate_json(_run("p", hour, 0.85, seed=5)))
    with serve_collector(db) as site:
        page = httpx.get(f"{site.url}/cards/{CARD}", headers=site.auth, timeout=30).text
        gpu_page = httpx.get(f"{site.url}/gpus/{gpu(H100, memory_gib=80, host='p')['uuid']}", headers=site.auth,
                             timeout=30).text  # fmt: skip
        plain = httpx.get(f"{site.url}/report.md", headers=site.auth, timeout=30).text
        report = httpx.get(f"{site.url}/report.md", params={"baselines": "true"}, headers=site.auth, timeout=30).text
        metrics = httpx.get(f"{site.url}/metrics", headers=site.auth, timeout=30).text
    assert 'id="baseline"' in page and "lab-a (imported" in page and "healthy down to" in page
    assert "85% of its card&#39;s baseline" in gpu_page
    assert "baseline (5 GPUs)" in report and "baseline (5 GPUs)" not in plain
    ratio = re.search(r'flopfleet_gpu_baseline_ratio\{[^}]*baseline_gpus="5"[^}]*figure="memory"[^}]*\} ([0-9.]+)|'
                      r'flopfleet_gpu_baseline_ratio\{[^}]*figure="memory"[^}]*\} ([0-9.]+)', metrics)  # fmt: skip
    assert ratio is not None and float(ratio.group(1) or ratio.group(2)) == pytest.approx(0.85, abs=0.01)


def standard_too(data: dict[str, Any]) -> dict[str, Any]:
    """The fleet's bundle with its health card also given as the standard suite's (the report's rows), sealed."""
    from schemas.baselines import BaselineSource, CardBaseline, seal

    bundle = parse_bundle(json.dumps(data))
    cards = [*bundle.cards, *(CardBaseline(**{**c.model_dump(), "suite": "standard"}) for c in bundle.cards)]
    resealed = seal(bundle.name, BaselineSource(**bundle.source.model_dump()), cards)
    return json.loads(resealed.model_dump_json())


def test_published_tables_are_baselines_and_an_older_collectors_table_becomes_one(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "old.duckdb"
    Store(path).close()
    con = duckdb.connect(str(path))  # as a collector before baselines kept its published figures
    con.execute("""CREATE TABLE reference_values (card VARCHAR, metric VARCHAR, value DOUBLE, unit VARCHAR,
                   source VARCHAR, note VARCHAR, imported_at TIMESTAMPTZ)""")  # fmt: skip
    con.execute("INSERT INTO reference_values VALUES ('L40S', 'matmul_fp16_tflops', 250, 'TFLOPS', 'our wiki', NULL, "
                "now()), ('L40S', 'price_usd', 9000, 'USD', 'our wiki', NULL, now())")  # fmt: skip
    con.close()
    with Store(path) as store:
        rows = store.sql("SELECT card, metric, value, source FROM reference ORDER BY metric").rows
        kinds = store.sql("SELECT origin, kind FROM baselines JOIN baseline_figures ON id = baseline_id "
                          "WHERE card = 'L40S' GROUP BY ALL").rows  # fmt: skip
        tables = store.sql("SELECT count(*) FROM information_schema.tables WHERE table_name = 'reference_values'")
    assert rows == [("L40S", "matmul_fp16", 250.0, "our wiki"), ("L40S", "price_usd", 9000.0, "our wiki")]
    assert kinds == [("reference", "published")] and tables.rows == [(0,)]
    with Store(path) as store:  # a published column is never a verdict's reference
        shipped = {c.card for b in bundled() for c in b.cards}
        assert not BaselineIndex((b, o) for b, o in _stored(store)).cards() - shipped


def _stored(store: Store) -> list[tuple[Any, str]]:
    from collector.analysis.baselines import load_all

    return load_all(store.reads().baselines())


def test_the_api_refuses_a_bad_bundle_naming_why_and_needs_an_admin_token(tmp_path: Path, fleet_bundle: Any) -> None:
    _, data = fleet_bundle
    with serve_collector(tmp_path / "api.duckdb") as site:
        url = f"{site.url}/api/v1/baselines"
        bad = {**data, "cards": [{**data["cards"][0], "kind": "guessed"}]}
        refused = httpx.post(url, content=json.dumps(bad), headers=site.auth, timeout=30)
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "invalid_baseline"
        assert "cards.0.kind" in refused.json()["error"]["message"]
        assert httpx.post(url, content=json.dumps(data), timeout=30).status_code == 401
        listed = httpx.get(url, headers=site.auth, timeout=30).json()
        assert [b["origin"] for b in listed] == ["bundled"] * len(bundled())
        # Read as runs are: over 8 MiB on the wire or inflated is 413 before the body is held whole; gzip is taken.
        over = httpx.post(url, content=b" " * (9 << 20), headers=site.auth, timeout=30)
        assert over.status_code == 413 and "limit is 8388608" in over.json()["error"]["message"]
        bomb = httpx.post(url, content=gzip.compress(b" " * (64 << 20)), timeout=30,
                          headers={**site.auth, "Content-Encoding": "gzip"})  # fmt: skip
        assert bomb.status_code == 413 and "inflates past" in bomb.json()["error"]["message"]
        zipped = httpx.post(url, content=gzip.compress(json.dumps(data).encode()), timeout=30,
                            headers={**site.auth, "Content-Encoding": "gzip"})  # fmt: skip
        assert zipped.status_code == 201 and zipped.json()["cards"] == [CARD]
        # Removing: a bundled one is a conflict (it comes back at every start), a name two bundles share is asked
        # again by id, neither a server error; then the one named goes, with an admin token only.
        shipped = httpx.delete(f"{url}/{bundled()[0].id[:12]}", headers=site.auth, timeout=30)
        assert shipped.status_code == 409 and shipped.json()["error"]["code"] == "baseline_bundled"
        twin = standard_too(data)
        assert httpx.post(url, content=json.dumps(twin), headers=site.auth, timeout=30).status_code == 201
        both = httpx.delete(f"{url}/{data['name']}", headers=site.auth, timeout=30)
        assert both.status_code == 400 and "names 2 baselines" in both.json()["error"]["message"]
        assert httpx.get(f"{url}/{data['name']}", headers=site.auth, timeout=30).status_code == 400  # read alike
        assert httpx.delete(f"{url}/{twin['sha256'][:12]}", timeout=30).status_code == 401
        gone = httpx.delete(f"{url}/{twin['sha256'][:12]}", headers=site.auth, timeout=30)
        assert gone.status_code == 200
        assert gone.json() == {"id": twin["sha256"], "name": data["name"], "status": "removed"}


def test_check_refuses_an_unreadable_baseline_file_as_unknown(tmp_path: Path) -> None:
    from tests.conftest import agent_cli

    bad = tmp_path / "bad.baseline.json"
    bad.write_text("{}")
    done = agent_cli("check", "--baseline", str(bad), "--device", "cpu")
    assert done.returncode == 3 and "--baseline" in done.stderr and "not a baseline bundle" in done.stderr


def test_the_h200s_own_first_checks_judged_again_against_the_bundled_baseline(tmp_path: Path) -> None:
    # the run files of 2026-12-02's first checks on the H200 (docs/results/h200/baseline/): healthy ones pass, one
    # slowed by a competing process at 60 % duty fails in its first measurement and is confirmed by the second
    folder = ROOT / "docs" / "results" / "h200" / "baseline"
    duty = read(folder / "duty-runs.json")["0.6"]  # newest first: re-measurement, then profile
    with Store(tmp_path / "h200.duckdb") as store:
        store.add_run(RunSubmission.model_validate_json(read_text(folder / "health-1.json")))
        store.settle()
        assert [v.level for v in fleet_health(store.reads())] == [Level.ok]
        store.add_run(RunSubmission.model_validate_json(json.dumps(duty[1])))  # the same GPU, slowed
        store.settle()
        assert [v.level for v in fleet_health(store.reads())] == [Level.suspect]
        store.add_run(RunSubmission.model_validate_json(json.dumps(duty[0])))
        store.settle()
        slow = next(v for v in fleet_health(store.reads()) if v.level is not Level.ok)
    (h200,) = [b for b in bundled() if "H200" in b.name]
    bf16 = next(f for c in h200.cards if c.suite == "health" for f in c.figures if f.figure == "matmul_bf16")
    said = f"baseline ({bf16.value:,.0f}, {bf16.gpus} GPU{'s' if bf16.gpus != 1 else ''}, {bf16.runs} runs, 2026-12)"
    assert slow.level is Level.slow and said in slow.reasons[0]

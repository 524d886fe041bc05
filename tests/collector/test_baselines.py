"""Baselines between real collectors: a fleet's healthy runs exported over HTTP and by the CLI, imported into a fresh
collector that then judges a lone GPU from its first run; tampered and newer bundles refused with nothing stored;
the thresholds of a one-GPU and a many-GPU baseline; software differences named; SuperBench and AzNHC exports
evaluated as those tools evaluate them, against flopfleet's own verdict."""

from __future__ import annotations

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

from agent.check import judge_locally
from collector.baseline_formats import azure_nhc, superbench
from collector.store import Store
from collector.views import fleet_health
from schemas import RunSubmission
from schemas.baselines import BaselineIndex, bundled, card_key, parse_bundle
from schemas.verdicts import Level
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


def _superbench_flags(baseline: dict[str, float], rules: dict[str, Any], raw: dict[str, float]) -> set[str]:
    """SuperBench's ``variance`` rules as its analyzer evaluates them (docs/baselines.md): each raw metric matched by
    a rule's regex, its baseline found by name without ``:rank``, (value - baseline) / baseline against the rule's
    criteria; the metrics that violate it."""
    flagged = set()
    for rule in rules["superbench"]["rules"].values():
        if rule["function"] != "variance":
            continue
        bound = float(re.fullmatch(r"lambda x:x<(-[0-9.]+)", rule["criteria"]).group(1))  # type: ignore[union-attr]
        for metric, value in raw.items():
            if not any(re.search(pattern, metric) for pattern in rule["metrics"]):
                continue
            base = baseline.get(metric) or baseline[metric.rsplit(":", 1)[0]]
            if (value - base) / base < bound:
                flagged.add(metric.rsplit(":", 1)[0])
    return flagged


def test_the_superbench_export_flags_what_flopfleet_flags(tmp_path: Path, fleet_bundle: Any) -> None:
    bundle = parse_bundle(json.dumps(fleet_bundle[1]))
    files = superbench(bundle)
    slug = "NVIDIA_H100_80GB_HBM3_80_GiB_700_W"
    baseline = json.loads(files[f"{slug}.baseline.json"])
    rules = yaml.safe_load(files[f"{slug}.rules.yaml"])
    assert set(baseline) == {"cublaslt-gemm/bf16_0_8192_8192_8192_flops", "mem-bw/h2d_bw", "mem-bw/d2h_bw"}
    assert all(isinstance(v, float) for v in baseline.values())
    index = BaselineIndex([(bundle, "file")])
    sb_names = {"matmul_bf16": "cublaslt-gemm/bf16_0_8192_8192_8192_flops", "h2d": "mem-bw/h2d_bw"}
    for scale in (0.97, 0.95, 0.90, 0.85):
        run = RunSubmission.model_validate_json(_run("z", 30, scale, seed=11))
        (v,) = judge_locally([run], index)
        ours = {sb_names[f.figure] for f in v.figures if f.figure in sb_names and f.level is not Level.ok}
        raw = {name + ":0": next(f.value for f in v.figures if f.figure == key) for key, name in sb_names.items()}
        assert _superbench_flags(baseline, rules, raw) == ours, scale


def test_the_azure_nhc_floor_fails_what_flopfleet_fails(fleet_bundle: Any) -> None:
    bundle = parse_bundle(json.dumps(fleet_bundle[1]))
    (text,) = azure_nhc(bundle).values()
    (line,) = [x for x in text.splitlines() if not x.startswith("#")]
    floor = float(re.fullmatch(r" \* \|\| check_gpu_bw ([0-9.]+)", line).group(1))  # type: ignore[union-attr]
    index = BaselineIndex([(bundle, "file")])
    for scale in (0.99, 0.85):
        run = RunSubmission.model_validate_json(_run("w", 40, scale, seed=12))
        (v,) = judge_locally([run], index)
        h2d = next(f for f in v.figures if f.figure == "h2d")
        # AzNHC: a GPU below the floor fails (NHC2020); flopfleet: below its baseline threshold
        assert (h2d.value < floor) == (h2d.level is not Level.ok), scale


def test_the_bundled_h200_baseline_judges_a_healthy_lone_h200(tmp_path: Path) -> None:
    (h200,) = [b for b in bundled() if "H200" in b.name]
    assert {c.suite for c in h200.cards} == {"health", "standard"}
    health = next(c for c in h200.cards if c.suite == "health")
    assert {f.figure for f in health.figures} >= {"matmul_bf16", "memory", "h2d", "bert_fwdbwd"}
    assert all(f.gpus == 1 for f in health.figures)  # the lent machines, counted as one GPU
    lent = {"memory_gib": 0, "memory_bytes": 150754820096, "power_limit_w": 700.0, "power_limit_default_w": 700.0}
    values = {f.figure: f.value for f in health.figures}
    results = [
        matmul(8192, "bf16", values["matmul_bf16"] * 0.99),
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


def test_the_bundled_baseline_is_what_the_projects_h200_measurements_give() -> None:
    # scripts/bundle_baselines.py rebuilds it from docs/results/h200/ through the store and the export's builder
    import importlib.util

    spec = importlib.util.spec_from_file_location("bundle_baselines", ROOT / "scripts" / "bundle_baselines.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.bundle_text() == script.OUTPUT.read_text()


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
    assert "85% of baseline" in gpu_page
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
        assert not BaselineIndex((b, o) for b, o in _stored(store)).cards() - {"NVIDIA H200 140 GiB · 700 W"}


def _stored(store: Store) -> list[tuple[Any, str]]:
    from collector.baselines import load_all

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
    duty = json.loads((folder / "duty-runs.json").read_text())["0.6"]  # newest first: re-measurement, then profile
    with Store(tmp_path / "h200.duckdb") as store:
        store.add_run(RunSubmission.model_validate_json((folder / "health-1.json").read_text()))
        store.settle()
        assert [v.level for v in fleet_health(store.reads())] == [Level.ok]
        store.add_run(RunSubmission.model_validate_json(json.dumps(duty[1])))  # the same GPU, slowed
        store.settle()
        assert [v.level for v in fleet_health(store.reads())] == [Level.suspect]
        store.add_run(RunSubmission.model_validate_json(json.dumps(duty[0])))
        store.settle()
        slow = next(v for v in fleet_health(store.reads()) if v.level is not Level.ok)
    assert slow.level is Level.slow and "baseline (689, 1 GPU, 42 runs, 2026-12)" in slow.reasons[0]

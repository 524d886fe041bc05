"""The bundled H200 baseline counts GPUs by UUID (scripts/bundle_baselines.py) and is validated by leaving each GPU
out (benchmarks/baseline_leave_one_out.py), both on the CPU from the runs committed under docs/results/h200/."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import uuid
from functools import cache
from pathlib import Path

from collector.analysis.baselines import Measurement, build
from schemas import RunSubmission
from schemas.baselines import bundled
from schemas.health_figures import LOADED_HOST_WAIT
from schemas.labels import PER_WATT_SUFFIX
from scripts.bundle_baselines import (
    SHIPPED,
    committed,
    health_products_only,
    left_out,
    measured,
    without_power,
)
from scripts.results_files import read, read_text
from tests.conftest import ROOT

RESULTS = ROOT / "docs" / "results" / "h200"


def _copy(name: str, folder: Path, *, gpu_uuid: str | bool | None = False) -> None:
    """A committed run file into ``folder``; with ``gpu_uuid`` given, as another run whose GPU has that UUID."""
    data = read(RESULTS / name)
    if gpu_uuid is not False:
        data["run_id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{name}-{gpu_uuid}"))
        data["gpus"][0]["uuid"] = gpu_uuid
    target = folder / f"{len(list(folder.iterdir()))}.json"
    target.write_text(json.dumps(data))


def test_the_bundle_counts_each_gpu_once_by_its_uuid_and_leaves_out_a_run_without_one(tmp_path: Path) -> None:
    for name in ("standard1.json", "standard2.json", "third-lease/run-20261129T151758.json"):
        _copy(name, tmp_path)  # two GPUs: f1378432 twice, 466187dd once
    _copy("isolation/standard-process1.json", tmp_path, gpu_uuid=None)  # 2427eed8's run, its UUID taken away
    loaded = read_text(RESULTS / "busy-host" / "loaded.json")  # a loaded host: a starved window
    (tmp_path / "loaded.json").write_text(loaded)
    runs = committed(tmp_path)
    why = {c.run.gpus[0].uuid: left_out(c.run) for c in runs}
    assert why[None] == "a GPU without a UUID cannot be counted once"
    assert why["GPU-c43ff95e-ffc3-7e23-e070-50c4487d06fe"] == "measured on a loaded host (a window flagged starved)"
    (card,), refused = build(measured(tmp_path))
    assert not refused and card.suite == "standard"
    memory = next(f for f in card.figures if f.figure == "memory")
    assert (memory.gpus, memory.runs) == (2, 3) and memory.between_gpus is not None


@cache
def _measured() -> tuple[Measurement, ...]:
    """The committed runs' healthy measurements, read once for this file's tests (each reading takes seconds)."""
    return tuple(measured())


def _gpus_and_runs(suite: str) -> tuple[int, int]:
    """How many GPUs and runs the committed healthy runs of ``suite`` hold (their memory figure)."""
    found = [m for m in _measured() if m.suite == suite and m.figure == "memory"]
    return len({m.device for m in found}), len(found)


def test_the_bundled_h200_baseline_stands_on_every_gpu_with_a_healthy_run() -> None:
    (h200,) = [b for b in bundled() if b.name.startswith("flopfleet H200")]
    health, standard = (next(c for c in h200.cards if c.suite == s) for s in ("health", "standard"))
    # Each GPU once, every healthy run of it (the checks of 2026-12-01 were kept as figures without a UUID, and are
    # not used): the bundle is what the committed runs say, and each suite stands on several GPUs.
    gpus, runs = _gpus_and_runs("standard")
    assert gpus >= 9
    assert {f.gpus for f in standard.figures if f.figure in ("matmul_bf16", "memory", "h2d", "bert_fwdbwd")} == {gpus}
    gpus, runs = _gpus_and_runs("health")
    assert gpus >= 2
    figures = [f for f in health.figures if not f.figure.endswith(PER_WATT_SUFFIX)]
    # fp32 at 4096^3 joined the profile on 2026-12-04 (full-clock/): its figures stand on the GPUs measured since
    fp32 = {f.figure for f in figures if f.figure.startswith("matmul_fp32")}
    assert {(f.gpus, f.runs) for f in figures if f.figure not in fp32} == {(gpus, runs)}
    assert fp32 == {"matmul_fp32", "matmul_fp32_4096"}
    assert all(3 <= f.gpus < gpus and f.runs < runs for f in figures if f.figure in fp32)
    # and per watt, from the GPUs whose runs read the board's power (agent/machine/energy.py)
    assert {"matmul_bf16_per_w", "memory_per_w", "bert_fwdbwd_per_w"} <= {f.figure for f in health.figures}
    assert "each counted once by its UUID" in (h200.source.description or "")


def test_leaving_each_gpu_out_raises_no_false_alarm() -> None:
    done = subprocess.run([sys.executable, "benchmarks/baseline_leave_one_out.py"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"false alarms: (\d+) of (\d+) first runs .*; (\d+) of (\d+) checks kept without a UUID",
                      done.stdout)  # fmt: skip
    assert found is not None, done.stdout
    standard, _ = _gpus_and_runs("standard")
    health, _ = _gpus_and_runs("health")
    assert found.groups() == ("0", str(standard + health), "0", "6")
    every = re.search(r"every healthy run, each judged as a first check: (\d+) false alarms of (\d+)", done.stdout)
    assert every is not None and every[1] == "0" and int(every[2]) > standard + health, done.stdout
    # every standard first run was judged against the other GPUs' baseline, at 3 % for fp32 at 4096, memory and BERT
    rows = [line for line in done.stdout.splitlines() if re.match(r"[0-9a-f]{8} standard ", line)]
    assert len(rows) == standard
    assert all(f" {standard - 1} ok " in row and row.count("/ 3%") == 3 for row in rows)


def test_power_counted_by_an_earlier_rule_and_runs_beside_the_relay_stay_out_of_the_bundle() -> None:
    # The committed runs of 2026-12-03: cold/ (21:47) read power by a rule that put power-capped products at
    # 370-390 W; per-watt-3/ (22:12) by the rule that stands; relay/relay*.json had a third measuring process.
    runs = {c.path: c.run for c in committed()}
    early, kept = runs["cold/cold2.json"], runs["per-watt-3/v2.json"]
    assert any(r.timing and r.timing.power_w for r in early.results)  # it did read power...
    assert not any(r.timing and r.timing.power_w for r in without_power(early).results)  # ...which is dropped
    assert without_power(kept) == kept and any(r.timing and r.timing.power_w for r in kept.results)
    assert without_power(early).results[0].metrics == early.results[0].metrics  # its figures still count
    assert left_out(runs["relay/relay1.json"]) is not None and "relay" in (left_out(runs["relay/relay2.json"]) or "")
    assert left_out(runs["relay/off2.json"]) is None


def test_a_run_whose_windows_waited_for_a_cpu_stays_out_of_the_export_flagged_or_not(tmp_path: Path) -> None:
    # The H100's BERT layers alone, quiet then beside 24 busy processes (docs/results/h100.md, call 25): the loaded
    # runs carry no starved flag, yet their short cells read up to 13.5 % slow. The export keeps the quiet ones only.
    folder = SHIPPED["h100"].results / "call25-starved-layers"
    for i in (1, 2, 3):
        for when in ("quiet", "loaded"):
            (tmp_path / f"{when}-{i}.json").write_text(read_text(folder / f"layers-{when}-{i}.json"))
    runs = committed(tmp_path)
    loaded = [c.run for c in runs if c.path.startswith("loaded")]
    assert len(loaded) == 3 and not any("starved" in r.flags for run in loaded for r in run.results)
    assert all(left_out(c.run) is None for c in runs)  # nothing names them: the export's own rule decides
    waits = [statistics.median(r.timing.host_wait for r in run.results if r.timing and r.timing.host_wait is not None)
             for run in loaded]  # fmt: skip
    assert min(waits) >= LOADED_HOST_WAIT
    (card,), _ = build(measured(tmp_path))
    assert {f.runs for f in card.figures} == {3}, card.figures  # the three quiet runs, each figure once a run


def _products(runs: list[RunSubmission]) -> set[tuple[str, int | None]]:
    return {
        (r.params.dtype, getattr(r.params, "n", None)) for run in runs for r in run.results if r.benchmark == "matmul"
    }  # type: ignore[union-attr]


def test_a_health_run_goes_in_with_the_products_the_health_profile_measures_only() -> None:
    # full-clock/call1 (2026-12-04) measured bf16 at 2048^3 beside 8192^3; the best-bf16 figure would take it.
    calls = [c.run for c in committed() if c.path.startswith("full-clock/call1-") and not left_out(c.run)]
    assert ("bf16", 2048) in _products(calls)
    trimmed = [health_products_only(run) for run in calls]
    assert _products(trimmed) == {("bf16", 8192)}
    small = [
        sum(r.benchmark == "matmul" and getattr(r.params, "n", None) == 2048 for r in run.results) for run in calls
    ]
    assert [len(run.results) - len(t.results) for t, run in zip(trimmed, calls, strict=True)] == small  # only those
    standard = next(c.run for c in committed() if c.path == "per-watt-3/v2.json")
    assert health_products_only(standard) is standard  # the standard suite's products are all its own

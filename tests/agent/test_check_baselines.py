"""``flopfleet-agent check`` without a collector, judged against a baseline from its first run: the H200's own
recorded checks (docs/results/h200/baseline/) against the bundled H200 baseline, against a bundle given with
``--baseline`` instead, and against a bundle without its card, where the floor remains and the verdict says so.
``check`` runs whole; only its ``measure`` seam hands it the recorded runs in place of measuring."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest

from agent.errors import ConfigError
from agent.run.check import CheckConfig, CheckOutcome, baselines_for, check
from agent.run.config import RunConfig, UploadConfig
from schemas import RunSubmission
from schemas.baselines import BaselineBundle, BaselineFigure, BaselineSource, CardBaseline, bundled, dump_bundle, seal
from schemas.verdicts import Level
from scripts.results_files import read, read_text
from tests.conftest import ROOT

FOLDER = ROOT / "docs" / "results" / "h200" / "baseline"
H200_CARD = "NVIDIA H200 140 GiB · 700 W"


def _recorded(name: str) -> RunSubmission:
    return RunSubmission.model_validate_json(read_text(FOLDER / name))


def _slowed() -> list[RunSubmission]:
    """The H200 with a competing process at 60 % duty: its profile, then check's re-measurement of what failed."""
    remeasure, profile = read(FOLDER / "duty-runs.json")["0.6"]  # newest first
    return [RunSubmission.model_validate_json(json.dumps(run)) for run in (profile, remeasure)]


def _check(runs: Sequence[RunSubmission], baseline: Path | None, tmp: Path) -> tuple[CheckOutcome, list[RunConfig]]:
    """``check`` on a GPU machine with no collector, as the CLI builds it (``baselines_for``); each measurement is
    the next recorded run. Returns the outcome and what check asked to measure."""
    queue, asked = list(runs), list[RunConfig]()

    def measure(run: RunConfig) -> RunSubmission:
        asked.append(run)
        return queue.pop(0)

    config = CheckConfig(
        run=RunConfig(suite="health", device="cuda", upload=UploadConfig(spool_dir=tmp / "spool")),
        baselines=baselines_for(baseline),
    )
    with httpx.Client() as client:
        return check(config, client, measure, lambda: ()), asked


def _health_gpus() -> int:
    """How many GPUs the bundled H200 health baseline stands on."""
    return max(f.gpus for c in _h200().cards if c.suite == "health" for f in c.figures)


def _h200() -> BaselineBundle:
    """The bundled H200 baseline (flopfleet ships one bundle per card it measured)."""
    (h200,) = [b for b in bundled() if any(c.card == H200_CARD for c in b.cards)]
    return h200


def test_a_healthy_h200_is_ok_on_its_first_check_against_the_bundled_baseline(tmp_path: Path) -> None:
    outcome, asked = _check([_recorded("health-1.json")], None, tmp_path)
    (v,) = outcome.verdicts
    assert (outcome.level, outcome.exit_code, len(asked)) == (Level.ok, 0, 1)
    h200 = _h200()
    gpus = _health_gpus()
    assert v.baseline is not None and f"'{h200.name}' (bundled, {h200.id}): {gpus} GPU" in v.baseline
    # From the spread between the bundle's GPUs (widened for their few), never looser than SuperBench's 10 %.
    assert all(f.baseline and f.baseline_threshold is not None and f.baseline_threshold <= 0.10 for f in v.figures)


def test_a_slowed_h200_is_caught_and_confirmed_on_its_first_check(tmp_path: Path) -> None:
    outcome, asked = _check(_slowed(), None, tmp_path)
    (v,) = outcome.verdicts
    assert (outcome.level, outcome.exit_code) == (Level.slow, 2)
    assert [a.only for a in asked] == [(), ("bandwidth", "layer_bert_torch", "matmul")]  # re-measured what failed
    assert asked[1].tags["check"] == "remeasure"
    memory = next(r for r in v.reasons if r.startswith("memory"))
    assert f"below the {H200_CARD} baseline (" in memory and f"{_health_gpus()} GPU" in memory
    assert "in 2 of its last 2" in memory


def test_check_baseline_file_takes_the_place_of_the_bundled_ones(tmp_path: Path) -> None:
    copy = tmp_path / "h200.baseline.json"
    shutil.copy(ROOT / "schemas" / "data" / "h200.baseline.json", copy)
    outcome, _ = _check(_slowed(), copy, tmp_path)
    assert outcome.level is Level.slow and "(file, " in (outcome.verdicts[0].baseline or "")
    source = BaselineSource(collector="lab", exported_at=datetime(2026, 12, 1, tzinfo=timezone.utc))

    def bundle_of(name: str, gpu_name: str, card: str, memory: float) -> Path:
        figure = BaselineFigure(figure="memory", unit="GB/s", value=memory, gpus=5, runs=20)
        only = CardBaseline(card=card, gpu_name=gpu_name, kind="measured", suite="health", figures=(figure,))
        path = tmp_path / f"{name}.baseline.json"
        path.write_text(dump_bundle(seal(name, source, [only])))
        return path

    # A bundle of a sibling card only (the H100: Hopper, 700 W): the H200's memory is held against the H100's share
    # of its datasheet bandwidth (3,000 of 3,350 GB/s) times the H200's 4,800, and the GPU 30-40 % slow is caught.
    h100 = bundle_of("lab-h100", "NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3 80 GiB · 700 W", 3000.0)
    outcome, asked = _check(_slowed(), h100, tmp_path)
    (v,) = outcome.verdicts
    assert outcome.level is Level.slow and v.baseline is not None and "held against its sibling cards" in v.baseline
    memory = next(f for f in v.figures if f.figure == "memory")
    assert memory.baseline_kind == "sibling" and memory.baseline == pytest.approx(3000.0 / 3350 * 4800)
    assert memory.held_to == "sibling" and memory.level is Level.slow
    assert all(f.baseline is None and f.floor for f in v.figures if f.figure != "memory")  # no sibling figure
    # A bundle of another architecture (the A100): no sibling, its floor remains (35-55 % of the datasheet), which a
    # GPU 30-40 % slow passes, and the verdict says why.
    a100 = bundle_of("lab-a100", "NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB 80 GiB · 700 W", 1800.0)
    outcome, asked = _check(_slowed(), a100, tmp_path)
    (v,) = outcome.verdicts
    assert (outcome.level, len(asked)) == (Level.ok, 1)
    assert v.baseline == (f"no baseline of the health suite for {H200_CARD}, nor a measured sibling card of its "
                          "architecture at its power limit: held against its model's floor")  # fmt: skip
    assert all(f.baseline is None and f.floor and f.held_to == "floor" for f in v.figures)


def test_an_unreadable_baseline_file_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--baseline .*missing\.json"):
        baselines_for(tmp_path / "missing.json")

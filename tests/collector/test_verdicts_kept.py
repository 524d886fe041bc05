"""Verdicts kept between refreshes (``read.verdicts``, ``analysis.fleet_verdicts``): after every run a collector takes,
the verdicts it keeps say what judging the fleet anew says (levels, failing measurements, faults), with numbers
within the bound; a refresh judges again only the GPUs a run moved, and ``/metrics`` writes only their lines, the
same bytes as written anew. A fleet of real runs built by code in a real DuckDB file, read through the real read
path."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from collector.analysis.fleet_verdicts import DRIFT, NEAR
from collector.read.verdicts import KeptVerdicts
from collector.read.views import baseline_index, fleet_health, fleet_metrics
from collector.render.prometheus import GpuExposition
from collector.store import Store
from schemas import RunSubmission
from schemas.judgement import GpuJudgement
from schemas.verdicts import Level
from tests.factories import T0, bandwidth, gpu, layer, make_run, matmul, transfer

#: (GPU name, memory GiB, figures): an H200 (a bundled baseline beside its peers) and an A100 (peers and its floor).
MODELS = {
    "NVIDIA H200": (140, {"matmul_bf16": 690.0, "memory": 4250.0, "h2d": 55.0, "bert_fwdbwd": 466.0}),
    "NVIDIA A100-SXM4-80GB": (80, {"matmul_bf16": 280.0, "memory": 1750.0, "h2d": 25.0, "bert_fwdbwd": 190.0}),
}
HOSTS = {f"{model.split()[1][:4].lower()}{h}": model for model in MODELS for h in range(4)}
GPUS = 8


def _run(host: str, hour: int, figures: dict[int, dict[str, float]], **fields: dict[str, Any]) -> RunSubmission:
    """One health run of an 8-GPU machine, each GPU with its figures."""
    model = HOSTS[host]
    memory, _ = MODELS[model]
    results = []
    for index, v in figures.items():
        made = [matmul(8192, "bf16", v["matmul_bf16"]), bandwidth(1 << 28, v["memory"]), transfer("h2d", v["h2d"]),
                layer("bert_layer", "fwd+bwd", 64, 512, v["bert_fwdbwd"])]  # fmt: skip
        results += [{**r, "gpu_index": index} for r in made]
    gpus = [gpu(model, index=i, memory_gib=memory, host=host, **fields.get(str(i), {})) for i in figures]
    return make_run(results, gpus=gpus, hostname=host, suite="health", started=T0 + timedelta(hours=hour),
                    run_id=str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{host}-{hour}")))  # fmt: skip


def _figures(host: str, rng: random.Random | None, scale: dict[int, dict[str, float]] | None = None) -> dict:
    """Each GPU's figures: the model's, a few percent off at random (``rng``), times ``scale``."""
    base = MODELS[HOSTS[host]][1]
    out = {}
    for i in range(GPUS):
        own = (scale or {}).get(i, {})
        out[i] = {k: v * (1 + (rng.uniform(-0.015, 0.015) if rng else 0.0)) * own.get(k, 1.0) for k, v in base.items()}
    return out


def _by_device(verdicts: list[GpuJudgement]) -> dict[str, GpuJudgement]:
    return {v.device: v for v in verdicts}


def _same(kept: GpuJudgement, anew: GpuJudgement, within: float) -> bool:
    """Whether a kept verdict says what one judged anew says: level, faults, each figure's level, value, failing
    measurements and references; the moving references' numbers within ``within``. True where any number differs."""
    assert (kept.level, kept.faults, kept.figures.keys()) == (anew.level, anew.faults, anew.figures.keys()), kept.device
    assert kept.causes == anew.causes and kept.baseline == anew.baseline
    moved = False
    for key, f in kept.figures.items():
        g = anew.figures[key]
        assert (f.level, f.value, f.failing, f.window) == (g.level, g.value, g.failing, g.window), (kept.device, key)
        assert [r.name for r in f.references] == [r.name for r in g.references]
        assert f.threshold == pytest.approx(g.threshold, abs=within)
        for r, s in zip(f.references, g.references, strict=True):
            assert (r.count, r.margin if r.name not in ("peers", "history") else 0) == (
                s.count, s.margin if s.name not in ("peers", "history") else 0)  # fmt: skip
            assert r.value == pytest.approx(s.value, rel=within) and r.line == pytest.approx(s.line, rel=within)
            moved |= r.value != s.value or r.margin != s.margin
    return moved


def test_kept_verdicts_say_what_judging_the_fleet_anew_says_after_every_run(tmp_path: Path) -> None:
    # Two models of 32 GPUs, four runs each; then a run at a time, a few percent off at random, while one GPU loses
    # 1.5 % of its matmul a run (suspect, then slow), another reports an uncorrectable ECC error and a third host
    # moves to another torch. The collector's own verdicts (its default DRIFT) and a judge kept with a wide bound
    # (so that it keeps verdicts whose model moved) are held to a judgement of the fleet anew after every run.
    rng = random.Random(6)
    wide = 0.005
    with Store(tmp_path / "f.duckdb") as store:
        for hour in range(4):
            for host in HOSTS:
                store.add_run(_run(host, hour, _figures(host, rng)))
        store.settle()
        index = baseline_index(store.reads())
        loose = KeptVerdicts(index, drift=wide)
        loose.follow(store.reads())
        kept_while_moved = judged_fewer = 0
        for step in range(24):
            host = {23: "a1001", 16: "h2002"}.get(step, "h2000" if step % 3 == 0 else rng.choice(list(HOSTS)))
            scale = {3: {"matmul_bf16": 1 - 0.015 * step}} if host == "h2000" else {}
            fields = {"5": {"counters_after": {"ecc_uncorrected_volatile": 1}}} if step == 23 else {}
            torch = "2.12.0" if host == "h2002" and step >= 16 else "2.11.0"
            store.add_run(_run(host, 4 + step, _figures(host, rng, scale), torch=torch, **fields))
            store.settle()
            reads = store.reads()
            fresh = KeptVerdicts(index)
            fresh.follow(reads)
            anew = _by_device(fresh.verdicts())
            loose.follow(reads)
            collector = _by_device(fleet_health(reads))
            assert collector.keys() == anew.keys() == _by_device(loose.verdicts()).keys()
            for device, v in anew.items():
                _same(collector[device], v, NEAR * DRIFT)
                kept_while_moved += _same(_by_device(loose.verdicts())[device], v, NEAR * wide)
            judged_fewer += loose.judge.judged < len(anew)
        levels = {v.device: v.level.value for v in fleet_health(store.reads())}
        assert {"slow", "faulty"} <= set(levels.values())  # the degrading GPU was caught; the ECC error is a fault
    assert kept_while_moved and judged_fewer  # the wide judge kept verdicts its model had moved under


def test_a_refresh_judges_again_only_the_gpus_a_run_moved_and_metrics_writes_only_theirs(tmp_path: Path) -> None:
    # Every GPU steady at its own figures: a new run of one machine, the same figures, moves no other GPU's inputs.
    steady = {host: _figures(host, random.Random(host)) for host in HOSTS}
    with Store(tmp_path / "f.duckdb") as store:
        for hour in range(5):
            for host in HOSTS:
                store.add_run(_run(host, hour, steady[host]))
        store.settle()
        lines = GpuExposition()
        before = _by_device(fleet_health(store.reads()))
        lines.render(fleet_metrics(store.reads()))
        store.add_run(_run("h2001", 5, steady["h2001"]))
        store.settle()
        after = _by_device(fleet_health(store.reads()))
        again = {d for d in after if after[d] is not before[d]}
        assert again == {v.device for v in after.values() if v.hostname == "h2001"} and len(again) == GPUS
        body = lines.render(fleet_metrics(store.reads()))
        assert lines.written == GPUS and body == GpuExposition().render(fleet_metrics(store.reads()))
        # One GPU of that machine 30 % slower: judged again, and its model's GPUs whose peers' median it moved.
        store.add_run(_run("h2001", 6, {**steady["h2001"], 2: {**steady["h2001"][2], "matmul_bf16": 480.0}}))
        store.settle()
        last = _by_device(fleet_health(store.reads()))
        slow = next(d for d in again if after[d].gpu_index == 2)
        assert last[slow].level is Level.suspect
        assert all(last[d] is after[d] for d in last if last[d].gpu_model != after[slow].gpu_model)  # the A100s
        assert lines.render(fleet_metrics(store.reads())) == GpuExposition().render(fleet_metrics(store.reads()))

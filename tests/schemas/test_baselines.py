"""The baseline bundle as a contract: sealed and checked, refused when changed, newer or of other figures; the
threshold rule; which baseline a card gets."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone

import pytest

from schemas.baselines import (
    DEFAULT_BASELINE_THRESHOLD,
    FIGURES_VERSION,
    BaselineError,
    BaselineFigure,
    BaselineIndex,
    BaselineSource,
    CardBaseline,
    baseline_threshold,
    bundled,
    dump_bundle,
    parse_bundle,
    release,
    seal,
    spread_widening,
)
from schemas.verdicts import MAX_THRESHOLD, SPREAD_SIGMAS, baseline_margin, minimum_threshold

CARD = "NVIDIA H100 80GB HBM3 80 GiB · 700 W"
SOURCE = BaselineSource(collector="lab", exported_at=datetime(2026, 12, 1, tzinfo=timezone.utc))


def _figure(value: float = 3000.0, gpus: int = 5, between: float | None = 0.004, within: float | None = 0.002,
            last: date = date(2026, 11, 30)) -> BaselineFigure:  # fmt: skip
    return BaselineFigure(figure="memory", unit="GB/s", value=value, between_gpus=between, within_gpu=within,
                          gpus=gpus, runs=4 * gpus, first=date(2026, 11, 1), last=last)  # fmt: skip


def _card(*figures: BaselineFigure, card: str = CARD, suite: str = "health") -> CardBaseline:
    return CardBaseline(card=card, gpu_name="NVIDIA H100 80GB HBM3", kind="measured", suite=suite, figures=figures)


def _threshold(f: BaselineFigure) -> float:
    return baseline_threshold(f, minimum=0.03, maximum=MAX_THRESHOLD, sigmas=SPREAD_SIGMAS)


def test_a_sealed_bundle_round_trips_through_its_file_and_any_change_is_caught() -> None:
    bundle = seal("lab", SOURCE, [_card(_figure())])
    text = dump_bundle(bundle)
    assert parse_bundle(text) == bundle and len(bundle.id) == 12
    data = json.loads(text)
    assert parse_bundle(json.dumps(data, indent=4, sort_keys=True)) == bundle  # spacing and key order do not matter
    for change in (("name", "lab-b"), ("figures_version", FIGURES_VERSION + 1)):
        with pytest.raises(BaselineError, match="does not match its sha256"):
            parse_bundle(json.dumps({**data, change[0]: change[1]}))
    data["cards"][0]["figures"][0]["value"] = 3001.0
    with pytest.raises(BaselineError, match="changed after export"):
        parse_bundle(json.dumps(data))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not JSON"),
        ('{"format": "something-else"}', "'format' must be 'flopfleet-baseline'"),
        ('{"format": "flopfleet-baseline", "schema_version": 2}', "schema_version 2 is not one this version reads"),
        ('{"format": "flopfleet-baseline", "schema_version": 1, "name": "x"}', "field source"),
    ],
)
def test_what_is_not_a_usable_bundle_is_refused_saying_why(text: str, message: str) -> None:
    with pytest.raises(BaselineError, match=message):
        parse_bundle(text)


def test_a_field_out_of_range_is_named() -> None:
    data = json.loads(dump_bundle(seal("lab", SOURCE, [_card(_figure())])))
    data["cards"][0]["figures"][0]["value"] = -1
    with pytest.raises(BaselineError, match=r"cards\.0\.figures\.0\.value"):
        parse_bundle(json.dumps(data))


def test_the_threshold_follows_the_spread_and_is_widened_for_few_gpus() -> None:
    assert _threshold(_figure(gpus=1, between=None, within=0.001)) == DEFAULT_BASELINE_THRESHOLD  # SuperBench's 10 %
    assert _threshold(_figure(gpus=1, between=None, within=0.05)) == pytest.approx(3 * 1.4826 * 0.05)  # noisy: wider
    tight = [_threshold(_figure(gpus=n, between=0.004, within=0.002)) for n in (2, 3, 5, 10, 30, 100)]
    assert tight == sorted(tight, reverse=True)  # more GPUs, a better-known spread, a tighter threshold
    assert tight[0] == DEFAULT_BASELINE_THRESHOLD and tight[-1] == 0.03  # never past the default, nor under 3 %
    wide = _threshold(_figure(gpus=50, between=0.04, within=0.01))
    assert wide == pytest.approx(3 * 1.4826 * (0.04**2 + 0.01**2) ** 0.5)  # the spread itself: past the default
    assert wide > DEFAULT_BASELINE_THRESHOLD  # a model whose GPUs differ that much gets no false alarms
    assert spread_widening(2) == pytest.approx(7.96, abs=0.01) and spread_widening(100) == pytest.approx(1.10, abs=0.01)


def test_against_a_baseline_a_figure_keeps_its_least_threshold() -> None:
    # Tight spreads on many GPUs: memory at the rule's 3 %, h2d at its own 10 % (its dips), bf16 matmul at its own
    # 8 % (one GPU's readings at the power limit), as against its peers and history; a wider spread widens them.
    tight = {key: baseline_margin(_figure(gpus=100).model_copy(update={"figure": key}))
             for key in ("memory", "h2d", "matmul_bf16", "matmul_fp32_4096")}  # fmt: skip
    assert tight == {key: minimum_threshold(key) for key in tight}
    assert tight == {"memory": 0.03, "h2d": 0.10, "matmul_bf16": 0.08, "matmul_fp32_4096": 0.03}
    wide = _figure(gpus=100, between=0.03, within=0.01).model_copy(update={"figure": "matmul_bf16"})
    assert baseline_margin(wide) == pytest.approx(_threshold(wide)) and baseline_margin(wide) > 0.08


def test_a_card_gets_the_baseline_of_the_most_gpus_and_of_its_own_suite() -> None:
    few = seal("few", SOURCE, [_card(_figure(3000.0, gpus=2))])
    many = seal("many", SOURCE, [_card(_figure(2900.0, gpus=40))])
    index = BaselineIndex([(few, "file"), (many, "bundled")])
    entry, at_default = index.lookup(CARD, None, "memory", "health")
    assert entry is not None and entry.bundle == "many" and not at_default
    assert index.lookup(CARD, None, "memory", "standard") == (None, False)  # the standard suite's figure differs
    capped = CARD.replace("700 W", "400 W")
    entry, at_default = index.lookup(capped, CARD, "memory", "health")
    assert entry is not None and at_default
    assert "40 GPUs, 160 runs, 2026-11" in entry.description


def test_published_and_other_figure_versions_are_kept_out_of_verdicts() -> None:
    published = seal("paper", SOURCE, [CardBaseline(card="A100", kind="published", figures=(_figure(),))])
    other = seal("old", SOURCE, [_card(_figure())], figures_version=FIGURES_VERSION + 1)
    assert not BaselineIndex([(published, "imported"), (other, "imported")])


def test_release_lines() -> None:
    assert release("torch", "2.11.0+cu130") == "2.11" and release("driver", "580.159.04") == "580"
    assert release("cuda", "13.0") == "13.0" and release("transformers", None) is None


def test_the_bundled_baselines_load_and_say_what_they_stand_on() -> None:
    shipped = {b.name: b for b in bundled()}
    assert set(shipped) == {"flopfleet H200 (lent, 2026-11/12)", "flopfleet H100 (lent, 2026-12)"}
    for bundle in shipped.values():
        assert bundle.source.collector and "each counted once by its UUID" in (bundle.source.description or "")
    assert {c.card for c in shipped["flopfleet H200 (lent, 2026-11/12)"].cards} == {"NVIDIA H200 140 GiB · 700 W"}
    assert {c.card for c in shipped["flopfleet H100 (lent, 2026-12)"].cards} == {"NVIDIA H100 80GB HBM3 79 GiB · 700 W"}


def test_the_published_baseline_schema_is_generated_from_the_model() -> None:
    from schemas.jsonschema import BASELINE_SCHEMA_FILE, render_baseline_schema

    assert BASELINE_SCHEMA_FILE.read_text(encoding="utf-8") == render_baseline_schema(), "run `make schema`"
    schema = json.loads(BASELINE_SCHEMA_FILE.read_text(encoding="utf-8"))
    assert {"format", "schema_version", "figures_version", "cards", "sha256"} <= set(schema["properties"])

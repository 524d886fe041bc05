"""Baselines: what a card model delivers, per figure, so that a GPU can be judged from its first run.

A baseline of a card (a GPU model with its memory size and power limit, as the collector keys cards) holds, for each
figure, the median over GPUs of each GPU's healthy median, the spread between GPUs and within a GPU run to run
(relative MADs), how many GPUs and runs it stands on, when they were measured and with which software. It is
either ``measured`` (exported from a fleet's healthy runs) or ``published`` (a table from a paper or README: no
spread, no GPU count), one concept for both. A ``BaselineBundle`` is the file fleets hand to each other: it says
where it came from and carries a SHA-256 of its content, checked on every import (``parse_bundle``).

Verdicts (``schemas.verdicts``) hold a GPU against the baseline of its card chosen here (``BaselineIndex``), with a
threshold from the baseline's own spread (``baseline_threshold``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache
from importlib import resources
from typing import Annotated, Literal

from pydantic import Field, ValidationError

from .base import Count, Label, Text, WireModel

#: The bundle layout this code reads and writes; a newer bundle is refused, not misread.
BASELINE_SCHEMA_VERSION = 1
#: What each figure key means (which results, which metric: collector/figures.py, whose health rows are
#: schemas.health_figures). A bundle made under other definitions is listed but never used for verdicts: its numbers
#: would be of something else.
#: 2: layer figures are of SDPA attention only (eager ones are figures of their own, ``*_eager``), LLM figures of
#: transformers' implementation only (the plain-torch path's are ``*_torch``).
FIGURES_VERSION = 2
FORMAT: Literal["flopfleet-baseline"] = "flopfleet-baseline"
#: Where bundled baselines live (package data of ``schemas``).
BUNDLED_PACKAGE = "schemas.data"

#: SuperBench's published default: a metric more than 10 % below its baseline is flagged. Used where a baseline has
#: no measured spread between GPUs (one GPU, or a published table).
DEFAULT_BASELINE_THRESHOLD = 0.10
#: The upper confidence level at which a spread measured over few GPUs is widened (``spread_widening``).
WIDEN_CONFIDENCE = 0.90
_Z_LOW = -1.2815515655446004  # the standard normal's 10 % quantile
#: chi-square's 10 % quantiles for 1 and 2 degrees of freedom, where Wilson-Hilferty's approximation is poor.
_CHI2_LOW = {1: 0.015790774, 2: 0.210721031}

Release = Annotated[str, Field(min_length=1, max_length=32)]
NonNegative = Annotated[float, Field(ge=0)]
RelativeSpread = Annotated[float, Field(ge=0, le=10)]


class BaselineError(ValueError):
    """A bundle that cannot be used: unreadable, tampered with, newer than this code, or of other figures."""


class BaselineSoftware(WireModel):
    """The release lines the baseline's runs were measured with: driver major, CUDA, torch and transformers
    major.minor (``release``)."""

    driver: tuple[Release, ...] = ()
    cuda: tuple[Release, ...] = ()
    torch: tuple[Release, ...] = ()
    transformers: tuple[Release, ...] = ()


class BaselineFigure(WireModel):
    figure: Label  # a figure key: collector/figures.py, the health figures of schemas.health_figures
    unit: Label
    value: NonNegative  # the median over GPUs of each GPU's median (a published figure: its value)
    low: NonNegative | None = None  # the lowest and highest GPU median
    high: NonNegative | None = None
    between_gpus: RelativeSpread | None = None  # MAD of the GPU medians over their median; None below 2 GPUs
    within_gpu: RelativeSpread | None = None  # the median over GPUs of each one's run-to-run MAD over its median
    gpus: Count = 0
    runs: Count = 0
    first: date | None = None
    last: date | None = None


class CardBaseline(WireModel):
    card: Label  # the collector's card: "NVIDIA H200 140 GiB · 700 W" (``card_key``)
    gpu_name: Label | None = None  # the driver's name, "NVIDIA H200"; None for a published column
    kind: Literal["measured", "published"]
    #: The suite whose runs it stands on ("health", "standard"). A figure is the best of the cells its suite
    #: measures (the standard suite's memory figure is the best of many sizes and ops, the health profile's of two
    #: cells), so a GPU is held against the baseline of the suite it ran. None for a published table.
    suite: Label | None = None
    figures: Annotated[tuple[BaselineFigure, ...], Field(max_length=256)]
    software: BaselineSoftware = BaselineSoftware()
    #: Published tables' datasheet facts (theory_fp16_tflops, memory_gb, bandwidth_gbps, price_usd, ...).
    facts: Annotated[dict[Label, NonNegative], Field(max_length=64)] = Field(default_factory=dict)
    note: Text | None = None


class BaselineSource(WireModel):
    collector: Label | None = None  # the collector (or lab) it was exported from
    exported_at: datetime
    #: How its runs were chosen: model, since, tags.
    filters: Annotated[dict[Label, Label], Field(max_length=32)] = Field(default_factory=dict)
    description: Text | None = None


class BaselineBundle(WireModel):
    format: Literal["flopfleet-baseline"] = FORMAT
    schema_version: Annotated[int, Field(ge=1)] = BASELINE_SCHEMA_VERSION
    figures_version: Annotated[int, Field(ge=1)] = FIGURES_VERSION
    name: Label
    source: BaselineSource
    cards: Annotated[tuple[CardBaseline, ...], Field(min_length=1, max_length=1024)]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]

    @property
    def id(self) -> str:
        """A short name for lists and commands: the hash's first 12 digits."""
        return self.sha256[:12]


def content_hash(document: dict[str, object]) -> str:
    """SHA-256 of a bundle's canonical JSON without its ``sha256`` (keys sorted, no spaces, UTF-8)."""
    body = {k: v for k, v in document.items() if k != "sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def seal(
    name: str, source: BaselineSource, cards: Sequence[CardBaseline], figures_version: int = FIGURES_VERSION
) -> BaselineBundle:
    """A bundle of ``cards`` with its content hash."""
    draft = {"format": FORMAT, "schema_version": BASELINE_SCHEMA_VERSION, "figures_version": figures_version,
             "name": name, "source": source.model_dump(mode="json"),
             "cards": [c.model_dump(mode="json") for c in cards]}  # fmt: skip
    return BaselineBundle.model_validate_json(json.dumps({**draft, "sha256": content_hash(draft)}))


def dump_bundle(bundle: BaselineBundle) -> str:
    """The bundle as a file: indented JSON, its hash unchanged (the hash is of the canonical form, not of the text)."""
    return json.dumps(bundle.model_dump(mode="json"), indent=1, ensure_ascii=False) + "\n"


def parse_bundle(data: bytes | str, *, expect_sha256: str | None = None) -> BaselineBundle:
    """A bundle from its file, checked: the format, a schema version this code reads, the fields, the content hash
    (and, given ``expect_sha256``, that it is the one expected). BaselineError says what is wrong."""
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BaselineError(f"not a baseline bundle: not JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise BaselineError(f"not a baseline bundle: 'format' must be {FORMAT!r}")
    version = document.get("schema_version")
    if not isinstance(version, int) or version > BASELINE_SCHEMA_VERSION or version < 1:
        raise BaselineError(
            f"baseline schema_version {version!r} is not one this version reads (1 to {BASELINE_SCHEMA_VERSION}): "
            "a newer flopfleet wrote it; upgrade to import it"
        )
    try:
        bundle = BaselineBundle.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top)"
        raise BaselineError(f"baseline bundle field {where}: {first['msg']}") from None
    actual = content_hash(document)
    if actual != bundle.sha256:
        raise BaselineError(
            f"baseline {bundle.name!r}: its content does not match its sha256 (stated {bundle.sha256[:12]}…, content "
            f"{actual[:12]}…): it was changed after export; nothing was imported"
        )
    if expect_sha256 is not None and not bundle.sha256.startswith(expect_sha256.lower()):
        raise BaselineError(f"baseline {bundle.name!r} has sha256 {bundle.sha256}, not the {expect_sha256} expected")
    return bundle


# -- cards and software --------------------------------------------------------------------------------------------

GiB = 1 << 30


def gpu_model(name: str, memory_bytes: int | None) -> str:
    """The GPU model as compared: its name and memory size (the collector's ``MODEL``)."""
    return f"{name} {round((memory_bytes or 0) / GiB)} GiB"


def card_of_model(model: str, power_limit_w: float | None) -> str:
    """The collector's card of a GPU model (``gpu_model``) at a power limit (``collector.sqlviews.CARD``; a test
    keeps both equal)."""
    return model + (f" · {round(power_limit_w)} W" if power_limit_w is not None else "")


def card_power_w(card: str) -> float | None:
    """The power limit a card (``card_of_model``) names, or None for a card without one."""
    _, sep, tail = card.rpartition(" · ")
    if not sep or not tail.endswith(" W"):
        return None
    try:
        return float(tail[:-2])
    except ValueError:
        return None


def card_key(name: str, memory_bytes: int | None, power_limit_w: float | None) -> str:
    """The collector's card of a GPU: its model and power limit."""
    return card_of_model(gpu_model(name, memory_bytes), power_limit_w)


def release(component: str, version: str | None) -> str | None:
    """A version's release line: the driver's major (580), else major.minor (torch 2.11, CUDA 13.0)."""
    if not version:
        return None
    parts = version.split("+")[0].split(".")
    if component == "driver":
        return parts[0]
    return ".".join(parts[:2])


SOFTWARE = ("driver", "cuda", "torch", "transformers")


def software_of(versions: Iterable[Mapping[str, str | None]]) -> BaselineSoftware:
    """The release lines seen in runs' software (each a dict with ``SOFTWARE``'s keys)."""
    seen: dict[str, set[str]] = {k: set() for k in SOFTWARE}
    for v in versions:
        for k in SOFTWARE:
            line = release(k, v.get(k))
            if line:
                seen[k].add(line)
    return BaselineSoftware(**{k: tuple(sorted(s)) for k, s in seen.items()})


def sensitive_to(figure: str) -> tuple[str, ...]:
    """The software a figure's speed depends on besides the GPU: a baseline measured with other releases of these is
    still compared, with a note. Memory and host-transfer figures are a copy kernel and a DMA: comparable across
    software. Matmuls depend on cuBLAS, which ships with CUDA; layers, training and inference on torch's kernels
    (and CUDA), and transformers' layer code where it runs."""
    if figure in ("memory", "h2d", "d2h", "vector") or figure.startswith("bw_"):
        return ()
    if figure.startswith(("matmul_", "mamf_")):
        return ("cuda",)
    if figure == "bert_fwdbwd":  # the health profile's plain-torch layer or transformers' one: torch decides
        return ("torch", "cuda")
    return ("torch", "cuda", "transformers")


def software_note(figure: str, baseline: BaselineSoftware, measured: dict[str, str | None]) -> str | None:
    """Where this measurement's software differs from the baseline's in what the figure depends on."""
    differ = []
    for component in sensitive_to(figure):
        mine, theirs = release(component, measured.get(component)), getattr(baseline, component)
        if mine and theirs and mine not in theirs:
            differ.append(f"{component} {mine} (baseline: {', '.join(theirs)})")
    return "measured with " + "; ".join(differ) if differ else None


# -- thresholds ----------------------------------------------------------------------------------------------------


def _chi2_low(k: int) -> float:
    """chi-square's ``1 - WIDEN_CONFIDENCE`` quantile with k degrees of freedom (Wilson-Hilferty for k > 2)."""
    if k in _CHI2_LOW:
        return _CHI2_LOW[k]
    c = 2 / (9 * k)
    return k * (1 - c + _Z_LOW * math.sqrt(c)) ** 3


def spread_widening(gpus: int) -> float:
    """How much a spread measured over ``gpus`` GPUs is widened: the ratio of its upper 90 % confidence bound to the
    estimate (sqrt((n-1)/chi2)): 7.96 for 2 GPUs, 1.94 for 5, 1.47 for 10, 1.10 for 100."""
    k = max(1, gpus - 1)
    return math.sqrt(k / _chi2_low(k))


def baseline_threshold(
    figure: BaselineFigure,
    *,
    minimum: float,
    maximum: float,
    sigmas: float,
    default: float = DEFAULT_BASELINE_THRESHOLD,
) -> float:
    """How far below a baseline a GPU may measure before it fails it.

    A GPU is another GPU of the model: its measurement varies by the spread between GPUs and by its own run-to-run
    spread, so the threshold is ``sigmas`` robust standard deviations (1.4826 MAD) of both together. Measured over
    few GPUs, the spread is widened to its upper confidence bound (``spread_widening``), but no further than the
    default unless the spread itself is wider; without a spread between GPUs (one GPU, published), the default or
    the run-to-run spread's, whichever is wider."""
    between, within = figure.between_gpus, figure.within_gpu or 0.0
    measured = sigmas * 1.4826 * math.hypot(between or 0.0, within)
    if between is not None and figure.gpus >= 2:
        chosen = min(measured * spread_widening(figure.gpus), max(default, measured))
    else:
        chosen = max(default, measured)
    return min(maximum, max(minimum, chosen))


# -- choosing a card's baseline ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineEntry:
    """One figure of one card's baseline, with what a verdict says about where it comes from."""

    bundle: str  # the bundle's name
    bundle_id: str
    origin: str  # bundled | imported | file
    card: str
    suite: str
    figure: BaselineFigure
    software: BaselineSoftware
    gpu_name: str | None = None  # as the driver calls its GPUs: its datasheet

    @property
    def period(self) -> str:
        """When its runs were measured: "2026-12", or "2026-11 to 2026-12"."""
        first, last = self.figure.first, self.figure.last
        if first is None or last is None:
            return "published"
        a, b = f"{first:%Y-%m}", f"{last:%Y-%m}"
        return a if a == b else f"{a} to {b}"

    @property
    def description(self) -> str:
        """ "NVIDIA H200 140 GiB · 700 W baseline (4,255, 1 GPU, 17 runs, 2026-12)"."""
        f = self.figure
        gpus = f"{f.gpus} GPU{'s' if f.gpus != 1 else ''}"
        runs = f"{f.runs} run{'s' if f.runs != 1 else ''}"
        return f"{self.card} baseline ({f.value:,.0f}, {gpus}, {runs}, {self.period})"


_ORIGIN_RANK = {"file": 0, "imported": 1, "bundled": 2}


class BaselineIndex:
    """The measured baselines a verdict may use, per card and figure: where several bundles have one, the one on
    the most GPUs, then a file given for this check, then an imported one over a bundled one, then the newest."""

    def __init__(self, bundles: Iterable[tuple[BaselineBundle, str]] = ()) -> None:
        self._entries: dict[tuple[str, str, str], BaselineEntry] = {}
        self.bundles: list[tuple[BaselineBundle, str]] = []
        for bundle, origin in bundles:
            self.bundles.append((bundle, origin))
            if bundle.figures_version != FIGURES_VERSION:
                continue  # figures of other definitions: not comparable (listed, never used)
            for card in bundle.cards:
                if card.kind != "measured" or card.suite is None:
                    continue
                for f in card.figures:
                    entry = BaselineEntry(
                        bundle.name, bundle.id, origin, card.card, card.suite, f, card.software, card.gpu_name
                    )
                    key = (card.card, card.suite, f.figure)
                    held = self._entries.get(key)
                    if held is None or self._rank(entry) < self._rank(held):
                        self._entries[key] = entry

    @staticmethod
    def _rank(e: BaselineEntry) -> tuple[int, int, int]:
        return (-e.figure.gpus, _ORIGIN_RANK.get(e.origin, 9), -(e.figure.last or date.min).toordinal())

    def __bool__(self) -> bool:
        return bool(self._entries)

    def cards(self) -> set[str]:
        return {card for card, _, _ in self._entries}

    def entries(self, card: str) -> list[BaselineEntry]:
        """Every figure's chosen baseline of one card, of every suite."""
        return [e for (c, _, _), e in sorted(self._entries.items()) if c == card]

    def lookup(self, card: str, default_card: str | None, figure: str, suite: str) -> tuple[BaselineEntry | None, bool]:
        """The baseline of ``figure`` in ``suite`` for a GPU of ``card``; else, for a GPU whose power limit was
        lowered, the one of its card at the default limit (``default_card``), and True to say so."""
        found = self._entries.get((card, suite, figure))
        if found is None and default_card and default_card != card:
            other = self._entries.get((default_card, suite, figure))
            if other is not None:
                return other, True
        return found, False


@lru_cache(maxsize=1)
def bundled() -> tuple[BaselineBundle, ...]:
    """The baselines this package ships (``schemas/data/*.baseline.json``), checked like any import."""
    folder = resources.files(BUNDLED_PACKAGE)
    out = []
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if item.name.endswith(".baseline.json"):
            out.append(parse_bundle(item.read_bytes()))
    return tuple(out)

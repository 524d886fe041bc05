"""Cross-card comparison as data: the transformers-benchmarks table shape, filled from stored figures (pure
functions over the rows the named queries return).

Each cell is the median over a card's devices of each device's latest best value (as the published table takes
the best over sizes or batches; latest: the newest run that measured it), with the low/high spread and the number
of devices. Results flagged as measurement errors (above the datasheet peak) or wrong numerics never enter a
cell. Published figures imported as reference data appear as their own columns, marked as published.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from schemas import GpuSpec, match_spec
from schemas.baselines import BaselineEntry
from schemas.labels import PER_WATT_SUFFIX

from ..store.figures import BY_KEY, FIGURES

Fetched = tuple[Any, ...]  # one row as a named query returns it

#: Datasheet rows: (label, unit, GpuSpec attribute, reference metric).
DATASHEET = (
    ("Theory TF32", "TFLOPS", "tf32", "theory_tf32_tflops"),
    ("Theory FP16", "TFLOPS", "fp16", "theory_fp16_tflops"),
    ("Theory FP8", "TFLOPS", "fp8", None),
    ("Memory (datasheet)", "GB", "memory_gb", "memory_gb"),
    ("Memory bandwidth (datasheet)", "GB/s", "bandwidth_gbps", "bandwidth_gbps"),
)
#: The derived row of FP16 TFLOPS per $1,000 of the card's price: its label and unit (the price chart's title, bar and
#: axis too, which say the unit whole: TFLOPS alone would be a card's throughput, not its price/performance).
PER_KUSD = ("FP16 matmul price/performance", "TFLOPS per $1,000")
#: The figures whose per-watt twins (the figure over the board's mean power while it was measured) the table shows
#: after the price rows: what a power bill is compared on. Every other twin is in ``figures`` and the SQL views.
PER_WATT_ROWS = tuple(key + PER_WATT_SUFFIX for key in (
    "matmul_fp32", "matmul_tf32", "matmul_fp16", "matmul_bf16", "matmul_fp8", "bw_copy", "bert_fwdbwd",
    "gpt2_fwdbwd", "train_bert_tokens", "train_gpt2_tokens", "llama3_8b_decode_b1_torch", "llama3_8b_decode_b32_torch",
))  # fmt: skip
PUBLISHED = " (published)"


@dataclass(frozen=True)
class Cell:
    median: float
    low: float
    high: float
    count: int


@dataclass(frozen=True)
class Card:
    label: str
    gpu_name: str | None
    devices: int
    runs: int
    spec: GpuSpec | None
    published: bool = False
    source: str | None = None
    baseline: bool = False  # a card's baseline as a column: ``devices`` and ``runs`` are what it stands on

    @property
    def measured(self) -> bool:
        """Measured by this collector's agents (not a published table, not a baseline)."""
        return not self.published and not self.baseline


@dataclass(frozen=True)
class Row:
    label: str
    unit: str
    cells: list[Cell | None]
    source: str = "measured"  # measured | datasheet | derived
    key: str = ""


@dataclass(frozen=True)
class Comparison:
    cards: list[Card]
    rows: list[Row]
    runs: int = 0
    notes: list[str] = field(default_factory=list)

    def row(self, key: str) -> Row | None:
        return next((r for r in self.rows if r.key == key), None)


@dataclass(frozen=True)
class Series:
    """One line of a chart: a card's median y at each x."""

    label: str
    points: list[tuple[float, float]]


@dataclass(frozen=True)
class Measurements:
    """What a comparison is made of, as the named queries return it."""

    cards: list[dict[str, Any]]  # the ``cards`` view's rows
    references: list[Fetched]  # (card, source) with published figures
    cells: list[Fetched]  # (card, figure, median, low, high, devices)
    published: list[Fetched]  # (card, metric, value)
    prices: list[Fetched]  # (model pattern, USD)
    runs: int


def measured_cards(m: Measurements) -> list[Card]:
    return [Card(r["card"], r["gpu_name"], int(r["devices"]), int(r["runs"] or 0),
                 match_spec(r["gpu_name"]) if r["gpu_name"] else None) for r in m.cards]  # fmt: skip


def reference_cards(m: Measurements, cards: list[str] | None = None) -> list[Card]:
    out = [
        Card(card + PUBLISHED, card, 0, 0, match_spec(card), published=True, source=src) for card, src in m.references
    ]
    return [c for c in out if not cards or c.label in cards]


def cells(m: Measurements) -> dict[tuple[str, str], Cell]:
    """(card, figure) -> the median over devices of each one's latest best value."""
    return {(card, metric): Cell(float(med), float(lo), float(hi), int(n)) for card, metric, med, lo, hi, n in m.cells}


def reference_values(m: Measurements) -> dict[tuple[str, str], float]:
    return {(card + PUBLISHED, metric): float(value) for card, metric, value in m.published}


def prices(m: Measurements, extra: dict[str, float] | None = None) -> list[tuple[str, float]]:
    """(pattern, USD) pairs: the ones given for this report first, then the prices table."""
    return list((extra or {}).items()) + [(str(model), float(usd)) for model, usd in m.prices]


def price_for(card: Card, patterns: list[tuple[str, float]], published: dict[tuple[str, str], float]) -> float | None:
    """A card's price: the first pattern matching its label (case-insensitive regex), else its published price."""
    for pattern, usd in patterns:
        if re.search(pattern, card.label, flags=re.IGNORECASE):
            return usd
    return published.get((card.label, "price_usd"))


def _baseline_column(
    label: str, gpu_name: str | None, held: list[BaselineEntry]
) -> tuple[Card, dict[tuple[str, str], Cell]] | None:
    """A card's baseline as a column: its standard-suite figures (the report's rows are the standard suite's),
    labelled with the GPUs it stands on; None where it has none of that suite."""
    entries = [e for e in held if e.suite == "standard"]
    if not entries:
        return None
    gpus, runs = max(e.figure.gpus for e in entries), max(e.figure.runs for e in entries)
    column = f"{label} baseline ({gpus} GPU{'s' if gpus != 1 else ''})"
    card = Card(column, gpu_name, gpus, runs, match_spec(gpu_name) if gpu_name else None, baseline=True,
                source=entries[0].bundle)  # fmt: skip
    cells = {(column, f.figure): Cell(f.value, f.low or f.value, f.high or f.value, f.gpus)
             for f in (e.figure for e in entries)}  # fmt: skip
    return card, cells


def baseline_columns(
    measured: list[Card], baselines: dict[str, list[BaselineEntry]], others: dict[str, list[BaselineEntry]]
) -> tuple[list[Card], dict[tuple[str, str], Cell]]:
    """Each measured card followed by its baseline's column where ``baselines`` has one, then the baselines of cards
    this collector has not measured (``others``: the ones flopfleet ships, say), so that one card is seen beside
    them; the baseline columns' cells."""
    columns: list[Card] = []
    found: dict[tuple[str, str], Cell] = {}

    def add(column: tuple[Card, dict[tuple[str, str], Cell]] | None) -> None:
        if column is not None:
            columns.append(column[0])
            found.update(column[1])

    for c in measured:
        columns.append(c)
        add(_baseline_column(c.label, c.gpu_name, baselines.get(c.label, [])))
    for label, held in sorted(others.items()):
        add(_baseline_column(label, held[0].gpu_name if held else None, held))
    return columns, found


def comparison(
    m: Measurements,
    cards: list[str] | None = None,
    extra_prices: dict[str, float] | None = None,
    baselines: dict[str, list[BaselineEntry]] | None = None,
    others: dict[str, list[BaselineEntry]] | None = None,
) -> Comparison:
    """The cross-card table: measured cards (``m`` holds only those asked for), each followed by its baseline's
    column where ``baselines`` has one, then the baselines of cards not measured here (``others``), then published
    ones (only those in ``cards`` when given)."""
    measured, found = baseline_columns(measured_cards(m), baselines or {}, others or {})
    columns = measured + reference_cards(m, cards)
    found |= cells(m)
    published = reference_values(m)
    price_list = prices(m, extra_prices)

    def one(v: float | None) -> Cell | None:
        return Cell(v, v, v, 1) if v is not None else None

    rows: list[Row] = []
    for label, unit, attr, ref_key in DATASHEET:
        values = []
        for c in columns:
            v = published.get((c.label, ref_key)) if c.published and ref_key else None
            if v is None and c.spec is not None:
                v = getattr(c.spec, attr)
            values.append(one(float(v)) if v is not None else None)
        rows.append(Row(label, unit, values, "datasheet", attr))
    card_prices = [price_for(c, price_list, published) for c in columns]
    rows.append(Row("Price", "USD", [one(p) for p in card_prices], "datasheet", "price"))
    for figure in FIGURES:
        values = []
        for c in columns:
            if c.published:
                values.append(one(published.get((c.label, figure.key))))
            else:
                values.append(found.get((c.label, figure.key)))
        rows.append(Row(figure.label, figure.unit, values, "measured", figure.key))
    fp16 = next(r for r in rows if r.key == "matmul_fp16")
    per_dollar = [
        one(cell.median / usd * 1000) if cell is not None and usd else None
        for cell, usd in zip(fp16.cells, card_prices, strict=True)
    ]
    rows.append(Row(*PER_KUSD, per_dollar, "derived", "fp16_per_kusd"))
    for key in PER_WATT_ROWS:
        twin = BY_KEY[key]
        per_watt = [None if c.published else found.get((c.label, key)) for c in columns]
        rows.append(Row(twin.label, twin.unit, per_watt, "measured", key))
    notes = []
    if any(c.baseline for c in columns):
        notes.append("Columns marked baseline are a card's baseline (the median over the GPUs it stands on of each "
                     "one's median; the count says how many; flopfleet's own, measured on lent GPUs, where this "
                     "collector has none of that card), not this collector's measurements.")  # fmt: skip
    if any(c.published for c in columns):
        notes.append("Columns marked (published) are figures from their source, not measured by this collector; "
                     "the published A100 'FP32' matmul ran with TF32 on.")  # fmt: skip
    return Comparison(
        cards=columns,
        rows=[r for r in rows if any(c is not None for c in r.cells)],
        runs=m.runs,
        notes=notes,
    )


def series(rows: list[Fetched]) -> dict[str, list[Series]]:
    """(chart title, card, x, y) rows -> chart title -> one series per card."""
    charts: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for title, card, x, y in rows:
        charts.setdefault(str(title), {}).setdefault(str(card), []).append((float(x), float(y)))
    return {title: [Series(card, pts) for card, pts in lines.items()] for title, lines in charts.items()}


DTYPE_ORDER = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2")


def matmul_series(rows: list[Fetched]) -> dict[str, list[Series]]:
    """TFLOPS against square matrix size, per dtype (in ``DTYPE_ORDER``), one series per card."""
    charts = series(rows)
    return {d: charts[d] for d in sorted(charts, key=lambda d: DTYPE_ORDER.index(d) if d in DTYPE_ORDER else 99)}


#: Bars of the "% of datasheet" chart: (the figure's label, figure); Llama decode as a fraction of the memory
#: bandwidth.
PEAK_CATEGORIES = tuple((BY_KEY[key].label, key) for key in (
    "matmul_fp32", "matmul_tf32", "matmul_fp16", "matmul_bf16", "matmul_fp8", "memory", "bert_fwdbwd",
    "llama3_8b_decode_b1", "llama3_8b_decode_b1_torch",
))  # fmt: skip


def peak_fractions(rows: list[Fetched]) -> dict[str, dict[str, float]]:
    """(card, figure, fraction) rows -> card -> category -> median fraction of the datasheet peak."""
    label = {figure: name for name, figure in PEAK_CATEGORIES}
    out: dict[str, dict[str, float]] = {}
    for card, figure, value in rows:
        out.setdefault(card, {})[label[figure]] = float(value)
    return out


def spread(rows: list[Fetched]) -> dict[str, list[tuple[str, float]]]:
    """(card, device, value) rows -> card -> (device, value): how same-model cards differ between machines."""
    out: dict[str, list[tuple[str, float]]] = {}
    for card, device, value in rows:
        out.setdefault(card, []).append((str(device), float(value)))
    return out

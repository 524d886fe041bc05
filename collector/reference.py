"""Published figures as reference data: the transformers-benchmarks README's five-card table (bundled), or any
table of the same shape, so a user with one card can compare it with others. A table is a baseline like any other
(``schemas.baselines``), one that says "published, not measured": its cards have no spread and no GPU count, and
verdicts never use them (their method, software and card names are not this collector's); the report shows them as
columns labelled published.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path

from schemas.baselines import BaselineBundle, BaselineFigure, BaselineSource, CardBaseline, seal

from .errors import CollectorError
from .figures import BY_KEY

BUNDLED = "transformers_benchmarks_readme.csv"
UNITS = {"_tflops": "TFLOPS", "_gbps": "GB/s", "_gb": "GB", "_usd": "USD"}
#: The published table's measured rows -> our figure keys (the rest are datasheet facts: theory, memory, price).
REFERENCE_METRICS = {
    "matmul_fp32_tflops": "matmul_fp32",
    "matmul_fp16_tflops": "matmul_fp16",
    "vector_mult_tflops": "vector",
    "bert_layer_fwd_tflops": "bert_fwd",
    "bert_layer_fwdbwd_tflops": "bert_fwdbwd",
    "gpt2_block_fwd_tflops": "gpt2_fwd",
    "gpt2_block_fwdbwd_tflops": "gpt2_fwdbwd",
    "t5_encoder_fwd_tflops": "t5_encoder_fwd",
    "t5_encoder_fwdbwd_tflops": "t5_encoder_fwdbwd",
    "t5_decoder_fwd_tflops": "t5_decoder_fwd",
    "t5_decoder_fwdbwd_tflops": "t5_decoder_fwdbwd",
}


@dataclass(frozen=True)
class ReferenceValue:
    card: str
    metric: str
    value: float
    unit: str | None
    source: str
    note: str | None


def _unit(metric: str) -> str | None:
    return next((unit for suffix, unit in UNITS.items() if metric.endswith(suffix)), None)


def parse_reference(text: str, default_source: str) -> list[ReferenceValue]:
    """``metric,card1,card2,...`` rows; '#' lines before the header give the source ('# Source: ...') and notes."""
    comments = [line[1:].strip() for line in text.splitlines() if line.startswith("#")]
    source = next((c.split(":", 1)[1].strip() for c in comments if c.lower().startswith("source:")), default_source)
    notes = " ".join(c for c in comments if not c.lower().startswith("source:")) or None
    rows = list(csv.reader(line for line in io.StringIO(text) if line.strip() and not line.startswith("#")))
    if not rows or rows[0][0] != "metric" or len(rows[0]) < 2:
        raise CollectorError("a reference table starts with a header 'metric,<card>,<card>,...'")
    cards = [c.strip() for c in rows[0][1:]]
    values = []
    for row in rows[1:]:
        metric = row[0].strip()
        for card, cell in zip(cards, row[1:], strict=False):
            if not cell.strip():
                continue
            try:
                number = float(cell)
            except ValueError:
                raise CollectorError(f"reference value for {card} {metric} is not a number: {cell!r}") from None
            values.append(ReferenceValue(card, metric, number, _unit(metric), source, notes))
    return values


def load(path: Path | None) -> list[ReferenceValue]:
    """The given file, or the bundled transformers-benchmarks table when ``path`` is None."""
    if path is None:
        text = resources.files("collector.data").joinpath(BUNDLED).read_text(encoding="utf-8")
        return parse_reference(text, "mli/transformers-benchmarks README")
    try:
        return parse_reference(path.read_text(encoding="utf-8"), str(path))
    except OSError as exc:
        raise CollectorError(f"cannot read {path}: {exc}") from exc


def published_bundle(values: list[ReferenceValue], exported_at: datetime) -> BaselineBundle:
    """A published table as a baseline: one ``published`` card per column, its measured rows as figures (our keys),
    the rest as datasheet facts. Its name is its source, so importing the same table again replaces it."""
    if not values:
        raise CollectorError("the reference table has no values")
    source, notes = values[0].source, values[0].note
    cards = []
    for card in dict.fromkeys(v.card for v in values):
        mine = [v for v in values if v.card == card]
        keys = {v.metric: REFERENCE_METRICS[v.metric] for v in mine if v.metric in REFERENCE_METRICS}
        figures = tuple(BaselineFigure(figure=keys[v.metric], unit=BY_KEY[keys[v.metric]].unit, value=v.value)
                        for v in mine if v.metric in keys)  # fmt: skip
        facts = {v.metric: v.value for v in mine if v.metric not in REFERENCE_METRICS}
        cards.append(CardBaseline(card=card, kind="published", figures=figures, facts=facts, note=notes))
    return seal(source, BaselineSource(collector=None, exported_at=exported_at, description=notes), cards)


def parse_prices(path: Path) -> dict[str, float]:
    """``model,price_usd`` rows: model is matched case-insensitively (a regular expression) against card names."""
    prices: dict[str, float] = {}
    try:
        rows = list(csv.DictReader(line for line in path.open(encoding="utf-8") if not line.startswith("#")))
    except OSError as exc:
        raise CollectorError(f"cannot read {path}: {exc}") from exc
    for row in rows:
        try:
            prices[row["model"].strip()] = float(row["price_usd"])
        except (KeyError, TypeError, ValueError):
            raise CollectorError(f"{path}: each row needs model and a numeric price_usd; got {row}") from None
    return prices

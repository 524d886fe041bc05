"""Published figures as reference data: the transformers-benchmarks README's five-card table (bundled), or any
table of the same shape, so a user with one card can compare it with others. A table is a baseline like any other
(``schemas.baselines``), one that says "published, not measured": its cards have no spread and no GPU count, and
verdicts never use them (their method, software and card names are not this collector's); the report shows them as
columns labelled published.
"""

from __future__ import annotations

import csv
import io
from importlib import resources
from pathlib import Path

from ..store.errors import CollectorError
from ..store.published import ReferenceValue

BUNDLED = "transformers_benchmarks_readme.csv"
UNITS = {"_tflops": "TFLOPS", "_gbps": "GB/s", "_gb": "GB", "_usd": "USD"}


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

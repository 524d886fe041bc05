"""Cross-card comparison as data: the transformers-benchmarks table shape, filled from stored results.

Each cell is the median over a card's devices-in-runs of that device's best value (as the published table takes
the best over sizes or batches), with the low/high spread and the count. Results flagged as measurement errors
(above the datasheet peak) or wrong numerics never enter a cell. Published figures imported as reference data
appear as their own columns, marked as published.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import duckdb

from schemas import GpuSpec, match_spec

from .figures import FIGURES, TRUSTED

#: Devices with the run facts a figure is compared by.
_FIGURES_OF = """figures f JOIN devices d ON d.run_id = f.run_id AND d.gpu_index IS NOT DISTINCT FROM f.gpu_index"""

#: Datasheet rows: (label, unit, digits, GpuSpec attribute, reference metric).
DATASHEET = (
    ("Theory TF32", "TFLOPS", 0, "tf32", "theory_tf32_tflops"),
    ("Theory FP16", "TFLOPS", 0, "fp16", "theory_fp16_tflops"),
    ("Theory FP8", "TFLOPS", 0, "fp8", None),
    ("Memory (datasheet)", "GB", 0, "memory_gb", "memory_gb"),
    ("Memory bandwidth (datasheet)", "GB/s", 0, "bandwidth_gbps", "bandwidth_gbps"),
)
#: Published table keys -> our metric keys.
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


@dataclass(frozen=True)
class Row:
    label: str
    unit: str
    digits: int
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


def _in(cards: list[str] | None, column: str) -> tuple[str, list[object]]:
    if not cards:
        return "", []
    return f" AND {column} IN (SELECT unnest(?::VARCHAR[]))", [cards]


def measured_cards(con: duckdb.DuckDBPyConnection, cards: list[str] | None = None) -> list[Card]:
    where, params = _in(cards, "card")
    rows = con.execute(
        f"SELECT card, gpu_name, devices, runs FROM cards WHERE true{where} ORDER BY gpu_name IS NULL, card", params
    ).fetchall()
    return [Card(c, n, int(d), int(r), match_spec(n) if n else None) for c, n, d, r in rows]


def reference_cards(con: duckdb.DuckDBPyConnection, cards: list[str] | None = None) -> list[Card]:
    rows = con.execute("SELECT card, any_value(source) FROM reference_values GROUP BY card ORDER BY card").fetchall()
    out = [Card(card + PUBLISHED, card, 0, 0, match_spec(card), published=True, source=src) for card, src in rows]
    return [c for c in out if not cards or c.label in cards]


def cells(con: duckdb.DuckDBPyConnection, cards: list[str] | None = None) -> dict[tuple[str, str], Cell]:
    """(card, figure) -> the median over devices-in-runs of each one's best value."""
    where, params = _in(cards, "d.card")
    rows = con.execute(
        f"SELECT d.card, f.figure, median(f.value), min(f.value), max(f.value), count(*) FROM {_FIGURES_OF} "
        f"WHERE true{where} GROUP BY d.card, f.figure",
        params,
    ).fetchall()
    return {(card, metric): Cell(float(med), float(lo), float(hi), int(n)) for card, metric, med, lo, hi, n in rows}


def reference_values(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], float]:
    rows = con.execute("SELECT card, metric, value FROM reference_values").fetchall()
    return {(card + PUBLISHED, metric): float(value) for card, metric, value in rows}


def prices(con: duckdb.DuckDBPyConnection, extra: dict[str, float] | None = None) -> list[tuple[str, float]]:
    """(pattern, USD) pairs: the ones given for this report first, then the prices table."""
    stored = [(m, float(p)) for m, p in con.execute("SELECT model, price_usd FROM prices ORDER BY model").fetchall()]
    return list((extra or {}).items()) + stored


def price_for(card: Card, patterns: list[tuple[str, float]], published: dict[tuple[str, str], float]) -> float | None:
    """A card's price: the first pattern matching its label (case-insensitive regex), else its published price."""
    for pattern, usd in patterns:
        if re.search(pattern, card.label, flags=re.IGNORECASE):
            return usd
    return published.get((card.label, "price_usd"))


def comparison(
    con: duckdb.DuckDBPyConnection, cards: list[str] | None = None, extra_prices: dict[str, float] | None = None
) -> Comparison:
    """The cross-card table: measured cards (optionally only ``cards``), then published ones."""
    measured = measured_cards(con, cards)
    columns = measured + reference_cards(con, cards)
    found = cells(con, [c.label for c in measured] if cards else None)
    published = reference_values(con)
    price_list = prices(con, extra_prices)

    def one(v: float | None) -> Cell | None:
        return Cell(v, v, v, 1) if v is not None else None

    rows: list[Row] = []
    for label, unit, digits, attr, ref_key in DATASHEET:
        values = []
        for c in columns:
            v = published.get((c.label, ref_key)) if c.published and ref_key else None
            if v is None and c.spec is not None:
                v = getattr(c.spec, attr)
            values.append(one(float(v)) if v is not None else None)
        rows.append(Row(label, unit, digits, values, "datasheet", attr))
    card_prices = [price_for(c, price_list, published) for c in columns]
    rows.append(Row("Price", "USD", 0, [one(p) for p in card_prices], "datasheet", "price"))
    for m in FIGURES:
        values = []
        for c in columns:
            if c.published:
                ref = next((k for k, v in REFERENCE_METRICS.items() if v == m.key), None)
                values.append(one(published.get((c.label, ref))) if ref else None)
            else:
                values.append(found.get((c.label, m.key)))
        rows.append(Row(m.label, m.unit, m.digits, values, "measured", m.key))
    fp16 = next(r for r in rows if r.key == "matmul_fp16")
    per_dollar = [
        one(cell.median / usd * 1000) if cell is not None and usd else None
        for cell, usd in zip(fp16.cells, card_prices, strict=True)
    ]
    rows.append(Row("FP16 matmul per $1,000", "TFLOPS", 2, per_dollar, "derived", "fp16_per_kusd"))
    runs_row = con.execute("SELECT count(*) FROM runs").fetchone()
    notes = []
    if any(c.published for c in columns):
        notes.append("Columns marked (published) are figures from their source, not measured by this collector; "
                     "the published A100 'FP32' matmul ran with TF32 on.")  # fmt: skip
    return Comparison(
        cards=columns,
        rows=[r for r in rows if any(c is not None for c in r.cells)],
        runs=int(runs_row[0]) if runs_row else 0,
        notes=notes,
    )


def _series(rows: list[tuple[object, ...]]) -> dict[str, list[Series]]:
    charts: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for title, card, x, y in rows:
        charts.setdefault(str(title), {}).setdefault(str(card), []).append((float(x), float(y)))  # type: ignore[arg-type]
    return {title: [Series(card, pts) for card, pts in lines.items()] for title, lines in charts.items()}


DTYPE_ORDER = ("fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2")


#: Results with their card; a card filter on ``d`` keeps the join's build side small.
_RESULTS_OF = "results r JOIN devices d ON d.run_id = r.run_id AND d.gpu_index IS NOT DISTINCT FROM r.gpu_index"


def matmul_series(con: duckdb.DuckDBPyConnection, cards: list[str] | None = None) -> dict[str, list[Series]]:
    """TFLOPS against square matrix size, per dtype, one series per card (median over devices-in-runs)."""
    where, params = _in(cards, "d.card")
    rows = con.execute(
        f"""SELECT dtype, d.card, n, median(tflops) FROM {_RESULTS_OF}
            WHERE benchmark = 'matmul' AND m = n AND n = k AND {TRUSTED}{where}
            GROUP BY dtype, d.card, n ORDER BY d.card, n""",
        params,
    ).fetchall()
    charts = _series(rows)
    return {d: charts[d] for d in sorted(charts, key=lambda d: DTYPE_ORDER.index(d) if d in DTYPE_ORDER else 99)}


def layer_series(con: duckdb.DuckDBPyConnection, cards: list[str] | None = None) -> dict[str, list[Series]]:
    """Layer TFLOPS against batch, per block, mode and sequence length (fp16), one series per card."""
    where, params = _in(cards, "d.card")
    # The title is built after grouping: concatenating it for every result row took a fifth of the query.
    rows = con.execute(
        f"""SELECT block || ' ' || mode || ' seq ' || seq_len, card, batch, value FROM (
                SELECT block, mode, seq_len, d.card, batch, median(tflops) AS value FROM {_RESULTS_OF}
                WHERE benchmark = 'layer' AND dtype = 'fp16' AND {TRUSTED}{where} GROUP BY ALL)
            ORDER BY 1, card, batch""",
        params,
    ).fetchall()
    return _series(rows)


def bandwidth_series(con: duckdb.DuckDBPyConnection, cards: list[str] | None = None) -> dict[str, list[Series]]:
    """Memory GB/s against array size (bytes of one fp32 array), per op, one series per card."""
    where, params = _in(cards, "d.card")
    rows = con.execute(
        f"""SELECT op, d.card, elements * 4, median(gbps) FROM {_RESULTS_OF}
            WHERE benchmark = 'bandwidth' AND {TRUSTED}{where} GROUP BY op, d.card, elements ORDER BY op, d.card, 3""",
        params,
    ).fetchall()
    return _series(rows)


#: Bars of the "% of datasheet" chart: label -> figure.
PEAK_CATEGORIES = (
    ("FP32", "matmul_fp32"),
    ("TF32", "matmul_tf32"),
    ("FP16", "matmul_fp16"),
    ("BF16", "matmul_bf16"),
    ("FP8", "matmul_fp8"),
    ("memory", "memory"),
    ("BERT fwd+bwd", "bert_fwdbwd"),
)


def peak_fractions(con: duckdb.DuckDBPyConnection, cards: list[str] | None = None) -> dict[str, dict[str, float]]:
    """card -> category -> median over devices-in-runs of the best result's fraction of the datasheet peak."""
    where, params = _in(cards, "d.card")
    label = {figure: name for name, figure in PEAK_CATEGORIES}
    rows = con.execute(
        f"SELECT d.card, f.figure, median(f.peak_fraction) FROM {_FIGURES_OF} WHERE f.peak_fraction IS NOT NULL "
        f"AND f.figure IN (SELECT unnest(?::VARCHAR[])){where} GROUP BY d.card, f.figure ORDER BY d.card",
        [list(label), *params],
    ).fetchall()
    out: dict[str, dict[str, float]] = {}
    for card, figure, value in rows:
        out.setdefault(card, {})[label[figure]] = float(value)
    return out


def spread(con: duckdb.DuckDBPyConnection, cards: list[str] | None = None) -> dict[str, list[tuple[str, float]]]:
    """card -> (device, best bf16 matmul TFLOPS in its latest run): how same-model cards differ between machines."""
    where, params = _in(cards, "d.card")
    rows = con.execute(
        f"SELECT d.card, d.device_id, arg_max(f.value, d.started_at) AS v FROM {_FIGURES_OF} "
        f"WHERE f.figure = 'matmul_bf16' AND d.source = 'agent'{where} GROUP BY d.card, d.device_id ORDER BY 1, 3",
        params,
    ).fetchall()
    out: dict[str, list[tuple[str, float]]] = {}
    for card, device, value in rows:
        out.setdefault(card, []).append((str(device), float(value)))
    return out


def runs_table(con: duckdb.DuckDBPyConnection, limit: int = 50) -> list[tuple[object, ...]]:
    return con.execute(
        """SELECT r.started_at, r.hostname, r.suite, r.device,
                  coalesce((SELECT string_agg(g.name, ', ' ORDER BY g.gpu_index) FROM gpus g WHERE g.run_id = r.run_id),
                           r.cpu_model),
                  r.torch, r.cuda, r.driver, r.run_id
           FROM runs r ORDER BY r.started_at DESC LIMIT ?""",
        [limit],
    ).fetchall()

"""Cross-card comparison as data: the transformers-benchmarks table shape, filled from stored results.

Each cell is the median over a card's devices-in-runs of that device's best value (as the published table takes
the best over sizes or batches), with the low/high spread and the count. Results flagged as measurement errors
(above the datasheet peak) or wrong numerics never enter a cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb

from schemas import GpuSpec, match_spec


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    where: str  # SQL condition on result_facts
    value: str  # column to take the best of
    digits: int = 1


#: The rows of the cross-card table, in the published table's order, then flopfleet's extras.
METRICS: tuple[Metric, ...] = (
    Metric("matmul_fp32", "Matmul FP32", "TFLOPS", "benchmark = 'matmul' AND dtype = 'fp32'", "tflops"),
    Metric("matmul_tf32", "Matmul TF32", "TFLOPS", "benchmark = 'matmul' AND dtype = 'tf32'", "tflops"),
    Metric("matmul_fp16", "Matmul FP16", "TFLOPS", "benchmark = 'matmul' AND dtype = 'fp16'", "tflops"),
    Metric("matmul_bf16", "Matmul BF16", "TFLOPS", "benchmark = 'matmul' AND dtype = 'bf16'", "tflops"),
    Metric("matmul_fp8", "Matmul FP8", "TFLOPS", "benchmark = 'matmul' AND dtype LIKE 'fp8%'", "tflops"),
    Metric("mamf_bf16", "Max achievable BF16 matmul", "TFLOPS", "benchmark = 'mamf' AND dtype = 'bf16'", "tflops"),
    Metric("vector", "Vector a*1.2", "TFLOPS", "benchmark = 'bandwidth' AND op = 'scale'", "tflops", 3),
    Metric("bw_scale", "Memory a*1.2", "GB/s", "benchmark = 'bandwidth' AND op = 'scale'", "gbps", 0),
    Metric("bw_copy", "Memory copy", "GB/s", "benchmark = 'bandwidth' AND op = 'copy'", "gbps", 0),
    Metric("bw_triad", "Memory triad", "GB/s", "benchmark = 'bandwidth' AND op = 'triad'", "gbps", 0),
    Metric("h2d", "Host to device (pinned)", "GB/s", "benchmark = 'transfer' AND direction = 'h2d' AND pinned", "gbps"),
    Metric("d2h", "Device to host (pinned)", "GB/s", "benchmark = 'transfer' AND direction = 'd2h' AND pinned", "gbps"),
    *(
        Metric(
            f"{key}_{mode_key}",
            f"{label} {mode}",
            "TFLOPS",
            f"benchmark = 'layer' AND block = '{block}' AND mode = '{mode}' AND dtype = 'fp16'",
            "tflops",
        )
        for key, label, block in (
            ("bert", "BERT layer", "bert_layer"),
            ("gpt2", "GPT-2 block", "gpt2_block"),
            ("t5_encoder", "T5 encoder", "t5_encoder_block"),
            ("t5_decoder", "T5 decoder", "t5_decoder_block"),
        )
        for mode_key, mode in (("fwd", "fwd"), ("fwdbwd", "fwd+bwd"))
    ),
    Metric("train_bert_tokens", "BERT-large training", "tokens/s", "benchmark = 'training' AND model = 'bert-large'",
           "tokens_per_s", 0),
    Metric("train_bert_mfu", "BERT-large training MFU", "%", "benchmark = 'training' AND model = 'bert-large'",
           "mfu * 100", 1),
    Metric("train_gpt2_tokens", "GPT-2-medium training", "tokens/s",
           "benchmark = 'training' AND model = 'gpt2-medium'", "tokens_per_s", 0),
    Metric("train_gpt2_mfu", "GPT-2-medium training MFU", "%", "benchmark = 'training' AND model = 'gpt2-medium'",
           "mfu * 100", 1),
)  # fmt: skip

TRUSTED = "status = 'ok' AND NOT list_has_any(coalesce(flags, []), ['above_peak', 'wrong_result'])"


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


@dataclass(frozen=True)
class Row:
    label: str
    unit: str
    digits: int
    cells: list[Cell | None]
    source: str = "measured"  # measured | datasheet


@dataclass(frozen=True)
class Comparison:
    cards: list[Card]
    rows: list[Row]
    runs: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Series:
    """One line of a chart: a card's median y at each x."""

    label: str
    points: list[tuple[float, float]]


def _cards(con: duckdb.DuckDBPyConnection) -> list[Card]:
    rows = con.execute("SELECT card, gpu_name, devices, runs FROM cards ORDER BY gpu_name IS NULL, card").fetchall()
    return [
        Card(card, name, int(devices), int(runs), match_spec(name) if name else None)
        for card, name, devices, runs in rows
    ]


def _cells(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], Cell]:
    per_metric = " UNION ALL ".join(
        f"SELECT card, run_id, gpu_index, '{m.key}' AS metric, max({m.value}) AS v FROM result_facts "
        f"WHERE {TRUSTED} AND {m.where} GROUP BY card, run_id, gpu_index"
        for m in METRICS
    )
    rows = con.execute(
        f"SELECT card, metric, median(v), min(v), max(v), count(*) FROM ({per_metric}) GROUP BY card, metric"
    ).fetchall()
    return {(card, metric): Cell(float(med), float(lo), float(hi), int(n)) for card, metric, med, lo, hi, n in rows}


def _datasheet_rows(cards: list[Card]) -> list[Row]:
    def row(label: str, unit: str, digits: int, value: str) -> Row:
        cells: list[Cell | None] = []
        for card in cards:
            v = getattr(card.spec, value, None) if card.spec else None
            cells.append(Cell(float(v), float(v), float(v), 1) if v is not None else None)
        return Row(label, unit, digits, cells, source="datasheet")

    return [
        row("Theory TF32", "TFLOPS", 0, "tf32"),
        row("Theory FP16", "TFLOPS", 0, "fp16"),
        row("Theory FP8", "TFLOPS", 0, "fp8"),
        row("Memory (datasheet)", "GB", 0, "memory_gb"),
        row("Memory bandwidth (datasheet)", "GB/s", 0, "bandwidth_gbps"),
    ]


def comparison(con: duckdb.DuckDBPyConnection) -> Comparison:
    cards = _cards(con)
    cells = _cells(con)
    measured = [Row(m.label, m.unit, m.digits, [cells.get((card.label, m.key)) for card in cards]) for m in METRICS]
    runs_row = con.execute("SELECT count(*) FROM runs").fetchone()
    return Comparison(
        cards=cards,
        rows=[r for r in _datasheet_rows(cards) + measured if any(c is not None for c in r.cells)],
        runs=int(runs_row[0]) if runs_row else 0,
    )


def matmul_series(con: duckdb.DuckDBPyConnection) -> dict[str, list[Series]]:
    """TFLOPS against square matrix size, per dtype, one series per card (median over devices-in-runs)."""
    rows = con.execute(
        f"""SELECT dtype, card, n, median(tflops) FROM result_facts
            WHERE benchmark = 'matmul' AND m = n AND n = k AND {TRUSTED}
            GROUP BY dtype, card, n ORDER BY dtype, card, n"""
    ).fetchall()
    charts: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for dtype, card, n, tflops in rows:
        charts.setdefault(dtype, {}).setdefault(card, []).append((float(n), float(tflops)))
    order = ["fp32", "tf32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2"]
    return {
        dtype: [Series(card, points) for card, points in charts[dtype].items()]
        for dtype in sorted(charts, key=lambda d: order.index(d) if d in order else len(order))
    }


def layer_series(con: duckdb.DuckDBPyConnection) -> dict[str, list[Series]]:
    """Layer TFLOPS against batch, per block, mode and sequence length (fp16), one series per card."""
    rows = con.execute(
        f"""SELECT block, mode, seq_len, card, batch, median(tflops) FROM result_facts
            WHERE benchmark = 'layer' AND dtype = 'fp16' AND {TRUSTED}
            GROUP BY ALL ORDER BY block, mode, seq_len, card, batch"""
    ).fetchall()
    charts: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for block, mode, seq, card, batch, tflops in rows:
        charts.setdefault(f"{block} {mode} seq {seq}", {}).setdefault(card, []).append((float(batch), float(tflops)))
    return {title: [Series(card, pts) for card, pts in lines.items()] for title, lines in charts.items()}


def runs_table(con: duckdb.DuckDBPyConnection, limit: int = 50) -> list[tuple[object, ...]]:
    return con.execute(
        """SELECT r.started_at, r.hostname, r.suite, r.device,
                  coalesce((SELECT string_agg(g.name, ', ' ORDER BY g.gpu_index) FROM gpus g WHERE g.run_id = r.run_id),
                           r.cpu_model),
                  r.torch, r.cuda, r.driver, r.run_id
           FROM runs r ORDER BY r.started_at DESC LIMIT ?""",
        [limit],
    ).fetchall()

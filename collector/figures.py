"""The figures people compare: one best value per device per run for each, kept in the ``figures`` table.

A figure is the best value a device reached in one run for a kind of result (the published table also takes the
best over sizes and batches), with that result's fraction of the datasheet peak and the SM clock during the
largest case. The store computes them when it stores a run, so comparisons, health and version checks read a few
rows per run instead of every result.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Results that may become a figure: ok, and not flagged as a measurement error or wrong numerics.
TRUSTED = "status = 'ok' AND NOT list_has_any(coalesce(flags, []), ['above_peak', 'wrong_result'])"


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    unit: str
    where: str  # SQL condition on results
    value: str  # the column (or expression) whose best is the figure
    digits: int = 1


def _layers() -> list[Figure]:
    out = []
    for key, label, block in (
        ("bert", "BERT layer", "bert_layer"),
        ("gpt2", "GPT-2 block", "gpt2_block"),
        ("t5_encoder", "T5 encoder", "t5_encoder_block"),
        ("t5_decoder", "T5 decoder", "t5_decoder_block"),
    ):
        for mode_key, mode in (("fwd", "fwd"), ("fwdbwd", "fwd+bwd")):
            where = f"benchmark = 'layer' AND block = '{block}' AND mode = '{mode}' AND dtype = 'fp16'"
            out.append(Figure(f"{key}_{mode_key}", f"{label} {mode}", "TFLOPS", where, "tflops"))
    return out


#: In the order of the cross-card table's measured rows (the published table's, then flopfleet's extras).
FIGURES: tuple[Figure, ...] = (
    Figure("matmul_fp32", "Matmul FP32", "TFLOPS", "benchmark = 'matmul' AND dtype = 'fp32'", "tflops"),
    Figure("matmul_tf32", "Matmul TF32", "TFLOPS", "benchmark = 'matmul' AND dtype = 'tf32'", "tflops"),
    Figure("matmul_fp16", "Matmul FP16", "TFLOPS", "benchmark = 'matmul' AND dtype = 'fp16'", "tflops"),
    Figure("matmul_bf16", "Matmul BF16", "TFLOPS", "benchmark = 'matmul' AND dtype = 'bf16'", "tflops"),
    Figure("matmul_fp8", "Matmul FP8", "TFLOPS", "benchmark = 'matmul' AND dtype LIKE 'fp8%'", "tflops"),
    Figure("mamf_bf16", "Max achievable BF16 matmul", "TFLOPS", "benchmark = 'mamf' AND dtype = 'bf16'", "tflops"),
    Figure("vector", "Vector a*1.2", "TFLOPS", "benchmark = 'bandwidth' AND op = 'scale'", "tflops", 3),
    Figure("bw_scale", "Memory a*1.2", "GB/s", "benchmark = 'bandwidth' AND op = 'scale'", "gbps", 0),
    Figure("bw_copy", "Memory copy", "GB/s", "benchmark = 'bandwidth' AND op = 'copy'", "gbps", 0),
    Figure("bw_triad", "Memory triad", "GB/s", "benchmark = 'bandwidth' AND op = 'triad'", "gbps", 0),
    Figure("h2d", "Host to device (pinned)", "GB/s", "benchmark = 'transfer' AND direction = 'h2d' AND pinned",
           "gbps"),
    Figure("d2h", "Device to host (pinned)", "GB/s", "benchmark = 'transfer' AND direction = 'd2h' AND pinned",
           "gbps"),
    *_layers(),
    Figure("train_bert_tokens", "BERT-large training", "tokens/s",
           "benchmark = 'training' AND model = 'bert-large'", "tokens_per_s", 0),
    Figure("train_bert_mfu", "BERT-large training MFU", "%", "benchmark = 'training' AND model = 'bert-large'",
           "mfu * 100", 1),
    Figure("train_gpt2_tokens", "GPT-2-medium training", "tokens/s",
           "benchmark = 'training' AND model = 'gpt2-medium'", "tokens_per_s", 0),
    Figure("train_gpt2_mfu", "GPT-2-medium training MFU", "%", "benchmark = 'training' AND model = 'gpt2-medium'",
           "mfu * 100", 1),
)  # fmt: skip
#: Not rows of the table, but read by health and version checks.
EXTRA: tuple[Figure, ...] = (Figure("memory", "memory", "GB/s", "benchmark = 'bandwidth'", "gbps", 0),)
BY_KEY = {f.key: f for f in (*FIGURES, *EXTRA)}


def compute_sql(source: str) -> str:
    """SELECT of every figure of the results in ``source`` (a table with the results' columns), in one pass: each
    result row lists the figures it belongs to (one ``CASE`` each), so the plan stays small however many there are."""
    cases = ", ".join(
        f"CASE WHEN {f.where} THEN {{'figure': '{f.key}', 'v': CAST({f.value} AS DOUBLE)}} END"
        for f in (*FIGURES, *EXTRA)
    )
    return (
        "SELECT run_id, gpu_index, x.figure AS figure, max(x.v) AS value, arg_max(peak_fraction, x.v) AS peak_fraction,"
        " arg_max(sm_clock_mhz_median, size) AS sm_clock_mhz FROM ("
        "SELECT run_id, gpu_index, peak_fraction, sm_clock_mhz_median, coalesce(n, 0) AS size, "
        f"unnest(list_filter([{cases}], lambda e: e IS NOT NULL)) AS x FROM {source} WHERE {TRUSTED}) "
        "WHERE x.v IS NOT NULL GROUP BY run_id, gpu_index, x.figure"
    )


FIGURES_DDL = """CREATE TABLE IF NOT EXISTS figures (
    run_id UUID NOT NULL, gpu_index INTEGER, figure VARCHAR NOT NULL, value DOUBLE NOT NULL,
    peak_fraction DOUBLE, sm_clock_mhz INTEGER)"""

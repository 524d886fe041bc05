"""The figures people compare: one best value per device per run for each, kept in the ``figures`` table.

A figure is the best value a device reached in one run for a kind of result (the published table also takes the
best over sizes and batches), with that result's fraction of the datasheet peak and the SM clock during the
largest case. The store computes them just after it stores a run (``Store.settle`` waits for them), so
comparisons, health and version checks read a few rows per run instead of every result. Which results make which
figure is data, the ``figure_definitions`` table, joined against the new results: one small join instead of a
condition per figure, whose planning alone cost the writer more than the rest of the query (about 7 against 4 ms
per commit). The health figures' rows come from ``schemas.health_figures``, where the agent's ``check`` reads the
same definitions to pick the same results in Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from schemas.health_figures import HEALTH_FIGURES, TRUSTABLE_FLAGS, HealthFigure
from schemas.labels import IMPLEMENTATIONS, PER_WATT_SUFFIX, PER_WATT_UNITS

#: Results that may become a figure: ok, and not flagged as a measurement error, wrong numerics or a starved window,
#: nor with a flag this collector does not know (``schemas.health_figures.TRUSTABLE_FLAGS``, which the agent's own
#: verdicts apply too: one list).
TRUSTED = (
    "status = 'ok' AND list_has_all(["
    + ", ".join(f"'{f}'" for f in sorted(TRUSTABLE_FLAGS))
    + "], coalesce(flags, []))"
)
#: The params a figure may require (equal), besides its benchmark.
MATCHED = ("dtype", "op", "direction", "pinned", "block", "mode", "model", "phase", "batch", "n", "implementation",
           "attn_implementation")  # fmt: skip
#: What a result that does not say is: every result stored before ``implementation`` was, was transformers'.
UNSAID = {"implementation": "'transformers'"}


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    unit: str
    benchmark: str
    #: The metric whose best is the figure; ``copy_fraction``: GB/s over the best copy of the same run and GPU
    value: Literal["tflops", "gbps", "tokens_per_s", "mfu", "peak_fraction", "copy_fraction", "per_watt"]
    digits: int = 1
    scale: float = 1.0  # the metric times this (MFU as a percentage)
    dtype: str | None = None
    dtype_prefix: str | None = None  # any dtype starting with this (the FP8 formats)
    op: str | None = None
    direction: str | None = None
    pinned: bool | None = None
    block: str | None = None
    mode: str | None = None
    model: str | None = None
    phase: str | None = None
    batch: int | None = None
    n: int | None = None  # a product's size (matmul's n)
    implementation: str | None = None
    attn_implementation: str | None = None


def _health(figure: HealthFigure) -> Figure:
    """A health figure's definition, from the one table both sides read (its ``match`` names ``MATCHED`` params)."""
    unknown = set(figure.match) - set(MATCHED)
    if unknown:
        raise ValueError(f"health figure {figure.key!r} matches {sorted(unknown)}; a figure may match {MATCHED}")
    return Figure(figure.key, figure.label, figure.unit, figure.benchmark, figure.metric, figure.digits,
                  **figure.match)  # type: ignore[arg-type]  # fmt: skip


def _or_health(figure: Figure) -> Figure:
    """``figure``, or the health figure of its key: where a table row is a health figure, that table defines it."""
    return _health(HEALTH_FIGURES[figure.key]) if figure.key in HEALTH_FIGURES else figure


def _layers() -> list[Figure]:
    """Each block's fwd and fwd+bwd TFLOPS with SDPA (the agent's default: the keys the published table's rows map
    to), then with eager attention (``--attn eager``: what the notebook method measured), never one figure of both.
    The plain-torch BERT layer is the same figure as transformers' (bert_torch.py: the same computation)."""
    out = []
    for suffix, attn, how in (("", "sdpa", ""), ("_eager", "eager", ", eager attention")):
        for key, label, block in (
            ("bert", "BERT layer", "bert_layer"),
            ("gpt2", "GPT-2 block", "gpt2_block"),
            ("t5_encoder", "T5 encoder", "t5_encoder_block"),
            ("t5_decoder", "T5 decoder", "t5_decoder_block"),
        ):
            for mode_key, mode in (("fwd", "fwd"), ("fwdbwd", "fwd+bwd")):
                figure = Figure(f"{key}_{mode_key}{suffix}", f"{label} {mode}{how}", "TFLOPS", "layer", "tflops",
                                block=block, mode=mode, dtype="fp16", attn_implementation=attn)  # fmt: skip
                out.append(_or_health(figure))
    return out


def _llm(key: str, label: str, model: str, implementation: str, suffix: str, whose: str) -> list[Figure]:
    def fig(name: str, what: str, unit: str, value: str, digits: int, scale: float = 1.0, **match: Any) -> Figure:
        return Figure(f"{key}_{name}{suffix}", f"{label} {what}{whose}", unit, "inference", value, digits,  # type: ignore[arg-type]
                      scale, model=model, implementation=implementation, attn_implementation="sdpa",
                      **match)  # fmt: skip

    return [
        fig("prefill_b1", "prefill b=1", "tokens/s", "tokens_per_s", 0, phase="prefill", batch=1),
        fig("prefill", "prefill", "TFLOPS", "tflops", 1, phase="prefill"),
        *(fig(f"decode_b{b}", f"decode b={b}", "tokens/s", "tokens_per_s", 0, phase="decode", batch=b)
          for b in (1, 32)),
        *(fig(f"decode_b{b}_bw", f"decode b={b}", "% of memory bandwidth", "peak_fraction", 1, 100.0, phase="decode",
              batch=b) for b in (1, 32)),
        *(fig(f"decode_b{b}_copy", f"decode b={b}", "% of measured copy", "copy_fraction", 1, 100.0, phase="decode",
              batch=b) for b in (1, 32)),
    ]  # fmt: skip


def _inference(key: str, label: str, model: str) -> list[Figure]:
    """One model's LLM rows, for transformers' model (the keys without a suffix) and then the lean plain-torch one
    (``_torch``), each with SDPA: prefill tokens/s at batch 1 and TFLOPS at its best cell; decode tokens/s, its
    fraction of the datasheet memory bandwidth (the result's ``peak_fraction``) and of the best copy the same run
    measured on the same GPU (``copy_fraction``) at batch 1 and 32."""
    return [
        *_llm(key, label, model, "transformers", "", ""),
        *_llm(key, label, model, "torch", "_torch", f", {IMPLEMENTATIONS['torch']}"),
    ]


#: In the order of the cross-card table's measured rows (the published table's, then flopfleet's extras).
FIGURES: tuple[Figure, ...] = (
    Figure("matmul_fp32", "FP32 matmul", "TFLOPS", "matmul", "tflops", dtype="fp32"),
    Figure("matmul_tf32", "TF32 matmul", "TFLOPS", "matmul", "tflops", dtype="tf32"),
    Figure("matmul_fp16", "FP16 matmul", "TFLOPS", "matmul", "tflops", dtype="fp16"),
    _health(HEALTH_FIGURES["matmul_bf16"]),
    Figure("matmul_fp8", "FP8 matmul", "TFLOPS", "matmul", "tflops", dtype_prefix="fp8"),
    Figure("mamf_bf16", "Max achievable BF16 matmul", "TFLOPS", "mamf", "tflops", dtype="bf16"),
    Figure("vector", "Vector a*1.2", "TFLOPS", "bandwidth", "tflops", 3, op="scale"),
    Figure("bw_scale", "Memory a*1.2", "GB/s", "bandwidth", "gbps", 0, op="scale"),
    Figure("bw_copy", "Memory copy", "GB/s", "bandwidth", "gbps", 0, op="copy"),
    Figure("bw_triad", "Memory triad", "GB/s", "bandwidth", "gbps", 0, op="triad"),
    _health(HEALTH_FIGURES["h2d"]),
    Figure("d2h", "Device to host (pinned)", "GB/s", "transfer", "gbps", direction="d2h", pinned=True),
    *_layers(),
    Figure("train_bert_tokens", "BERT-large training", "tokens/s", "training", "tokens_per_s", 0, model="bert-large"),
    Figure("train_bert_mfu", "BERT-large training MFU", "%", "training", "mfu", 1, 100.0, model="bert-large"),
    Figure("train_gpt2_tokens", "GPT-2-medium training", "tokens/s", "training", "tokens_per_s", 0,
           model="gpt2-medium"),
    Figure("train_gpt2_mfu", "GPT-2-medium training MFU", "%", "training", "mfu", 1, 100.0, model="gpt2-medium"),
    *_inference("llama3_8b", "Llama-3-8B", "llama-3-8b"),
    *_inference("llama32_3b", "Llama-3.2-3B", "llama-3.2-3b"),
)  # fmt: skip
#: Not rows of the table, but read by health and version checks: the health figures the table has no row for.
EXTRA: tuple[Figure, ...] = tuple(_health(f) for f in HEALTH_FIGURES.values() if f.key not in {g.key for g in FIGURES})


def _per_watt(figure: Figure) -> Figure:
    """A figure's twin per watt: its value over the board's mean power while its best result was measured (that
    result's ``power_w``); computed beside the figure, never matched against results itself."""
    unit = PER_WATT_UNITS[figure.unit]
    return Figure(figure.key + PER_WATT_SUFFIX, f"{figure.label} per watt", unit, figure.benchmark, "per_watt", 3)


#: Every figure in TFLOPS, GB/s or tokens/s has a twin per watt, in the same order.
PER_WATT: tuple[Figure, ...] = tuple(_per_watt(f) for f in (*FIGURES, *EXTRA) if f.unit in PER_WATT_UNITS)
BY_KEY = {f.key: f for f in (*FIGURES, *EXTRA, *PER_WATT)}

#: Replaced at every start, as its rows are: a database from before a column was added gets it.
DEFINITIONS_DDL = """CREATE OR REPLACE TABLE figure_definitions (
    figure VARCHAR PRIMARY KEY, label VARCHAR NOT NULL, unit VARCHAR NOT NULL, benchmark VARCHAR NOT NULL,
    dtype VARCHAR, dtype_prefix VARCHAR, op VARCHAR, direction VARCHAR, pinned BOOLEAN, block VARCHAR, mode VARCHAR,
    model VARCHAR, phase VARCHAR, batch INTEGER, n INTEGER, implementation VARCHAR, attn_implementation VARCHAR,
    value VARCHAR NOT NULL, scale DOUBLE NOT NULL)"""


#: ``figure_definitions``' columns, each from the Figure field of the same name (``figure`` from ``key``).
DEFINITION_COLUMNS = ("figure", "label", "unit", "benchmark", "dtype", "dtype_prefix", *MATCHED[1:], "value", "scale")


def definitions_insert() -> tuple[str, list[tuple[Any, ...]]]:
    """The INSERT of ``figure_definitions``' rows, and the rows (the store rewrites them at every start)."""
    fields = ["key" if c == "figure" else c for c in DEFINITION_COLUMNS]
    rows = [tuple(getattr(f, name) for name in fields) for f in (*FIGURES, *EXTRA)]
    placeholders = ", ".join("?" * len(DEFINITION_COLUMNS))
    return f"INSERT INTO figure_definitions ({', '.join(DEFINITION_COLUMNS)}) VALUES ({placeholders})", rows


#: The results ``copy_fraction`` divides by: a run's trusted device-to-device copies on the same GPU (its own
#: ``bw_copy`` figure is the best of them).
COPY = f"benchmark = 'bandwidth' AND op = 'copy' AND {TRUSTED}"
#: The best of them beside each of a run's results.
RUN_COPY = f"max(CASE WHEN {COPY} THEN gbps END) OVER (PARTITION BY run_id, gpu_index)"


def run_copies(source: str, of: str) -> str:
    """The best of them per run and GPU (``copy_gbps``), of the runs with a result of ``source`` that meets ``of``:
    a join for the few results that need it, not a window over every result."""
    return (f"SELECT run_id, gpu_index, max(gbps) AS copy_gbps FROM {source} WHERE {COPY} AND run_id IN "
            f"(SELECT run_id FROM {source} WHERE {of}) GROUP BY run_id, gpu_index")  # fmt: skip


def compute_sql(source: str) -> str:
    """SELECT of every figure of the results in ``source`` (a table with the results' columns): each trusted result
    joined to the definitions it meets (a definition's NULL params match anything), then each figure's twin per
    watt where its best result read the board's power."""
    matched = " AND ".join(f"(d.{m} IS NULL OR coalesce(r.{m}, {UNSAID[m]}) = d.{m})" if m in UNSAID
                           else f"(d.{m} IS NULL OR r.{m} = d.{m})" for m in MATCHED)  # fmt: skip
    best = (
        "SELECT run_id, gpu_index, figure, max(v) AS value, arg_max(peak_fraction, v) AS peak_fraction,"
        " arg_max(sm_clock_mhz_median, size) AS sm_clock_mhz, arg_max_null(power_w, v) AS power_w FROM ("
        "SELECT r.run_id, r.gpu_index, d.figure, r.peak_fraction, r.sm_clock_mhz_median, coalesce(r.n, 0) AS size,"
        " r.power_w,"
        " CAST(CASE d.value WHEN 'tflops' THEN r.tflops WHEN 'gbps' THEN r.gbps WHEN 'tokens_per_s' THEN r.tokens_per_s"
        " WHEN 'mfu' THEN r.mfu WHEN 'peak_fraction' THEN r.peak_fraction WHEN 'copy_fraction' THEN r.gbps / r.run_copy"
        " END * d.scale AS DOUBLE) AS v"
        f" FROM (SELECT *, {RUN_COPY} AS run_copy FROM {source} WHERE {TRUSTED}) r JOIN figure_definitions d"
        f" ON r.benchmark = d.benchmark AND {matched}"
        " AND (d.dtype_prefix IS NULL OR starts_with(r.dtype, d.dtype_prefix))"
        ") WHERE v IS NOT NULL GROUP BY run_id, gpu_index, figure"
    )
    # arg_max_null: the power of the best result itself, NULL where it read none (arg_max would skip it and pair
    # the figure with the power of a lesser result).
    twins = ", ".join(f"('{f.key.removesuffix(PER_WATT_SUFFIX)}', '{f.key}')" for f in PER_WATT)
    return (
        f"WITH best AS ({best}) SELECT run_id, gpu_index, figure, value, peak_fraction, sm_clock_mhz FROM best"
        " UNION ALL SELECT b.run_id, b.gpu_index, w.figure, b.value / b.power_w, NULL, b.sm_clock_mhz"
        f" FROM best b JOIN (VALUES {twins}) w(base, figure) ON b.figure = w.base WHERE b.power_w > 0"
    )


FIGURES_DDL = """CREATE TABLE IF NOT EXISTS figures (
    run_id UUID NOT NULL, gpu_index INTEGER, figure VARCHAR NOT NULL, value DOUBLE NOT NULL,
    peak_fraction DOUBLE, sm_clock_mhz INTEGER)"""

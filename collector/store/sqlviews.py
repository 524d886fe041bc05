"""The documented views SQL users query (docs/reports-and-sql.md); their columns, and which results each holds
(trusted ones, or every one), are a stable interface."""

from __future__ import annotations

from collections.abc import Callable

from schemas.health_figures import UNTRUSTED_FLAGS
from schemas.labels import HEADLINES, Headline

from .figures import TRUSTED, run_copies
from .tables import COUNTERS

#: The GPU model as compared: its name and memory size (an 80 GB part is not a 40 GB one).
MODEL = "g.name || ' ' || CAST(round(g.memory_bytes / 1073741824.0) AS INTEGER) || ' GiB'"
#: A card column: the model and its power limit, so a 350 W part is never averaged with a 700 W one. CPU runs are
#: one card per CPU model.
CARD = f"""CASE WHEN g.name IS NULL THEN 'CPU: ' || coalesce(ru.cpu_model, ru.hostname)
     ELSE {MODEL} || coalesce(' · ' || CAST(round(g.power_limit_w) AS INTEGER) || ' W', '') END"""


def devices_sql(runs: str = "runs", gpus: str = "gpus") -> str:
    """One row per device in each run of ``runs`` (a table or a parenthesised query), its GPU from ``gpus``."""
    return f"""
        SELECT ru.run_id, g.gpu_index, {CARD} AS card,
               CASE WHEN g.name IS NULL THEN 'CPU: ' || coalesce(ru.cpu_model, ru.hostname) ELSE {MODEL} END
                   AS gpu_model,
               g.name AS gpu_name, coalesce(g.uuid, ru.hostname) AS device_id, ru.hostname, ru.started_at, ru.source,
               ru.torch, ru.cuda, ru.driver, g.power_limit_w, g.power_limit_default_w, g.pcie_gen, g.pcie_gen_max,
               g.pcie_width, g.pcie_width_max, g.ecc_enabled, g.other_processes, g.sm_clock_max_mhz,
               g.throttle_reasons_seen, g.temperature_end_c
        FROM {runs} ru LEFT JOIN {gpus} g ON g.run_id = ru.run_id
    """


#: What ``result_facts`` labels each result with, read from the rows the store keeps per device of each run
#: (``device_runs``: its card, GPU, the run's fields), joined by the GPU index the result names (``labels``): each
#: device by its own, and the run's first device once more for the results that name none (collectives,
#: data-parallel training: measured on that card), unless it names none itself (a CPU run's one row).
LABELS = """SELECT *, gpu_index AS labels FROM device_runs
    UNION ALL SELECT *, NULL FROM device_runs WHERE first_in_run AND gpu_index IS NOT NULL"""


def _headline_case(then: Callable[[Headline], str | None]) -> str:
    """A CASE over a result's columns that picks its headline kind (``schemas.labels.HEADLINES``: the first metric it
    has) and gives ``then`` of it (NULL where that is None)."""
    whens = []
    for h in HEADLINES:
        when = f"{h.metric} IS NOT NULL" + "".join(f" AND benchmark <> '{b}'" for b in h.not_for)
        whens.append(f"WHEN {when} THEN {then(h) or 'NULL'}")
    return "CASE " + " ".join(whens) + " END"


def _quoted(text: str | None) -> str | None:
    return f"'{text}'" if text is not None else None


def _counters_sql() -> str:
    """Each counter before and after the run; for counts, what the run added (``_during``)."""
    out = []
    for name, sql in COUNTERS:
        out += [f"g.{name}_before", f"g.{name}_after"]
        if sql in ("BIGINT", "DOUBLE") and name != "energy_j":
            out.append(f"g.{name}_after - g.{name}_before AS {name}_during")
    return ", ".join(out)


VIEWS: dict[str, str] = {
    # One row per device in each run: where a card's label comes from, without scanning results.
    "devices": devices_sql(),
    # Every result with its run and GPU beside it (``LABELS``), and whether it counts (``trusted``: the rule that
    # makes figures, ``figures.TRUSTED``): the base of the other views.
    "result_facts": f"""
        SELECT r.*, {TRUSTED} AS trusted, d.card, d.gpu_model, d.gpu_name, d.device_id AS gpu_uuid, d.power_limit_w,
               d.power_limit_default_w, d.pcie_gen, d.pcie_gen_max, d.pcie_width, d.pcie_width_max, d.hostname,
               d.started_at, d.suite, d.device, d.source, d.torch, d.cuda, d.driver, d.transformers, d.agent_version
        FROM results r JOIN ({LABELS}) d ON d.run_id = r.run_id AND d.labels IS NOT DISTINCT FROM r.gpu_index
    """,
    # One row per card: how many devices measure it now (by their latest run) and how many runs did, and when;
    # read from the summaries the store keeps at ingest, so it costs what it shows.
    "cards": """
        SELECT c.card, any_value(d.gpu_model) AS gpu_model, any_value(d.gpu_name) AS gpu_name,
               count(d.device_id) AS devices, any_value(c.runs) AS runs, any_value(c.first_run) AS first_run,
               any_value(c.last_run) AS last_run
        FROM card_runs c LEFT JOIN device_latest d ON d.card = c.card GROUP BY c.card
    """,
    "matmul": """
        SELECT run_id, card, gpu_uuid, hostname, started_at, dtype, m, n, k, tflops, peak_fraction, rel_error,
               median_s, cv, timing_method, status, reason, flags, torch, cuda, driver
        FROM result_facts WHERE trusted AND benchmark = 'matmul'
    """,
    "mamf": """
        SELECT run_id, card, gpu_uuid, hostname, started_at, dtype, tflops,
               CAST(json_extract(metrics, '$.sustained_tflops') AS DOUBLE) AS sustained_tflops, peak_fraction,
               CAST(json_extract(metrics, '$.m') AS BIGINT) AS best_m,
               CAST(json_extract(metrics, '$.n') AS BIGINT) AS best_n,
               CAST(json_extract(metrics, '$.k') AS BIGINT) AS best_k, status, reason, flags
        FROM result_facts WHERE trusted AND benchmark = 'mamf'
    """,
    "bandwidth": """
        SELECT run_id, card, gpu_uuid, hostname, started_at, op, elements, bytes_per_call, gbps, tflops,
               peak_fraction, median_s, cv, timing_method, status, reason, flags
        FROM (SELECT *, CAST(json_extract(params, '$.bytes_per_call') AS BIGINT) AS bytes_per_call
              FROM result_facts WHERE trusted AND benchmark = 'bandwidth')
    """,
    "transfers": """
        SELECT run_id, card, gpu_uuid, hostname, started_at, direction, pinned, bytes, gbps, peak_fraction,
               pcie_gen, pcie_width, pcie_gen_max, pcie_width_max, median_s, status, reason, flags
        FROM result_facts WHERE trusted AND benchmark = 'transfer'
    """,
    "layers": """
        SELECT run_id, card, gpu_uuid, hostname, started_at, model, block, dtype, mode, batch, seq_len,
               attn_implementation, coalesce(implementation, 'transformers') AS implementation, tflops, peak_fraction,
               median_s, cv, timing_method, status, reason, flags, torch, transformers
        FROM result_facts WHERE trusted AND benchmark = 'layer'
    """,
    "training": """
        SELECT run_id, card, gpu_uuid, hostname, started_at, name, model, batch, seq_len, world_size,
               samples_per_s, tokens_per_s, tflops, mfu, scaling_efficiency, peak_memory_bytes, attn_implementation,
               median_s, status, reason, flags, torch
        FROM result_facts WHERE trusted AND benchmark = 'training'
    """,
    # LLM prefill and decode, by implementation (transformers' model, or the lean plain-torch one and its kernels):
    # bytes_per_step, bandwidth_fraction (of the datasheet memory bandwidth) and copy_fraction (of copy_gbps, the
    # best copy the same run measured on the same GPU) for decode, peak_fraction of the dtype's dense TFLOPS for
    # prefill.
    "inference": f"""
        SELECT run_id, card, gpu_uuid, hostname, started_at, model, phase, batch, seq_len, dtype, attn_implementation,
               coalesce(implementation, 'transformers') AS implementation,
               json_extract_string(params, '$.kernels') AS kernels, tokens_per_s, tflops,
               CAST(json_extract(metrics, '$.ttft_s') AS DOUBLE) AS ttft_s,
               CAST(json_extract(metrics, '$.tpot_s') AS DOUBLE) AS tpot_s,
               CAST(json_extract(metrics, '$.tpot_p90_s') AS DOUBLE) AS tpot_p90_s,
               gbps, CASE WHEN phase = 'decode' THEN peak_fraction END AS bandwidth_fraction, copy_gbps,
               CASE WHEN phase = 'decode' THEN gbps / copy_gbps END AS copy_fraction, peak_fraction,
               CAST(json_extract(params, '$.bytes_per_call') AS BIGINT) AS bytes_per_step,
               CAST(json_extract(params, '$.weight_bytes') AS BIGINT) AS weight_bytes,
               CAST(json_extract(params, '$.kv_cache_bytes') AS BIGINT) AS kv_cache_bytes,
               CAST(json_extract(params, '$.n_params') AS BIGINT) AS n_params,
               CAST(json_extract(params, '$.flops_per_call') AS DOUBLE) AS flops_per_call, peak_memory_bytes,
               median_s, cv, timing_method, calls_per_repeat, status, reason, flags, torch, cuda, transformers
        FROM (SELECT f.*, c.copy_gbps FROM result_facts f
              LEFT JOIN ({run_copies("results", "benchmark = 'inference'")}) c
                  ON c.run_id = f.run_id AND c.gpu_index IS NOT DISTINCT FROM f.gpu_index
              WHERE f.trusted AND f.benchmark = 'inference')
    """,
    "collectives": """
        SELECT run_id, card, hostname, started_at, op, json_extract_string(params, '$.backend') AS backend, dtype,
               bytes, world_size, nodes, algbw_gbps, busbw_gbps, rel_error, median_s, cv, status, reason, flags,
               torch, cuda, driver
        FROM result_facts WHERE trusted AND benchmark = 'collective'
    """,
    # Which runs each kind of data covers: with retention, raw rows of old runs are in the Parquet archive.
    "coverage": """
        SELECT 'raw results (results, gpu_samples and the views over them)' AS data, count(*) AS runs,
               min(started_at) AS first_run, max(started_at) AS last_run
        FROM runs ANTI JOIN archived_runs USING (run_id)
        UNION ALL
        SELECT 'archived to Parquet (archived_runs says where)', count(*), min(started_at), max(started_at)
        FROM runs SEMI JOIN archived_runs USING (run_id)
        UNION ALL
        SELECT 'figures and summaries (figures, latest_*, device_runs, cards, health)', count(*), min(started_at),
               max(started_at) FROM runs
    """,
    # Each GPU's error counters in each run: before, after, and what the run added; NULL where NVML does not say.
    "gpu_counters": f"""
        SELECT g.run_id, d.card, d.device_id AS gpu_uuid, d.hostname, d.started_at, g.gpu_index, {_counters_sql()},
               g.energy_j_after - g.energy_j_before AS energy_j_during,
               CAST(json_array_length(g.xid_events) AS INTEGER) AS xid_count, g.xid_events
        FROM gpus g JOIN device_runs d ON d.run_id = g.run_id AND d.gpu_index = g.gpu_index
    """,
    # Every GPU result whose board power was read (its energy counter over the repeats, agent/machine/energy.py): its
    # headline (schemas.labels.HEADLINES), the power, and the headline per watt (TFLOPS/W, GB/s/W, tokens/J).
    "per_watt": f"""
        SELECT run_id, card, gpu_uuid, hostname, started_at, benchmark, name, dtype, mode, model, block, op,
               direction, phase, batch, seq_len, m, n, k, figure, unit, power_w, figure / power_w AS per_watt,
               per_watt_unit, energy_j, energy_span_s, median_s, power_w * median_s AS joules_per_call,
               sm_clock_mhz_median, power_limit_w, status, flags
        FROM (SELECT *, {_headline_case(lambda h: h.metric)} AS figure,
                     {_headline_case(lambda h: _quoted(h.unit))} AS unit,
                     {_headline_case(lambda h: _quoted(h.per_watt_unit))} AS per_watt_unit
              FROM result_facts WHERE trusted AND power_w > 0)
        WHERE per_watt_unit IS NOT NULL
    """,
    # Published figures imported with `import-reference`, labelled with where they come from.
    "reference": """
        SELECT f.card, f.figure AS metric, f.value, f.unit, b.name AS source,
               json_extract_string(b.bundle, '$.source.description') AS note, b.imported_at
        FROM baseline_figures f JOIN baselines b ON b.id = f.baseline_id WHERE f.kind = 'published'
    """,
}

#: The views of the results that count, as the report and pages count them (``result_facts.trusted``): a query over
#: them gives the report's figure, not a starved window's or a wrong product's.
FIGURE_VIEWS = ("matmul", "mamf", "bandwidth", "transfers", "layers", "training", "inference", "collectives",
                "per_watt")  # fmt: skip
#: The views of every result, trusted or not, each with its ``status``, ``flags`` and ``trusted``.
EVERY_RESULT = ("result_facts", "all_results")
#: The rule as people read it (the /sql page, ``sql --help``; docs/reports-and-sql.md says the same).
TRUSTED_WORDS = f"status ok and none of the flags {', '.join(sorted(UNTRUSTED_FLAGS))}"

#: What one row of each view SQL users query is, as the /sql page lists them beside their columns (the table in
#: docs/reports-and-sql.md says the same); the archive's views (``store/archive``) too. A test keeps it equal to the
#: views created.
ABOUT: dict[str, str] = {
    "cards": "card (GPU model + memory + power limit, or CPU): devices, runs, first and last run",
    "devices": "GPU (or CPU) in a run, with its card, GPU model, hostname, software and state",
    "result_facts": "result, trusted or not (trusted says which, flags why), with its run's and GPU's columns",
    "matmul": "trusted matmul result: card, hostname, dtype, shape, TFLOPS, fraction of the datasheet peak",
    "mamf": "trusted maximum achievable matmul (shape search) result: best TFLOPS and its shape",
    "bandwidth": "trusted device-memory result (scale a*1.2, copy, triad): GB/s, bytes counted",
    "transfers": "trusted host↔device transfer result: direction, pinned, bytes, GB/s, PCIe link",
    "layers": "trusted transformer layer result: model, block, dtype, mode, batch, seq_len, attention, TFLOPS",
    "training": "trusted training step: batch, world size, samples/s, tokens/s, TFLOPS, MFU, scaling efficiency",
    "inference": "trusted LLM prefill or decode result: tokens/s, TTFT, time per output token, GB/s, "
    "bandwidth_fraction, copy_fraction",
    "collectives": "trusted collective result: op, backend, dtype, bytes, world size, nodes, algbw, busbw",
    "coverage": "kind of data (raw, archived, figures and summaries): how many runs it covers, first and last",
    "gpu_counters": "GPU in a run: each error counter before and after, what the run added (_during), XID events",
    "per_watt": "trusted GPU result with the board's mean power read: headline, power_w, per_watt (TFLOPS/W, GB/s/W, "
    "tokens/J), joules per call",
    "reference": "published figure imported with import-reference: card, metric, value, unit, source",
    "all_results": "result of every run, live or archived to Parquet, trusted or not (results' columns and "
    "trusted), each run once",
    "all_gpu_samples": "GPU sample of every run, live or archived (gpu_samples' columns), each run once",
}
#: The raw tables under the views, as the /sql page lists them after the views.
UNDER: dict[str, str] = {
    "runs": "run as received: hostname, suite, device, software versions, the run's JSON (gzip) in payload",
    "gpus": "GPU in a run: its facts, state and error counters before and after",
    "results": "result: typed columns plus the full params and metrics JSON",
    "gpu_samples": "NVML reading taken while a run measured (clocks, power, temperature, throttling)",
}

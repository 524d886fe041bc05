"""The documented views SQL users query (README "Querying with SQL"); their columns are a stable interface."""

from __future__ import annotations

#: How a card is named in comparisons: the GPU model and its memory, or the CPU for CPU runs.
CARD = """CASE WHEN r.gpu_index IS NULL THEN 'CPU: ' || coalesce(ru.cpu_model, ru.hostname)
     ELSE g.name || ' ' || CAST(round(g.memory_bytes / 1073741824.0) AS INTEGER) || ' GiB' END"""

VIEWS: dict[str, str] = {
    # Every result with its run and GPU beside it: the base of the other views.
    "result_facts": f"""
        SELECT r.*, {CARD} AS card, g.name AS gpu_name, g.uuid AS gpu_uuid, g.memory_bytes AS gpu_memory_bytes,
               g.power_limit_w, g.power_limit_default_w, g.pcie_gen, g.pcie_gen_max, g.pcie_width,
               g.pcie_width_max, ru.hostname, ru.started_at, ru.suite, ru.device, ru.source, ru.torch, ru.cuda,
               ru.driver, ru.transformers, ru.agent_version
        FROM results r
        JOIN runs ru USING (run_id)
        LEFT JOIN gpus g ON g.run_id = r.run_id AND g.gpu_index = r.gpu_index
    """,
    # One row per card (GPU model and memory, or CPU model): how many GPUs and runs measured it.
    "cards": """
        SELECT card, any_value(gpu_name) AS gpu_name, count(DISTINCT coalesce(gpu_uuid, hostname)) AS devices,
               count(DISTINCT run_id) AS runs, min(started_at) AS first_run, max(started_at) AS last_run
        FROM result_facts GROUP BY card
    """,
    "matmul": """
        SELECT run_id, card, gpu_uuid, hostname, started_at, dtype, m, n, k, tflops, peak_fraction, rel_error,
               median_s, cv, timing_method, status, reason, flags, torch, cuda, driver
        FROM result_facts WHERE benchmark = 'matmul'
    """,
    "mamf": """
        SELECT run_id, card, gpu_uuid, hostname, started_at, dtype, tflops, peak_fraction,
               CAST(json_extract(metrics, '$.m') AS BIGINT) AS best_m,
               CAST(json_extract(metrics, '$.n') AS BIGINT) AS best_n,
               CAST(json_extract(metrics, '$.k') AS BIGINT) AS best_k, status, reason, flags
        FROM result_facts WHERE benchmark = 'mamf'
    """,
    "bandwidth": """
        SELECT run_id, card, gpu_uuid, hostname, started_at, op, elements, bytes_per_call, gbps, tflops,
               peak_fraction, median_s, cv, timing_method, status, reason, flags
        FROM (SELECT *, CAST(json_extract(params, '$.bytes_per_call') AS BIGINT) AS bytes_per_call
              FROM result_facts WHERE benchmark = 'bandwidth')
    """,
    "transfers": """
        SELECT run_id, card, gpu_uuid, hostname, started_at, direction, pinned, bytes, gbps, peak_fraction,
               pcie_gen, pcie_width, pcie_gen_max, pcie_width_max, median_s, status, reason, flags
        FROM result_facts WHERE benchmark = 'transfer'
    """,
    "layers": """
        SELECT run_id, card, gpu_uuid, hostname, started_at, model, block, dtype, mode, batch, seq_len,
               attn_implementation, tflops, peak_fraction, median_s, cv, timing_method, status, reason, flags,
               torch, transformers
        FROM result_facts WHERE benchmark = 'layer'
    """,
    "training": """
        SELECT run_id, card, gpu_uuid, hostname, started_at, model, batch, seq_len, samples_per_s, tokens_per_s,
               tflops, mfu, peak_memory_bytes, attn_implementation, median_s, status, reason, flags, torch
        FROM result_facts WHERE benchmark = 'training'
    """,
    "collectives": """
        SELECT run_id, hostname, started_at, json_extract_string(params, '$.op') AS op, world_size, bytes,
               CAST(json_extract(metrics, '$.algbw_gbps') AS DOUBLE) AS algbw_gbps, busbw_gbps, status, reason
        FROM result_facts WHERE benchmark = 'collective'
    """,
}

"""Summaries kept at ingest, so that a page reads rows in proportion to what it shows, not to the history kept.

The store refreshes them in the same transaction as the figures of the runs just stored (``refresh_sql``), so they
are never ahead of or behind the raw tables, and a crash loses neither: runs without a row in ``device_runs``
(every run has one per device, or one for its CPU) are refreshed when the collector starts again. Each "latest"
table keeps, per key, the row of the newest run (``started_at``) that measured it: a GPU's latest value of a
figure, its latest point of a chart, a machine's latest multi-GPU figures. A refresh merges the new candidates
with the rows they may replace (only those keys), so its cost follows the runs stored, not the rows kept.
"""

from __future__ import annotations

from schemas.health_figures import HEALTH_FIGURES
from schemas.labels import IMPLEMENTATIONS

from .figures import TRUSTED
from .sqlviews import devices_sql

#: Raw tables the summaries are derived from, in the order a refresh reads them.
SOURCES = ("runs", "gpus", "results")

DDL: dict[str, str] = {
    # One row per stored run: what the run lists show (written with the run itself).
    # ``starved``: its results flagged so (measured on a busy host: no figure); NULL for runs stored before it was.
    "run_summaries": """CREATE TABLE IF NOT EXISTS run_summaries (
        run_id UUID NOT NULL, results INTEGER NOT NULL, gpu_names VARCHAR[] NOT NULL, starved INTEGER)""",
    # Each device's latest run: its card, state and software then; how many runs measured it and since when.
    "device_latest": """CREATE TABLE IF NOT EXISTS device_latest AS
        SELECT *, CAST(0 AS BIGINT) AS runs, started_at AS first_run FROM ({devices}) WHERE false""",
    # Every run of every device with its key figures and error counters (the GPU page's history), and the run's
    # fields and whether it is the run's first device (what ``result_facts`` labels results with: ``sqlviews.LABELS``).
    "device_runs": """CREATE TABLE IF NOT EXISTS device_runs AS
        SELECT d.*, CAST(NULL AS DOUBLE) AS matmul, CAST(NULL AS DOUBLE) AS memory, CAST(NULL AS DOUBLE) AS bert,
               {counters}, {run_fields}, CAST(NULL AS BOOLEAN) AS first_in_run
        FROM ({devices}) d, runs ru WHERE false""",
    # Runs per card, and the first and last of them.
    "card_runs": """CREATE TABLE IF NOT EXISTS card_runs (
        card VARCHAR NOT NULL, runs BIGINT NOT NULL, first_run TIMESTAMPTZ, last_run TIMESTAMPTZ)""",
    # Each device's latest value of each figure (from the newest run that measured it).
    "latest_figures": """CREATE TABLE IF NOT EXISTS latest_figures (
        device_id VARCHAR NOT NULL, figure VARCHAR NOT NULL, card VARCHAR NOT NULL, gpu_model VARCHAR NOT NULL,
        gpu_name VARCHAR, source VARCHAR NOT NULL, run_id UUID NOT NULL, gpu_index INTEGER,
        started_at TIMESTAMPTZ NOT NULL, value DOUBLE NOT NULL, peak_fraction DOUBLE, sm_clock_mhz INTEGER)""",
    # Each device's latest point of each chart line (matmul size, layer batch, bandwidth array size, decode batch).
    "latest_points": """CREATE TABLE IF NOT EXISTS latest_points (
        device_id VARCHAR NOT NULL, card VARCHAR NOT NULL, chart VARCHAR NOT NULL, series VARCHAR NOT NULL,
        x DOUBLE NOT NULL, value DOUBLE NOT NULL, started_at TIMESTAMPTZ NOT NULL)""",
    # Each device's latest value of a figure under each software version (torch, CUDA, driver).
    "version_figures": """CREATE TABLE IF NOT EXISTS version_figures (
        gpu_model VARCHAR NOT NULL, figure VARCHAR NOT NULL, torch VARCHAR, cuda VARCHAR, driver VARCHAR,
        device_id VARCHAR NOT NULL, value DOUBLE NOT NULL, first_at TIMESTAMPTZ NOT NULL,
        started_at TIMESTAMPTZ NOT NULL)""",
    # Each agent-measured GPU's last ``HISTORY_KEPT`` measurements of each health figure: the verdicts' own history,
    # confirmation and run-to-run spread (of the suite that measured the newest: ``Reads.health_history``).
    "health_history": """CREATE TABLE IF NOT EXISTS health_history (
        device_id VARCHAR NOT NULL, figure VARCHAR NOT NULL, gpu_model VARCHAR NOT NULL, run_id UUID NOT NULL,
        started_at TIMESTAMPTZ NOT NULL, value DOUBLE NOT NULL, suite VARCHAR)""",
    # Each multi-GPU machine's (host and GPU count) latest collective and data-parallel figures.
    "machine_latest": """CREATE TABLE IF NOT EXISTS machine_latest (
        hostname VARCHAR NOT NULL, world_size INTEGER NOT NULL, run_id UUID NOT NULL, started_at TIMESTAMPTZ NOT NULL,
        card VARCHAR, nodes INTEGER, topology VARCHAR, nvlink_active INTEGER, allreduce_busbw_gbps DOUBLE,
        allreduce_bytes BIGINT, ddp_tokens_per_s DOUBLE, scaling_efficiency DOUBLE)""",
    # Each machine's latest bus bandwidth per collective and message size.
    "machine_points": """CREATE TABLE IF NOT EXISTS machine_points (
        hostname VARCHAR NOT NULL, world_size INTEGER NOT NULL, card VARCHAR, op VARCHAR NOT NULL,
        bytes BIGINT NOT NULL, busbw_gbps DOUBLE NOT NULL, started_at TIMESTAMPTZ NOT NULL)""",
}

GiB = 1 << 30
#: Measurements of each health figure kept per GPU: the confirmation window, the own-history reference and the
#: spread all read from these, so a verdict costs the same after a thousand runs as after twenty.
HISTORY_KEPT = 20
_HEALTH_FIGURES = ", ".join(f"'{f}'" for f in HEALTH_FIGURES)
#: The key figures of a GPU's history.
HISTORY_FIGURES = {"matmul": "matmul_bf16", "memory": "memory", "bert": "bert_fwdbwd"}


#: The error counters the GPU page shows of each run (``device_runs``): (column, SQL type, from the run's row of
#: ``gpus``, ``g``), as ``gpu_counters`` names them.
DEVICE_COUNTERS = (
    ("ecc_uncorrected", "BIGINT", "g.ecc_uncorrected_aggregate_after"),
    ("remapped_uncorrectable", "BIGINT", "g.remapped_rows_uncorrectable_after"),
    ("pcie_replays", "BIGINT", "g.pcie_replays_after - g.pcie_replays_before"),
    ("xid_count", "INTEGER", "CAST(json_array_length(g.xid_events) AS INTEGER)"),
)
#: The run's fields ``result_facts`` shows beside each result that ``device_runs`` keeps beyond the device's own
#: (hostname, start, source, torch, CUDA and driver it has already), from the run's row of ``runs``, ``ru``.
RUN_FIELDS = ("suite", "device", "transformers", "agent_version")
#: Whether a row of ``device_runs`` is its run's first device (the lowest GPU index; a CPU run's one row): the one a
#: result that spans the machine is labelled with.
FIRST_IN_RUN = "gpu_index IS NOT DISTINCT FROM min(gpu_index) OVER (PARTITION BY run_id)"
#: The columns ``device_runs`` gained after it was first kept, which a file kept before them is rebuilt with.
DEVICE_RUNS_ADDED = (*(name for name, _, _ in DEVICE_COUNTERS), *RUN_FIELDS, "first_in_run")
#: Indexes of the summaries: the GPU page finds its GPU's rows of ``device_runs`` through one, whatever the runs
#: kept (an equality lookup; DuckDB scans instead where the same query also orders and limits).
INDEXES = ("CREATE INDEX IF NOT EXISTS device_runs_device ON device_runs (device_id)",)


def ddl() -> list[str]:
    counters = ", ".join(f"CAST(NULL AS {sql}) AS {name}" for name, sql, _ in DEVICE_COUNTERS)
    run_fields = ", ".join(f"ru.{name}" for name in RUN_FIELDS)
    return [*(sql.format(devices=devices_sql(), counters=counters, run_fields=run_fields) for sql in DDL.values()),
            *INDEXES]  # fmt: skip


def device_runs_backfill(have: set[str]) -> list[str]:
    """``device_runs`` for a database kept before it held all its columns (``have``: those it holds), written anew
    with the others (an UPDATE of every row costs several times more: docs/results/collector.md): counters from
    ``gpus`` (none for an archived run, whose rows are in the archive), the run's fields from ``runs``, the first
    device from its own rows; then its index again."""
    added = [(name, expr) for name, _, expr in DEVICE_COUNTERS] + [(name, f"ru.{name}") for name in RUN_FIELDS]
    columns = "".join(f", {expr} AS {name}" for name, expr in added if name not in have)
    first = "" if "first_in_run" in have else f", {FIRST_IN_RUN} AS first_in_run"
    return [
        "DROP INDEX IF EXISTS device_runs_device",
        f"""CREATE TABLE device_runs_kept AS SELECT *{first} FROM (
                SELECT d.*{columns} FROM device_runs d
                LEFT JOIN runs ru ON ru.run_id = d.run_id
                LEFT JOIN gpus g ON g.run_id = d.run_id AND g.gpu_index = d.gpu_index)""",
        "DROP TABLE device_runs",
        "ALTER TABLE device_runs_kept RENAME TO device_runs",
        *INDEXES,
    ]


def _merge(table: str, keys: tuple[str, ...], candidates: str, over: dict[str, str] | None = None) -> list[str]:
    """Replace ``table``'s rows for the keys in ``candidates`` (same columns) by the newest row per key, among the
    candidates and the rows they replace; ``over``: columns that aggregate over all of those rows instead."""
    on = " AND ".join(f"t.{k} IS NOT DISTINCT FROM c.{k}" for k in keys)
    columns = ", ".join(keys)
    newest = "unnest(arg_max(u, u.started_at))"
    if over:
        packed = ", ".join(f"'{name}': {agg}" for name, agg in over.items())
        replaced = ", ".join(f"_over.{name} AS {name}" for name in over)
        select = f"* EXCLUDE (_over) REPLACE ({replaced}) FROM (SELECT {newest}, {{{packed}}} AS _over"
        close = ")"
    else:
        select, close = newest, ""
    return [
        f"CREATE OR REPLACE TEMP TABLE cand_{table} AS {candidates}",
        f"""CREATE OR REPLACE TEMP TABLE merged_{table} AS
            SELECT {select}
            FROM (SELECT * FROM cand_{table} UNION ALL BY NAME
                  SELECT t.* FROM {table} t SEMI JOIN (SELECT DISTINCT {columns} FROM cand_{table}) c ON {on}) u
            GROUP BY {", ".join(f"u.{k}" for k in keys)}{close}""",
        f"DELETE FROM {table} t USING (SELECT DISTINCT {columns} FROM cand_{table}) c WHERE {on}",
        f"INSERT INTO {table} BY NAME SELECT * FROM merged_{table}",
    ]


#: ``run_summaries``' row of each run, in the commit that stores it (from the parsed JSON of the insert).
RUN_SUMMARIES_AT_INSERT = """INSERT INTO run_summaries
    SELECT CAST(run_id AS UUID), len(results), coalesce(list_transform(gpus, lambda g: g.name), []),
           len(list_filter(results, lambda x: list_contains(coalesce(x.flags, []), 'starved'))) FROM parsed"""
#: The same for runs an older collector stored without one.
RUN_SUMMARIES_LATE = """INSERT INTO run_summaries
    SELECT ru.run_id, (SELECT count(*) FROM new_results x WHERE x.run_id = ru.run_id),
           coalesce((SELECT list(g.name ORDER BY g.gpu_index) FROM new_gpus g WHERE g.run_id = ru.run_id), []),
           (SELECT count(*) FROM new_results x WHERE x.run_id = ru.run_id
            AND list_contains(coalesce(x.flags, []), 'starved'))
    FROM new_runs ru ANTI JOIN run_summaries USING (run_id)"""
#: Whether the new runs have multi-GPU results (the machine summaries are skipped when not: most refreshes).
MULTI_GPU_SQL = "SELECT count(*) > 0 FROM new_results WHERE world_size > 1"


def refresh_sql(*, figures_sql: str, machines: bool = True) -> list[str]:
    """The statements of one refresh, over the temp tables ``new_runs``, ``new_gpus`` and ``new_results``: the runs
    to summarise. Their figures are computed (``figures_sql``) and stored first; ``machines``: the multi-GPU
    machines' summaries too."""
    statements = [
        f"CREATE OR REPLACE TEMP TABLE new_devices AS {devices_sql('new_runs', 'new_gpus')}",
        f"CREATE OR REPLACE TEMP TABLE new_figures AS {figures_sql}",
        "INSERT INTO figures SELECT * FROM new_figures",
    ]
    figures_of = (
        "new_figures f JOIN new_devices d ON d.run_id = f.run_id AND d.gpu_index IS NOT DISTINCT FROM f.gpu_index"
    )
    history = ", ".join(f"max(f.value) FILTER (WHERE f.figure = '{figure}') AS {name}"
                        for name, figure in HISTORY_FIGURES.items())  # fmt: skip
    counters = ", ".join(f"{expr} AS {name}" for name, _, expr in DEVICE_COUNTERS)
    run_fields = ", ".join(f"ru.{name}" for name in RUN_FIELDS)
    statements += [
        f"""INSERT INTO device_runs BY NAME
            SELECT *, {FIRST_IN_RUN} AS first_in_run FROM (
                SELECT d.*, {history}, {counters}, {run_fields} FROM new_devices d
                JOIN new_runs ru ON ru.run_id = d.run_id
                LEFT JOIN new_figures f ON f.run_id = d.run_id AND f.gpu_index IS NOT DISTINCT FROM d.gpu_index
                LEFT JOIN new_gpus g ON g.run_id = d.run_id AND g.gpu_index = d.gpu_index
                GROUP BY ALL)""",
        *_merge(
            "device_latest",
            ("device_id",),
            "SELECT *, CAST(1 AS BIGINT) AS runs, started_at AS first_run FROM new_devices",
            {"runs": "sum(u.runs)", "first_run": "min(u.first_run)"},
        ),
        *_merge(
            "latest_figures",
            ("device_id", "figure"),
            f"""SELECT d.device_id, f.figure, d.card, d.gpu_model, d.gpu_name, d.source, f.run_id, f.gpu_index,
                       d.started_at, f.value, f.peak_fraction, f.sm_clock_mhz FROM {figures_of}""",
        ),
        *_merge(
            "latest_points",
            ("device_id", "chart", "series", "x"),
            f"""SELECT d.device_id, arg_max(d.card, d.started_at) AS card, p.chart, p.series, p.x,
                       arg_max(p.value, d.started_at) AS value, max(d.started_at) AS started_at
                FROM (SELECT run_id, gpu_index, chart, series, x, max(value) AS value FROM ({_POINTS}) GROUP BY ALL) p
                JOIN new_devices d ON d.run_id = p.run_id AND d.gpu_index IS NOT DISTINCT FROM p.gpu_index
                GROUP BY d.device_id, p.chart, p.series, p.x""",
        ),
        *_merge(
            "version_figures",
            ("gpu_model", "figure", "torch", "cuda", "driver", "device_id"),
            f"""SELECT d.gpu_model, f.figure, d.torch, d.cuda, d.driver, d.device_id, f.value,
                       d.started_at AS first_at, d.started_at FROM {figures_of}
                WHERE d.source = 'agent' AND d.gpu_name IS NOT NULL""",
            {"first_at": "min(u.first_at)"},
        ),
        *_history_sql(
            f"""SELECT d.device_id, f.figure, d.gpu_model, f.run_id, d.started_at, f.value, nr.suite FROM {figures_of}
                JOIN new_runs nr ON nr.run_id = f.run_id
                WHERE d.source = 'agent' AND d.gpu_name IS NOT NULL AND f.figure IN ({_HEALTH_FIGURES})"""
        ),
        """CREATE OR REPLACE TEMP TABLE new_card_runs AS
            SELECT card, count(DISTINCT run_id) AS runs, min(started_at) AS first_run, max(started_at) AS last_run
            FROM new_devices GROUP BY card""",
        """CREATE OR REPLACE TEMP TABLE merged_card_runs AS
           SELECT card, sum(runs) AS runs, min(first_run) AS first_run, max(last_run) AS last_run FROM (
               SELECT * FROM new_card_runs UNION ALL
               SELECT * FROM card_runs WHERE card IN (SELECT card FROM new_card_runs)) GROUP BY card""",
        "DELETE FROM card_runs WHERE card IN (SELECT card FROM new_card_runs)",
        "INSERT INTO card_runs SELECT * FROM merged_card_runs",
    ]
    if not machines:
        return statements
    return [
        *statements,
        *_merge("machine_latest", ("hostname", "world_size"), _MACHINES),
        *_merge(
            "machine_points",
            ("hostname", "world_size", "op", "bytes"),
            f"""SELECT ru.hostname, r.world_size, any_value(c.card) AS card, r.op, r.bytes,
                       median(r.busbw_gbps) AS busbw_gbps, any_value(ru.started_at) AS started_at
                FROM new_results r JOIN new_runs ru USING (run_id) LEFT JOIN ({_FIRST_CARD}) c USING (run_id)
                WHERE r.benchmark = 'collective' AND ru.device = 'cuda' AND {TRUSTED}
                GROUP BY ru.hostname, r.run_id, r.world_size, r.op, r.bytes""",
        ),
    ]


def _history_sql(candidates: str) -> list[str]:
    """Add ``candidates`` to ``health_history`` and keep only the newest ``HISTORY_KEPT`` per GPU and figure (of
    the keys they touch)."""
    return [
        f"CREATE OR REPLACE TEMP TABLE cand_health_history AS {candidates}",
        "INSERT INTO health_history BY NAME SELECT * FROM cand_health_history",
        f"""DELETE FROM health_history h USING (
                SELECT device_id, figure, run_id FROM (
                    SELECT device_id, figure, run_id,
                           row_number() OVER (PARTITION BY device_id, figure ORDER BY started_at DESC, run_id) AS n
                    FROM health_history
                    SEMI JOIN (SELECT DISTINCT device_id, figure FROM cand_health_history) c USING (device_id, figure))
                WHERE n > {HISTORY_KEPT}) old
            WHERE h.device_id = old.device_id AND h.figure = old.figure AND h.run_id = old.run_id""",
    ]


#: ``health_history`` for a database an older collector wrote (its runs have summaries but no history rows).
HISTORY_BACKFILL = f"""INSERT INTO health_history BY NAME
    SELECT device_id, figure, gpu_model, run_id, started_at, value, suite FROM (
        SELECT d.device_id, f.figure, d.gpu_model, f.run_id, d.started_at, f.value, ru.suite,
               row_number() OVER (PARTITION BY d.device_id, f.figure ORDER BY d.started_at DESC, f.run_id) AS n
        FROM figures f JOIN device_runs d ON d.run_id = f.run_id AND d.gpu_index IS NOT DISTINCT FROM f.gpu_index
        JOIN runs ru ON ru.run_id = f.run_id
        WHERE d.source = 'agent' AND d.gpu_name IS NOT NULL AND f.figure IN ({_HEALTH_FIGURES}))
    WHERE n <= {HISTORY_KEPT}"""
#: The suite of each kept measurement, for a ``health_history`` an older collector kept without it.
HISTORY_SUITES = """UPDATE health_history h SET suite = ru.suite FROM runs ru
    WHERE ru.run_id = h.run_id AND h.suite IS NULL"""


#: The points of the charts, from new results: (run_id, gpu_index, chart, series, x, value).
_POINTS = f"""
    SELECT run_id, gpu_index, 'matmul' AS chart, dtype AS series, CAST(n AS DOUBLE) AS x, tflops AS value
    FROM new_results WHERE benchmark = 'matmul' AND m = n AND n = k AND tflops IS NOT NULL AND {TRUSTED}
    UNION ALL
    SELECT run_id, gpu_index, 'layer',
           block || ' ' || mode || ' seq ' || seq_len
               || CASE WHEN attn_implementation = 'eager' THEN ', eager' ELSE '' END, batch, tflops
    FROM new_results WHERE benchmark = 'layer' AND dtype = 'fp16' AND tflops IS NOT NULL AND {TRUSTED}
    UNION ALL
    SELECT run_id, gpu_index, 'bandwidth', op, elements * 4, gbps
    FROM new_results WHERE benchmark = 'bandwidth' AND gbps IS NOT NULL AND {TRUSTED}
    UNION ALL
    SELECT run_id, gpu_index, 'decode',
           model || ', ' || seq_len || ' positions'
               || CASE WHEN implementation = 'torch' THEN ', {IMPLEMENTATIONS["torch"]}' ELSE '' END,
           batch, tokens_per_s
    FROM new_results WHERE benchmark = 'inference' AND phase = 'decode' AND tokens_per_s IS NOT NULL AND {TRUSTED}
"""
#: The card of each new run's first GPU: the card a machine-wide result is labelled with.
_FIRST_CARD = "SELECT run_id, arg_min(card, gpu_index) AS card FROM new_devices GROUP BY run_id"
#: Per host and GPU count: the figures of its runs with multi-GPU results (the newest is kept).
_MACHINES = f"""
    WITH multi AS (
        SELECT DISTINCT r.run_id, r.world_size FROM new_results r JOIN new_runs ru USING (run_id)
        WHERE r.status = 'ok' AND r.world_size > 1 AND r.benchmark IN ('collective', 'training')
              AND ru.device = 'cuda')
    SELECT ru.hostname, m.world_size, m.run_id, any_value(ru.started_at) AS started_at, any_value(c.card) AS card,
           max(coalesce(f.nodes, 1)) AS nodes, any_value(ru.topology) AS topology,
           (SELECT min(g.nvlink_active) FROM new_gpus g WHERE g.run_id = m.run_id) AS nvlink_active,
           max(f.busbw_gbps) FILTER (WHERE f.benchmark = 'collective' AND f.op = 'all_reduce'
                                     AND f.bytes >= {GiB} AND {TRUSTED}) AS allreduce_busbw_gbps,
           arg_max(f.bytes, f.busbw_gbps) FILTER (WHERE f.benchmark = 'collective' AND f.op = 'all_reduce'
                                                 AND f.bytes >= {GiB} AND {TRUSTED}) AS allreduce_bytes,
           max(f.tokens_per_s) FILTER (WHERE f.benchmark = 'training' AND f.world_size = m.world_size)
               AS ddp_tokens_per_s,
           max(f.scaling_efficiency) FILTER (WHERE f.benchmark = 'training') AS scaling_efficiency
    FROM multi m JOIN new_runs ru USING (run_id) JOIN new_results f USING (run_id)
    LEFT JOIN ({_FIRST_CARD}) c USING (run_id)
    GROUP BY ru.hostname, m.world_size, m.run_id
"""

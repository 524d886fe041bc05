"""Table definitions: typed columns and where each comes from in a run's JSON.

One list per table gives the DDL and the INSERT that flattens posted runs inside DuckDB: each run's JSON is parsed
once per commit (``from_json`` into one typed struct, vectorised and outside the GIL) and every table selects
from that. Params and metrics that people compare are flattened into typed columns; the full objects are kept as
JSON beside them, and the run itself as gzip-compressed JSON, so nothing the agent sent is lost and a new field
needs no migration to be stored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

#: What the store registers per run (as the Arrow table ``incoming``): the JSON text to parse, and the columns
#: it supplies itself. ``payload`` is the same JSON, gzip-compressed, as stored. ``commit_seq`` numbers the
#: writer's commits: every raw table carries it, so the runs stored since a moment are a range that DuckDB's
#: zone maps find without scanning older rows (rowids are not stable once rows are deleted).
INCOMING = ("run_id", "document", "payload", "payload_sha256", "received_at", "source", "token_name", "commit_seq")


@dataclass(frozen=True)
class Column:
    name: str
    sql: str
    path: tuple[str, ...] = ()  # within the run (runs) or the array element (other tables); () = supplied
    nullable: bool = True


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    array: str | None = None  # the payload array whose elements are this table's rows
    columnar: str | None = None  # the payload object whose parallel arrays are this table's columns
    key: str | None = None


def _c(name: str, sql: str, *path: str, nullable: bool = True) -> Column:
    return Column(name, sql, path or (name,), nullable)


def _supplied(name: str, sql: str, nullable: bool = True) -> Column:
    return Column(name, sql, (), nullable)


RUNS = Table(
    "runs",
    (
        _supplied("run_id", "UUID", nullable=False),
        _supplied("commit_seq", "BIGINT"),
        _c("schema_version", "INTEGER", nullable=False),
        _c("agent_version", "VARCHAR", nullable=False),
        _c("suite", "VARCHAR", nullable=False),
        _c("device", "VARCHAR", nullable=False),
        _supplied("source", "VARCHAR", nullable=False),  # agent | reference
        _c("started_at", "TIMESTAMPTZ", nullable=False),
        _c("finished_at", "TIMESTAMPTZ", nullable=False),
        _supplied("received_at", "TIMESTAMPTZ", nullable=False),
        _c("hostname", "VARCHAR", "host", "hostname", nullable=False),
        *(
            _c(f, t, "host", f)
            for f, t in (
                ("os", "VARCHAR"),
                ("kernel", "VARCHAR"),
                ("cpu_model", "VARCHAR"),
                ("cpu_count", "INTEGER"),
                ("memory_bytes", "BIGINT"),
            )
        ),
        *(
            _c(f, "VARCHAR", "software", f)
            for f in ("python", "torch", "cuda", "hip", "cudnn", "cublas", "nccl", "transformers", "driver")
        ),
        _c("tags", "JSON"),
        _c("topology", "VARCHAR"),
        _c("interrupted", "VARCHAR"),  # why the run ended before its plan (a signal), NULL when it did not
        _supplied("token_name", "VARCHAR"),
        _supplied("payload_sha256", "VARCHAR", nullable=False),
        _supplied("payload", "BLOB", nullable=False),  # the run's JSON, gzip-compressed
    ),
    key="run_id",
)

#: A GPU's error counters (``schemas.GpuCounters``), each stored as read before and after the run.
COUNTERS = (
    ("ecc_corrected_volatile", "BIGINT"), ("ecc_uncorrected_volatile", "BIGINT"),
    ("ecc_corrected_aggregate", "BIGINT"), ("ecc_uncorrected_aggregate", "BIGINT"),
    ("retired_pages_single_bit", "BIGINT"), ("retired_pages_double_bit", "BIGINT"),
    ("retired_pages_pending", "BOOLEAN"),
    ("remapped_rows_correctable", "BIGINT"), ("remapped_rows_uncorrectable", "BIGINT"),
    ("remapped_rows_pending", "BOOLEAN"), ("remapped_rows_failed", "BOOLEAN"), ("pcie_replays", "BIGINT"),
    ("nvlink_links", "INTEGER"), ("nvlink_links_down", "INTEGER"), ("nvlink_crc_errors", "BIGINT"),
    ("nvlink_replay_errors", "BIGINT"), ("nvlink_recovery_errors", "BIGINT"), ("power_violation_s", "DOUBLE"),
    ("energy_j", "DOUBLE"),
)  # fmt: skip

GPUS = Table(
    "gpus",
    (
        _supplied("run_id", "UUID", nullable=False),
        _supplied("commit_seq", "BIGINT"),
        _c("gpu_index", "INTEGER", "index", nullable=False),
        _c("name", "VARCHAR", nullable=False),
        _c("uuid", "VARCHAR"),
        _c("pci_bus_id", "VARCHAR"),
        _c("memory_bytes", "BIGINT", nullable=False),
        _c("compute_capability", "VARCHAR"),
        _c("sm_count", "INTEGER"),
        _c("l2_cache_bytes", "BIGINT"),
        _c("driver", "VARCHAR"),
        *(_c(f, "INTEGER") for f in ("sm_clock_max_mhz", "mem_clock_max_mhz", "sm_clock_mhz", "mem_clock_mhz")),
        _c("power_limit_w", "DOUBLE"),
        _c("power_limit_default_w", "DOUBLE"),
        *(_c(f, "INTEGER") for f in ("pcie_gen_max", "pcie_width_max", "pcie_gen", "pcie_width")),
        *(_c(f, "BOOLEAN") for f in ("ecc_enabled", "mig_enabled", "persistence_mode")),
        _c("other_processes", "INTEGER"),
        _c("nvlink_active", "INTEGER"),
        _c("temperature_start_c", "INTEGER"),
        _c("temperature_end_c", "INTEGER"),
        _c("throttle_reasons_seen", "VARCHAR[]"),
        *(
            _c(f"{name}_{when}", sql, f"counters_{when}", name)
            for when in ("before", "after")
            for name, sql in COUNTERS
        ),
        _c("xid_events", "JSON"),
    ),
    array="gpus",
)

_PARAMS = (
    ("dtype", "VARCHAR"), ("mode", "VARCHAR"), ("model", "VARCHAR"), ("block", "VARCHAR"), ("op", "VARCHAR"),
    ("direction", "VARCHAR"), ("pinned", "BOOLEAN"), ("m", "BIGINT"), ("n", "BIGINT"), ("k", "BIGINT"),
    ("batch", "INTEGER"), ("seq_len", "INTEGER"), ("elements", "BIGINT"), ("bytes", "BIGINT"),
    ("world_size", "INTEGER"), ("attn_implementation", "VARCHAR"), ("nodes", "INTEGER"), ("phase", "VARCHAR"),
    ("implementation", "VARCHAR"),  # whose model code (layers, inference): NULL in rows stored before it was kept
)  # fmt: skip
_METRICS = (
    ("tflops", "DOUBLE"), ("gbps", "DOUBLE"), ("busbw_gbps", "DOUBLE"), ("samples_per_s", "DOUBLE"),
    ("tokens_per_s", "DOUBLE"), ("mfu", "DOUBLE"), ("peak_memory_bytes", "BIGINT"), ("rel_error", "DOUBLE"),
    ("algbw_gbps", "DOUBLE"), ("scaling_efficiency", "DOUBLE"),
)  # fmt: skip
_TIMING = (
    ("median_s", "DOUBLE"), ("mean_s", "DOUBLE"), ("min_s", "DOUBLE"), ("max_s", "DOUBLE"), ("iqr_s", "DOUBLE"),
    ("cv", "DOUBLE"), ("repeats", "INTEGER"), ("calls_per_repeat", "INTEGER"),
    ("host_wait", "DOUBLE"), ("device_idle", "DOUBLE"), ("launch_share", "DOUBLE"),  # the host (agent/starvation.py)
    ("power_w", "DOUBLE"), ("energy_j", "DOUBLE"), ("energy_span_s", "DOUBLE"),  # the board (agent/machine/energy.py)
)  # fmt: skip

RESULTS = Table(
    "results",
    (
        _supplied("run_id", "UUID", nullable=False),
        _supplied("commit_seq", "BIGINT"),
        _supplied("seq", "INTEGER", nullable=False),
        _c("benchmark", "VARCHAR", nullable=False),
        _c("name", "VARCHAR", nullable=False),
        _c("status", "VARCHAR", nullable=False),
        _c("reason", "VARCHAR"),
        _c("gpu_index", "INTEGER"),
        *(_c(f, t, "params", f) for f, t in _PARAMS),
        *(_c(f, t, "metrics", f) for f, t in _METRICS),
        _c("peak_fraction", "DOUBLE"),
        *(_c(f, t, "timing", f) for f, t in _TIMING),
        _c("timing_method", "VARCHAR", "timing", "method"),
        _c("flags", "VARCHAR[]"),
        _c("sm_clock_mhz_median", "INTEGER", "state", "sm_clock_mhz_median"),
        _c("power_w_max", "DOUBLE", "state", "power_w_max"),
        _c("temperature_c_max", "INTEGER", "state", "temperature_c_max"),
        _c("throttle_reasons", "VARCHAR[]", "state", "throttle_reasons"),
        _c("params", "JSON", nullable=False),
        _c("metrics", "JSON"),
    ),
    array="results",
)

GPU_SAMPLES = Table(
    "gpu_samples",
    (
        _supplied("run_id", "UUID", nullable=False),
        _supplied("commit_seq", "BIGINT"),
        _c("t_s", "DOUBLE", nullable=False),
        _c("gpu_index", "INTEGER", nullable=False),
        *(_c(f, "INTEGER") for f in ("sm_clock_mhz", "mem_clock_mhz")),
        _c("power_w", "DOUBLE"),
        *(_c(f, "INTEGER") for f in ("temperature_c", "utilization_pct")),
        _c("throttle_reasons", "VARCHAR[]"),
    ),
    columnar="gpu_samples",
)

TABLES: dict[str, Table] = {t.name: t for t in (RUNS, GPUS, RESULTS, GPU_SAMPLES)}


def ddl(table: str) -> str:
    t = TABLES[table]
    columns = ",\n  ".join(f"{c.name} {c.sql}{'' if c.nullable else ' NOT NULL'}" for c in t.columns)
    key = f",\n  PRIMARY KEY ({t.key})" if t.key else ""
    return f"CREATE TABLE IF NOT EXISTS {table} (\n  {columns}{key}\n)"


def _spec_type(sql: str) -> Any:
    return ["VARCHAR"] if sql == "VARCHAR[]" else sql


def _json_roots(t: Table) -> set[str]:
    """Paths kept whole as JSON that other columns also read into: parsed a second time, into typed structs."""
    whole = {c.path[0] for c in t.columns if c.sql == "JSON" and len(c.path) == 1}
    return {c.path[0] for c in t.columns if len(c.path) > 1 and c.path[0] in whole}


def _row_spec(t: Table) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The from_json structure of one row, and of each JSON root that typed columns read from."""
    roots = _json_roots(t)
    spec: dict[str, Any] = {}
    typed: dict[str, dict[str, Any]] = {root: {} for root in roots}
    for c in t.columns:
        if not c.path:
            continue
        head, *rest = c.path
        if head in roots and rest:
            typed[head][rest[0]] = _spec_type(c.sql)
            continue
        node = spec
        for part in c.path[:-1]:
            node = node.setdefault(part, {})
        node.setdefault(c.path[-1], _spec_type(c.sql))
    return spec, typed


def document_spec() -> str:
    """The one from_json structure a run is parsed into, covering every table's columns."""
    spec: dict[str, Any] = {}
    for t in TABLES.values():
        rows, _ = _row_spec(t)
        if t.array:
            spec[t.array] = [rows]
        elif t.columnar:
            spec[t.columnar] = {name: [kind] for name, kind in rows.items()}
        else:
            spec.update(rows)
    return json.dumps(spec)


def parse_sql(*, new_only: bool = False) -> str:
    """Parse every registered run once (``new_only``: every one whose run_id is not stored yet), into the temporary
    table ``parsed`` the INSERTs read."""
    # unnest makes each top-level field its own column, so an INSERT binds only the fields it reads.
    columns = ", ".join(name for name in INCOMING if name != "document")
    where = " WHERE CAST(run_id AS UUID) NOT IN (SELECT run_id FROM runs)" if new_only else ""
    return (
        f"CREATE OR REPLACE TEMP TABLE parsed AS SELECT {columns}, "
        f"unnest(from_json(document, '{document_spec()}')) FROM incoming{where}"
    )


def insert_sql(table: str) -> str:
    """INSERT of this table's rows of every run in ``parsed``."""
    return f"INSERT INTO {table} BY NAME {select_sql(table)}"


def select_sql(table: str) -> str:
    """SELECT of this table's rows of every run in ``parsed``."""
    t = TABLES[table]
    rows, typed = _row_spec(t)
    # Only the columns a table needs travel through its query: the parsed document is large.
    if t.array:
        source = (
            f"SELECT p.run_id, p.commit_seq, unnest(range(len(p.{t.array}))) AS seq, unnest(p.{t.array}) AS e "
            "FROM parsed p"
        )
    elif t.columnar:
        arrays = ", ".join(f"unnest(p.{t.columnar}.{name}) AS {name}" for name in rows)
        source = (
            f"SELECT run_id, commit_seq, struct_pack({', '.join(rows)}) AS e "
            f"FROM (SELECT p.run_id, p.commit_seq, {arrays} FROM parsed p)"
        )
    else:
        supplied = ", ".join(f"p.{c.name}" for c in t.columns if not c.path)
        fields = ", ".join(f"p.{key}" for key in rows)
        source = f"SELECT {supplied}, struct_pack({fields}) AS e FROM parsed p"
    parsed = "".join(f", from_json(x.e.{root}, '{json.dumps(fields)}') AS _{root}" for root, fields in typed.items())
    select = []
    for c in t.columns:
        if not c.path:
            expr = f"CAST(y.{c.name} AS {c.sql})"
        elif c.path[0] in typed and len(c.path) > 1:
            expr = f"y._{c.path[0]}.{c.path[1]}"
        else:
            expr = "y.e." + ".".join(c.path)
        select.append(f"{expr} AS {c.name}")
    return f"SELECT {', '.join(select)} FROM (SELECT x.*{parsed} FROM ({source}) x) y"

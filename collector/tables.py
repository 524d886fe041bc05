"""Table definitions: one list of typed columns per table, from which both the DDL and the Arrow schema come.

Params and metrics that people compare are flattened into typed columns; the full objects are kept as JSON
beside them, so nothing the agent sent is lost and new fields need no migration to be stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Column:
    name: str
    sql: str  # DuckDB type
    arrow: str  # pyarrow type factory name
    nullable: bool = True


def _c(name: str, sql: str, arrow: str, nullable: bool = True) -> Column:
    return Column(name, sql, arrow, nullable)


RUNS: tuple[Column, ...] = (
    _c("run_id", "UUID", "string", False),
    _c("schema_version", "INTEGER", "int32", False),
    _c("agent_version", "VARCHAR", "string", False),
    _c("suite", "VARCHAR", "string", False),
    _c("device", "VARCHAR", "string", False),
    _c("source", "VARCHAR", "string", False),  # agent | reference
    _c("started_at", "TIMESTAMPTZ", "timestamp", False),
    _c("finished_at", "TIMESTAMPTZ", "timestamp", False),
    _c("received_at", "TIMESTAMPTZ", "timestamp", False),
    _c("hostname", "VARCHAR", "string", False),
    _c("os", "VARCHAR", "string"),
    _c("kernel", "VARCHAR", "string"),
    _c("cpu_model", "VARCHAR", "string"),
    _c("cpu_count", "INTEGER", "int32"),
    _c("memory_bytes", "BIGINT", "int64"),
    _c("python", "VARCHAR", "string"),
    _c("torch", "VARCHAR", "string"),
    _c("cuda", "VARCHAR", "string"),
    _c("hip", "VARCHAR", "string"),
    _c("cudnn", "VARCHAR", "string"),
    _c("cublas", "VARCHAR", "string"),
    _c("nccl", "VARCHAR", "string"),
    _c("transformers", "VARCHAR", "string"),
    _c("driver", "VARCHAR", "string"),
    _c("tags", "JSON", "string"),
    _c("token_name", "VARCHAR", "string"),
    _c("payload_sha256", "VARCHAR", "string", False),
    _c("payload", "VARCHAR", "string", False),
)

GPUS: tuple[Column, ...] = (
    _c("run_id", "UUID", "string", False),
    _c("gpu_index", "INTEGER", "int32", False),
    _c("name", "VARCHAR", "string", False),
    _c("uuid", "VARCHAR", "string"),
    _c("pci_bus_id", "VARCHAR", "string"),
    _c("memory_bytes", "BIGINT", "int64", False),
    _c("compute_capability", "VARCHAR", "string"),
    _c("sm_count", "INTEGER", "int32"),
    _c("l2_cache_bytes", "BIGINT", "int64"),
    _c("driver", "VARCHAR", "string"),
    _c("sm_clock_max_mhz", "INTEGER", "int32"),
    _c("mem_clock_max_mhz", "INTEGER", "int32"),
    _c("sm_clock_mhz", "INTEGER", "int32"),
    _c("mem_clock_mhz", "INTEGER", "int32"),
    _c("power_limit_w", "DOUBLE", "float64"),
    _c("power_limit_default_w", "DOUBLE", "float64"),
    _c("pcie_gen_max", "INTEGER", "int32"),
    _c("pcie_width_max", "INTEGER", "int32"),
    _c("pcie_gen", "INTEGER", "int32"),
    _c("pcie_width", "INTEGER", "int32"),
    _c("ecc_enabled", "BOOLEAN", "bool_"),
    _c("mig_enabled", "BOOLEAN", "bool_"),
    _c("persistence_mode", "BOOLEAN", "bool_"),
    _c("other_processes", "INTEGER", "int32"),
    _c("temperature_start_c", "INTEGER", "int32"),
    _c("temperature_end_c", "INTEGER", "int32"),
    _c("throttle_reasons_seen", "VARCHAR[]", "list_string"),
)

RESULTS: tuple[Column, ...] = (
    _c("run_id", "UUID", "string", False),
    _c("seq", "INTEGER", "int32", False),
    _c("benchmark", "VARCHAR", "string", False),
    _c("name", "VARCHAR", "string", False),
    _c("status", "VARCHAR", "string", False),
    _c("reason", "VARCHAR", "string"),
    _c("gpu_index", "INTEGER", "int32"),
    _c("dtype", "VARCHAR", "string"),
    _c("mode", "VARCHAR", "string"),
    _c("model", "VARCHAR", "string"),
    _c("block", "VARCHAR", "string"),
    _c("op", "VARCHAR", "string"),
    _c("direction", "VARCHAR", "string"),
    _c("pinned", "BOOLEAN", "bool_"),
    _c("m", "BIGINT", "int64"),
    _c("n", "BIGINT", "int64"),
    _c("k", "BIGINT", "int64"),
    _c("batch", "INTEGER", "int32"),
    _c("seq_len", "INTEGER", "int32"),
    _c("elements", "BIGINT", "int64"),
    _c("bytes", "BIGINT", "int64"),
    _c("world_size", "INTEGER", "int32"),
    _c("attn_implementation", "VARCHAR", "string"),
    _c("tflops", "DOUBLE", "float64"),
    _c("gbps", "DOUBLE", "float64"),
    _c("busbw_gbps", "DOUBLE", "float64"),
    _c("samples_per_s", "DOUBLE", "float64"),
    _c("tokens_per_s", "DOUBLE", "float64"),
    _c("mfu", "DOUBLE", "float64"),
    _c("peak_memory_bytes", "BIGINT", "int64"),
    _c("rel_error", "DOUBLE", "float64"),
    _c("peak_fraction", "DOUBLE", "float64"),
    _c("median_s", "DOUBLE", "float64"),
    _c("mean_s", "DOUBLE", "float64"),
    _c("min_s", "DOUBLE", "float64"),
    _c("max_s", "DOUBLE", "float64"),
    _c("iqr_s", "DOUBLE", "float64"),
    _c("cv", "DOUBLE", "float64"),
    _c("repeats", "INTEGER", "int32"),
    _c("calls_per_repeat", "INTEGER", "int32"),
    _c("timing_method", "VARCHAR", "string"),
    _c("flags", "VARCHAR[]", "list_string"),
    _c("sm_clock_mhz_median", "INTEGER", "int32"),
    _c("power_w_max", "DOUBLE", "float64"),
    _c("temperature_c_max", "INTEGER", "int32"),
    _c("throttle_reasons", "VARCHAR[]", "list_string"),
    _c("params", "JSON", "string", False),
    _c("metrics", "JSON", "string"),
)

GPU_SAMPLES: tuple[Column, ...] = (
    _c("run_id", "UUID", "string", False),
    _c("t_s", "DOUBLE", "float64", False),
    _c("gpu_index", "INTEGER", "int32", False),
    _c("sm_clock_mhz", "INTEGER", "int32"),
    _c("mem_clock_mhz", "INTEGER", "int32"),
    _c("power_w", "DOUBLE", "float64"),
    _c("temperature_c", "INTEGER", "int32"),
    _c("utilization_pct", "INTEGER", "int32"),
    _c("throttle_reasons", "VARCHAR[]", "list_string"),
)

TABLES: dict[str, tuple[Column, ...]] = {
    "runs": RUNS,
    "gpus": GPUS,
    "results": RESULTS,
    "gpu_samples": GPU_SAMPLES,
}


def ddl(table: str) -> str:
    columns = ",\n  ".join(f"{c.name} {c.sql}{'' if c.nullable else ' NOT NULL'}" for c in TABLES[table])
    key = ",\n  PRIMARY KEY (run_id)" if table == "runs" else ""
    return f"CREATE TABLE IF NOT EXISTS {table} (\n  {columns}{key}\n)"


def arrow_schema(table: str) -> Any:
    import pyarrow as pa

    def arrow_type(name: str) -> Any:
        if name == "timestamp":
            return pa.timestamp("us", tz="UTC")
        if name == "list_string":
            return pa.list_(pa.string())
        return getattr(pa, name)()

    return pa.schema([pa.field(c.name, arrow_type(c.arrow), nullable=c.nullable) for c in TABLES[table]])

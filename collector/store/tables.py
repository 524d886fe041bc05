"""Table definitions: the raw tables, which fields of a run each keeps as typed columns, and the SQL that stores them.

The columns come from the models (``columns``): each names the field it holds and takes its SQL type from the field's
annotation, so the run's shape is declared once, in ``schemas``. What is written here is only what storage decides:
the tables, the columns the store supplies, which fields get a typed column (the params and metrics people compare;
every other one stays in the ``params``/``metrics`` JSON beside them), renames, integer widths fixed by the first
layout, and what is kept whole as JSON. The run itself is kept as gzip-compressed JSON, so nothing the agent sent is
lost and a new field needs no migration to be stored.

A posted run is validated by pydantic in a worker process; the writer then lets DuckDB read the rows out of the
same JSON (``from_json`` into one typed struct per commit, vectorised C++ outside the GIL, its structure derived
from these columns). Building the rows from the validated model instead, in Python, cost more CPU per run than
DuckDB's parse and made ingest a fifth slower on 2 cores (docs/results/collector.md, "One parse, one shape").
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from schemas import RunSubmission

from .columns import Column, Fields, supplied

_RUN = Fields(RunSubmission)
_GPU = Fields(*_RUN.submodels(("gpus",)))
_RESULT = Fields(*_RUN.submodels(("results",)))
_SAMPLES = Fields(*_RUN.submodels(("gpu_samples",)), columnar=True)

#: Fields with no column, kept in the stored run only, by table and the submodel that holds them ("": the table's
#: element itself). Every other field has a column (tests/collector/test_one_shape.py holds the tables to that).
LEFT_OUT: dict[tuple[str, str], tuple[str, ...]] = {
    ("runs", ""): ("run_id", "timeline"),  # run_id: supplied, as in every table; timeline: where the time went
    ("runs", "software"): ("agent",),  # the run's agent_version
    ("results", ""): ("duration_s", "started_s", "finished_s"),  # the case's own time, not what it measured
    ("results", "timing"): ("warmup", "total_s", "warmup_s", "capture_s", "ci_rel", "settled"),  # how, not what
    ("results", "state"): ("samples", "sm_clock_mhz_min"),
}
#: Params people filter and compare on: a typed column each (NULL for the kinds without the field).
PARAMS = (
    "dtype", "mode", "model", "block", "op", "direction", "pinned", "m", "n", "k", "batch", "seq_len", "elements",
    "bytes", "world_size", "attn_implementation", "nodes", "phase",
    "implementation",  # whose model code (layers, inference): NULL in rows stored before it was kept
)  # fmt: skip
#: The same for metrics.
METRICS = (
    "tflops", "gbps", "busbw_gbps", "samples_per_s", "tokens_per_s", "mfu", "peak_memory_bytes", "rel_error",
    "algbw_gbps", "scaling_efficiency",
)  # fmt: skip
#: Integer widths the first layout chose against the rule (``columns.sql_type``): a column keeps its type.
_WIDE = {"m": "BIGINT", "n": "BIGINT", "k": "BIGINT"}
_NARROW = "INTEGER"


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]
    array: str | None = None  # the run's tuple whose entries are this table's rows
    columnar: str | None = None  # the run's object whose parallel tuples are this table's columns
    key: str | None = None


RUNS = Table(
    "runs",
    (
        supplied("run_id", "UUID", nullable=False),
        supplied("commit_seq", "BIGINT"),
        _RUN.column("schema_version", sql=_NARROW, nullable=False),
        _RUN.column("agent_version", nullable=False),
        _RUN.column("suite", nullable=False),
        _RUN.column("device", nullable=False),
        supplied("source", "VARCHAR", nullable=False),  # agent | reference
        _RUN.column("started_at", nullable=False),
        _RUN.column("finished_at", nullable=False),
        supplied("received_at", "TIMESTAMPTZ", nullable=False),
        _RUN.column("hostname", "host", "hostname", nullable=False),
        *_RUN.each("host", but=("hostname",), sql={"cpu_count": _NARROW}),
        *_RUN.each("software", but=LEFT_OUT["runs", "software"]),
        _RUN.json("tags"),
        _RUN.column("topology"),
        _RUN.column("interrupted"),  # why the run ended before its plan (a signal), NULL when it did not
        supplied("token_name", "VARCHAR"),
        supplied("payload_sha256", "VARCHAR", nullable=False),
        supplied("payload", "BLOB", nullable=False),  # the run's JSON, gzip-compressed
        # Added last, as a file from before them has them (docs/contract.md): the run's minor (NULL: 0, not said), and
        # what of a newer minor's run this collector did not know when it stored it, kept in the payload only
        # (collector/analysis/newer.py; NULL: nothing).
        _RUN.column("schema_minor", sql=_NARROW),
        supplied("not_understood", "VARCHAR[]"),
    ),
    key="run_id",
)

_COUNTERS = {"nvlink_links": _NARROW, "nvlink_links_down": _NARROW}
GPUS = Table(
    "gpus",
    (
        supplied("run_id", "UUID", nullable=False),
        supplied("commit_seq", "BIGINT"),
        _GPU.column("gpu_index", "index", nullable=False),
        *_GPU.each(
            but=("index", "counters_before", "counters_after", "xid_events"),
            sql={"sm_count": _NARROW, "other_processes": _NARROW, "nvlink_active": _NARROW},
            not_null=("name", "memory_bytes"),
        ),
        # A GPU's error counters (``schemas.GpuCounters``), each stored as read before and after the run.
        *(c for when in ("before", "after") for c in _GPU.each(f"counters_{when}", sql=_COUNTERS, name="{}_" + when)),
        _GPU.json("xid_events"),
    ),
    array="gpus",
)
#: The error counters' names and SQL types, as their ``_before`` and ``_after`` columns hold them.
COUNTERS = tuple((c.path[-1], c.sql) for c in GPUS.columns if c.path[:1] == ("counters_before",))

RESULTS = Table(
    "results",
    (
        supplied("run_id", "UUID", nullable=False),
        supplied("commit_seq", "BIGINT"),
        supplied("seq", "INTEGER", nullable=False),  # the result's place in the run
        _RESULT.column("benchmark", nullable=False),
        _RESULT.column("name", nullable=False),
        _RESULT.column("status", nullable=False),
        _RESULT.column("reason"),
        _RESULT.column("gpu_index"),
        *(_RESULT.column(f, "params", f, sql=_WIDE.get(f)) for f in PARAMS),
        *(_RESULT.column(f, "metrics", f) for f in METRICS),
        _RESULT.column("peak_fraction"),
        *_RESULT.each(
            "timing",
            but=("method", *LEFT_OUT["results", "timing"]),
            sql={"repeats": _NARROW, "calls_per_repeat": _NARROW},
        ),
        _RESULT.column("timing_method", "timing", "method"),
        _RESULT.column("flags"),
        *_RESULT.each("state", but=LEFT_OUT["results", "state"]),
        _RESULT.json("params", nullable=False),
        _RESULT.json("metrics"),
    ),
    array="results",
)

GPU_SAMPLES = Table(
    "gpu_samples",
    (
        supplied("run_id", "UUID", nullable=False),
        supplied("commit_seq", "BIGINT"),
        *_SAMPLES.each(not_null=("t_s", "gpu_index")),
    ),
    columnar="gpu_samples",
)

TABLES: dict[str, Table] = {t.name: t for t in (RUNS, GPUS, RESULTS, GPU_SAMPLES)}


#: What the store registers per run (as the Arrow table ``incoming``): the JSON text to parse, and the columns
#: it supplies itself. ``payload`` is the JSON as sent, gzip-compressed, as stored (for a newer minor's run the text
#: parsed is what this collector knows of it, ``not_understood`` what it does not). ``commit_seq`` numbers the
#: writer's commits: every raw table carries it, so the runs stored since a moment are a range that DuckDB's
#: zone maps find without scanning older rows (rowids are not stable once rows are deleted).
INCOMING = ("run_id", "document", "payload", "payload_sha256", "received_at", "source", "token_name", "commit_seq",
            "not_understood")  # fmt: skip


def ddl(table: str) -> str:
    t = TABLES[table]
    columns = ",\n  ".join(f"{c.name} {c.sql}{'' if c.nullable else ' NOT NULL'}" for c in t.columns)
    key = f",\n  PRIMARY KEY ({t.key})" if t.key else ""
    return f"CREATE TABLE IF NOT EXISTS {table} (\n  {columns}{key}\n)"


def _spec_type(sql: str) -> Any:
    return ["VARCHAR"] if sql == "VARCHAR[]" else sql


def _json_roots(t: Table) -> tuple[str, ...]:
    """Paths kept whole as JSON that other columns also read into: parsed a second time, into typed structs (in
    column order, so the SQL is the same in every process)."""
    whole = {c.path[0] for c in t.columns if c.whole and len(c.path) == 1}
    return tuple(dict.fromkeys(c.path[0] for c in t.columns if len(c.path) > 1 and c.path[0] in whole))


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
    # NOT EXISTS, not NOT IN (SELECT run_id FROM runs): DuckDB planned NOT IN as a scan of every stored run_id, a
    # commit's cost growing with the runs kept (46 against 2 ms for 8 runs beside 1,000,000 stored; equal since
    # run_id is never NULL). benchmarks/collector_writer.py --prefill measures a commit beside a fleet's runs.
    stored = "SELECT 1 FROM runs r WHERE r.run_id = CAST(i.run_id AS UUID)"
    where = f" WHERE NOT EXISTS ({stored})" if new_only else ""
    return (
        f"CREATE OR REPLACE TEMP TABLE parsed AS SELECT {columns}, "
        f"unnest(from_json(i.document, '{document_spec()}')) FROM incoming i{where}"
    )


def insert_sql(table: str) -> str:
    """INSERT of this table's rows of every run in ``parsed``."""
    return f"INSERT INTO {table} BY NAME {select_sql(table)}"


def select_sql(table: str) -> str:
    """SELECT of this table's rows of every run in ``parsed``."""
    t = TABLES[table]
    rows, typed = _row_spec(t)
    # Only the columns a table needs travel through its query: the parsed document is large. Each element's struct is
    # unnested into its fields before they are read (a nested one then from its own small struct): DuckDB plans each
    # read of a field from the whole element's struct anew every commit, and 60-odd of them from a 70-field struct
    # took longer to plan than the INSERT took to run (a commit's statements at 8 runs: 48.1 against 56.1 ms,
    # benchmarks/collector_commit_sql.py, 2026-12-04).
    if t.array:
        clash = {"run_id", "commit_seq", "seq"} & set(rows)
        if clash:  # unnest(x.e) would put the element's field beside the supplied column of the same name
            raise ValueError(f"{table}: an element's field is named as a supplied column: {sorted(clash)}")
        elements = (
            f"SELECT p.run_id, p.commit_seq, unnest(range(len(p.{t.array}))) AS seq, unnest(p.{t.array}) AS e "
            "FROM parsed p"
        )
        source = f"SELECT x.run_id, x.commit_seq, x.seq, unnest(x.e) FROM ({elements}) x"
    elif t.columnar:
        arrays = ", ".join(f"unnest(p.{t.columnar}.{name}) AS {name}" for name in rows)
        source = f"SELECT p.run_id, p.commit_seq, {arrays} FROM parsed p"
    else:
        source = "SELECT * FROM parsed"
    if typed:
        roots = ", ".join(
            f"from_json(y.{_quoted(root)}, '{json.dumps(fields)}') AS _{root}" for root, fields in typed.items()
        )
        source = f"SELECT y.*, {roots} FROM ({source}) y"
    select = []
    for c in t.columns:
        if not c.path:
            expr = f"CAST(z.{c.name} AS {c.sql})"
        elif c.path[0] in typed and len(c.path) > 1:
            expr = f"z._{c.path[0]}.{_quoted(c.path[1])}"
        else:
            expr = f"z.{_quoted(*c.path)}"
        select.append(f"{expr} AS {c.name}")
    return f"SELECT {', '.join(select)} FROM ({source}) z"


def _quoted(*parts: str) -> str:
    """A field's path as quoted identifiers (a field may be named as an SQL keyword: ``index``)."""
    return ".".join(f'"{part}"' for part in parts)

"""Benchmark data: runs built from a real H200 run, and a large fleet database cloned from them in SQL."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import duckdb

from collector.analysis.reference import load
from collector.store import SUMMARY_TABLES, Store
from collector.store.tables import TABLES
from schemas import RunSubmission
from scripts.results_files import read

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "docs" / "results" / "h200" / "standard1.json"
CARDS = ("NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S", "NVIDIA H100 PCIe")


def make_bodies(count: int, results: int) -> list[bytes]:
    template = read(TEMPLATE)
    base = template["results"]
    template["results"] = [base[i % len(base)] for i in range(results)]
    bodies = []
    for i in range(count):
        template["run_id"] = str(uuid.uuid4())
        template["host"]["hostname"] = f"node{i % 64}"
        bodies.append(json.dumps(template).encode())
    RunSubmission.model_validate_json(bodies[0])  # the template is a valid run
    return bodies


def fleet_database(db: Path, bodies: list[bytes], runs: int) -> None:
    """A database of ``runs`` runs over five cards, cloned in SQL from ``len(bodies)`` real inserts: 100 devices
    per GPU model, each with runs an hour apart. The clones are written to the file directly, as an older
    collector's runs would be; the store summarises them when it opens the file (``Store._migrate``)."""
    with Store(db) as store:
        for i, body in enumerate(bodies):
            data = json.loads(body)
            data["gpus"][0]["name"] = CARDS[i % len(CARDS)]
            store.add_run(RunSubmission.model_validate_json(json.dumps(data)))
        store.add_reference(load(None))
    copies = max(1, runs // len(bodies) - 1)
    con = duckdb.connect(str(db))
    con.execute("CREATE TEMP TABLE clone AS SELECT run_id AS old, uuid() AS new, c FROM runs, range(?) t(c)", [copies])
    for table in (*TABLES, "figures"):  # every table with rows per run
        shifted = ", runs.started_at + to_hours(clone.c + 1) AS started_at" if table == "runs" else ""
        con.execute(
            f"INSERT INTO {table} SELECT {table}.* REPLACE (clone.new AS run_id{shifted}) FROM {table} "
            f"JOIN clone ON {table}.run_id = clone.old"
        )
    con.execute("UPDATE gpus SET uuid = 'GPU-' || name || '-' || CAST(hash(run_id) % 100 AS VARCHAR)")
    # The summaries of the first runs were made before their devices were renamed: made again with the rest.
    for table in SUMMARY_TABLES:
        con.execute(f"DELETE FROM {table}")
    con.execute("CHECKPOINT")
    con.close()
    with Store(db):  # summarises every run
        pass

"""Baselines kept in the database: the bundles imported (whole, as received, so they can be exported again with
their hash) and their figures as rows for SQL users and pages; the bundles this collector ships are written at every
start, as the figure definitions are, so a fresh collector judges against them too.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal

import duckdb

from schemas.baselines import BaselineBundle, bundled, dump_bundle

from .errors import BadRequest, BaselineBundled, NotFound

DDL = {
    "baselines": """CREATE TABLE IF NOT EXISTS baselines (
        id VARCHAR PRIMARY KEY, name VARCHAR NOT NULL, origin VARCHAR NOT NULL, collector VARCHAR,
        exported_at TIMESTAMPTZ NOT NULL, imported_at TIMESTAMPTZ NOT NULL, schema_version INTEGER NOT NULL,
        figures_version INTEGER NOT NULL, bundle VARCHAR NOT NULL)""",
    "baseline_figures": """CREATE TABLE IF NOT EXISTS baseline_figures (
        baseline_id VARCHAR NOT NULL, card VARCHAR NOT NULL, gpu_name VARCHAR, kind VARCHAR NOT NULL, suite VARCHAR,
        figure VARCHAR NOT NULL, unit VARCHAR NOT NULL, value DOUBLE NOT NULL, low DOUBLE, high DOUBLE,
        between_gpus DOUBLE, within_gpu DOUBLE, gpus BIGINT NOT NULL, runs BIGINT NOT NULL, first_day DATE,
        last_day DATE)""",
}

Origin = Literal["imported", "bundled", "reference"]
#: Units of a published table's facts, by the suffix of their names.
FACT_UNITS = {"_tflops": "TFLOPS", "_gbps": "GB/s", "_gb": "GB", "_usd": "USD"}


def _fact_unit(key: str) -> str:
    return next((unit for suffix, unit in FACT_UNITS.items() if key.endswith(suffix)), "")


def _insert(cur: duckdb.DuckDBPyConnection, bundle: BaselineBundle, origin: Origin, now: datetime) -> None:
    cur.execute(
        "INSERT INTO baselines VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [bundle.sha256, bundle.name, origin, bundle.source.collector, bundle.source.exported_at, now,
         bundle.schema_version, bundle.figures_version, dump_bundle(bundle)],
    )  # fmt: skip
    rows = [
        (bundle.sha256, c.card, c.gpu_name, c.kind, c.suite, f.figure, f.unit, f.value, f.low, f.high, f.between_gpus,
         f.within_gpu, f.gpus, f.runs, f.first, f.last)
        for c in bundle.cards for f in c.figures
    ]  # fmt: skip
    # A published table's datasheet facts (theory, memory, price) as rows too, for the report and the SQL view.
    rows += [(bundle.sha256, c.card, c.gpu_name, c.kind, None, key, _fact_unit(key), value, None, None, None, None, 0,
              0, None, None) for c in bundle.cards for key, value in c.facts.items()]  # fmt: skip
    if rows:
        cur.executemany(f"INSERT INTO baseline_figures VALUES ({', '.join('?' * 16)})", rows)


def sync_bundled(cur: duckdb.DuckDBPyConnection) -> None:
    """This collector's bundled baselines in place of those an earlier version wrote (inside the caller's
    transaction)."""
    cur.execute("DELETE FROM baseline_figures WHERE baseline_id IN (SELECT id FROM baselines WHERE origin = 'bundled')")
    cur.execute("DELETE FROM baselines WHERE origin = 'bundled'")
    now = datetime.now(timezone.utc)
    for bundle in bundled():
        if cur.execute("SELECT 1 FROM baselines WHERE id = ?", [bundle.sha256]).fetchone() is None:
            _insert(cur, bundle, "bundled", now)


def add(
    cur: duckdb.DuckDBPyConnection, bundle: BaselineBundle, origin: Origin = "imported"
) -> Literal["created", "duplicate"]:
    """Store a bundle (checked by ``parse_bundle``) in one transaction: whole, or not at all. A published table
    (``origin`` reference) replaces the one of the same name (its source) imported before."""
    if cur.execute("SELECT 1 FROM baselines WHERE id = ?", [bundle.sha256]).fetchone() is not None:
        return "duplicate"
    cur.begin()
    try:
        if origin == "reference":
            old = "SELECT id FROM baselines WHERE origin = 'reference' AND name = ?"
            cur.execute(f"DELETE FROM baseline_figures WHERE baseline_id IN ({old})", [bundle.name])
            cur.execute("DELETE FROM baselines WHERE origin = 'reference' AND name = ?", [bundle.name])
        _insert(cur, bundle, origin, datetime.now(timezone.utc))
        cur.commit()
    except BaseException:
        cur.rollback()
        raise
    return "created"


def resolve(cur: duckdb.DuckDBPyConnection, ident: str) -> tuple[str, str, str]:
    """(id, name, origin) of the one baseline whose id starts with ``ident`` or whose name is ``ident``."""
    rows = cur.execute(
        "SELECT id, name, origin FROM baselines WHERE starts_with(id, lower(?)) OR name = ? ORDER BY id", [ident, ident]
    ).fetchall()
    if not rows:
        raise NotFound(f"no baseline {ident!r}: `flopfleet-collector baseline list` shows them")
    if len(rows) > 1:
        raise BadRequest(f"{ident!r} names {len(rows)} baselines ({', '.join(r[0][:12] for r in rows)}): give more "
                         "of its id")  # fmt: skip
    return rows[0]


def remove(cur: duckdb.DuckDBPyConnection, ident: str) -> tuple[str, str]:
    """Remove an imported baseline (id prefix or name); a bundled one cannot be, it comes back at every start."""
    found, name, origin = resolve(cur, ident)
    if origin == "bundled":
        raise BaselineBundled(f"baseline {name!r} ({found[:12]}) is bundled with this collector and cannot be "
                              "removed; import one of more GPUs for the same card to take its place")  # fmt: skip
    cur.begin()
    try:
        cur.execute("DELETE FROM baseline_figures WHERE baseline_id = ?", [found])
        cur.execute("DELETE FROM baselines WHERE id = ?", [found])
        cur.commit()
    except BaseException:
        cur.rollback()
        raise
    return found, name


def bundle_text(cur: duckdb.DuckDBPyConnection, ident: str) -> str:
    """The stored bundle file of one baseline (id prefix or name)."""
    found = resolve(cur, ident)[0]
    row = cur.execute("SELECT bundle FROM baselines WHERE id = ?", [found]).fetchone()
    assert row is not None
    return str(row[0])


def migrate_reference_values(cur: duckdb.DuckDBPyConnection) -> None:
    """Published tables an older collector stored in ``reference_values``: each source becomes a published baseline
    (as ``import-reference`` now makes), and the old table goes."""
    from .published import ReferenceValue, published_bundle

    exists = cur.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'reference_values'")
    if not (exists.fetchone() or (0,))[0]:
        return
    rows = cur.execute("SELECT card, metric, value, unit, source, note, max(imported_at) OVER (PARTITION BY source) "
                       "FROM reference_values ORDER BY source, card, metric").fetchall()  # fmt: skip
    for source in dict.fromkeys(r[4] for r in rows):
        mine = [r for r in rows if r[4] == source]
        values = [ReferenceValue(r[0], r[1], float(r[2]), r[3], r[4], r[5]) for r in mine]
        add(cur, published_bundle(values, mine[0][6]), "reference")
    cur.execute("DROP TABLE reference_values")

"""The DuckDB store: the only writer, owner of the tables and views.

One process owns the file and holds one connection; each request gets its own cursor. Writes are serialised
and each run goes in one transaction, bulk-inserted from Arrow tables, so a run is stored whole or not at all.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import duckdb

from schemas import RunSubmission

from .errors import DatabaseBusy, NotFound, RunConflict
from .rows import canonical, flatten, payload_hash
from .tables import TABLES, arrow_schema, ddl
from .views import VIEWS

#: The layout of the database file; a file written by a newer collector is refused, not misread.
DB_VERSION = 1


@dataclass(frozen=True)
class Stored:
    run_id: str
    status: Literal["created", "duplicate"]
    results: int


def connect(path: Path, *, read_only: bool = False, config: dict[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    try:
        return duckdb.connect(str(path), read_only=read_only, config=config or {})
    except duckdb.IOException as exc:
        if "lock" in str(exc).lower():
            raise DatabaseBusy(
                f"{path} is in use by another process (a running collector?): stop it, or use its HTTP API"
            ) from exc
        raise DatabaseBusy(f"{path} cannot be opened: {exc}") from exc


class Store:
    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.exists():
            raise NotFound(f"no database at {path}")
        # Read-only users (report, sql, export) get no file access from SQL either; export opens its own.
        self._con = connect(path, read_only=read_only, config={"enable_external_access": False} if read_only else None)
        self._write = threading.Lock()
        if not read_only:
            self._migrate()

    def close(self) -> None:
        self._con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def harden(self) -> None:
        """For a server that answers users' SQL: no file, network or extension access, and no more SET."""
        cur = self.cursor()
        cur.execute("SET enable_external_access = false")
        cur.execute("SET lock_configuration = true")

    def size_bytes(self) -> int:
        """The database file and its write-ahead log."""
        wal = self.path.with_name(self.path.name + ".wal")
        return sum(p.stat().st_size for p in (self.path, wal) if p.exists())

    def ready(self) -> bool:
        row = self.cursor().execute("SELECT value FROM meta WHERE key = 'db_version'").fetchone()
        return row is not None and int(row[0]) == DB_VERSION

    def snapshot(self, dest: Path) -> Path:
        """A consistent copy of every table into a new database file at ``dest``, taken while writes go on.

        The copy goes through Arrow into a second DuckDB instance, because this one may have external access
        off; the reads share one transaction, so the copy is one point in time.
        """
        if dest.exists():
            raise DatabaseBusy(f"{dest} exists; a snapshot never overwrites a file")
        target = duckdb.connect(str(dest))
        src = self.cursor()
        try:
            target.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
            for table in TABLES:
                target.execute(ddl(table))
            src.execute("BEGIN TRANSACTION READ ONLY")
            for table in ("meta", *TABLES):
                batches = src.sql(f"SELECT * FROM {table}").to_arrow_reader(50_000)
                target.register("incoming", batches)
                target.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming")
                target.unregister("incoming")
            src.execute("ROLLBACK")
            for name, sql in VIEWS.items():
                target.execute(f"CREATE VIEW {name} AS {sql}")
            target.execute("CHECKPOINT")
        finally:
            target.close()
        return dest

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor for one request or command: cheap, and safe to use from its own thread."""
        return self._con.cursor()

    def _migrate(self) -> None:
        cur = self.cursor()
        cur.execute("CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        row = cur.execute("SELECT value FROM meta WHERE key = 'db_version'").fetchone()
        if row is not None and int(row[0]) > DB_VERSION:
            raise DatabaseBusy(f"{self.path} was written by a newer collector (db_version {row[0]} > {DB_VERSION})")
        for table in TABLES:
            cur.execute(ddl(table))
        for name, sql in VIEWS.items():
            cur.execute(f"CREATE OR REPLACE VIEW {name} AS {sql}")
        cur.execute("INSERT OR REPLACE INTO meta VALUES ('db_version', ?)", [str(DB_VERSION)])

    def add_run(
        self,
        run: RunSubmission,
        *,
        source: str = "agent",
        token_name: str | None = None,
        received_at: datetime | None = None,
    ) -> Stored:
        """Store a run once: the same run again is a duplicate, the same run_id with other content a conflict."""
        import pyarrow as pa

        run_id = str(run.run_id)
        digest = payload_hash(canonical(run))
        columns = flatten(
            run, received_at=received_at or datetime.now(timezone.utc), source=source, token_name=token_name
        )
        with self._write:
            cur = self.cursor()
            existing = cur.execute("SELECT payload_sha256 FROM runs WHERE run_id = ?", [run_id]).fetchone()
            if existing is not None:
                if existing[0] != digest:
                    raise RunConflict(f"run {run_id} is already stored with different content")
                return Stored(run_id, "duplicate", len(run.results))
            cur.begin()
            try:
                for table, data in columns.items():
                    if not data["run_id"]:
                        continue
                    incoming = pa.Table.from_pydict(data, schema=arrow_schema(table))
                    cur.register("incoming", incoming)
                    cur.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming")
                    cur.unregister("incoming")
                cur.commit()
            except BaseException:
                cur.rollback()
                raise
        return Stored(run_id, "created", len(run.results))

    def run_payload(self, run_id: str) -> str:
        row = self.cursor().execute("SELECT payload FROM runs WHERE run_id = TRY_CAST(? AS UUID)", [run_id]).fetchone()
        if row is None:
            raise NotFound(f"no run {run_id}")
        payload: str = row[0]
        return payload

    def list_runs(self, limit: int, offset: int) -> tuple[list[dict[str, Any]], int]:
        cur = self.cursor()
        total = cur.execute("SELECT count(*) FROM runs").fetchone()
        cur.execute(
            """
            SELECT r.run_id, r.suite, r.device, r.hostname, r.started_at, r.received_at,
                   coalesce((SELECT list(g.name ORDER BY g.gpu_index) FROM gpus g WHERE g.run_id = r.run_id), []),
                   (SELECT count(*) FROM results x WHERE x.run_id = r.run_id)
            FROM runs r ORDER BY r.received_at DESC, r.run_id LIMIT ? OFFSET ?
            """,
            [limit, offset],
        )
        keys = ("run_id", "suite", "device", "hostname", "started_at", "received_at", "gpu_names", "results")
        rows = [dict(zip(keys, row, strict=True)) for row in cur.fetchall()]
        return rows, int(total[0]) if total else 0

"""Named queries of the fleet's health, its baselines and its multi-GPU machines (``reads.Reads`` adds the cards,
runs and figures); plain rows, read from the summaries the writer keeps."""

from __future__ import annotations

import re
from typing import Any

import duckdb

from schemas.environment import FAULT_REASONS
from schemas.health_figures import LOADED_HOST_WAIT, UNHEALTHY_FLAGS

from .errors import BadRequest
from .tables import COUNTERS

Row = tuple[Any, ...]


def cards_filter(cards: list[str] | None, column: str = "card") -> tuple[str, list[object]]:
    """None: every card; a list: those (none for an empty one)."""
    if cards is None:
        return "", []
    if not cards:
        return " AND false", []
    return f" AND {column} IN (SELECT unnest(?::VARCHAR[]))", [cards]


def _scope(table: str, model: str | None, devices: list[str] | None) -> tuple[str, list[object]]:
    """The health reads' filter: of one GPU model, and of some devices only (None: every one)."""
    where, params = "", list[object]()
    if model:
        where, params = f" AND {table}gpu_model = ?", [model]
    if devices is not None:
        where += f" AND {table}device_id IN (SELECT unnest(?::VARCHAR[]))"
        params.append(devices)
    return where, params


class Queries:
    """One cursor and the ways to read rows through it."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, generation: tuple[int, int] | None = None) -> None:
        self._cur = cursor
        #: The store's ``generation`` when these reads began: equal generations read equal summaries.
        self.generation = generation

    def _rows(self, sql: str, params: list[object] | dict[str, object] | None = None) -> list[Row]:
        return self._cur.execute(sql, params or []).fetchall()

    def _dicts(self, sql: str, params: list[object] | None = None) -> list[dict[str, Any]]:
        cur = self._cur.execute(sql, params or [])
        names = [d[0] for d in cur.description or []]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def _one(self, sql: str, params: list[object] | None = None) -> Any:
        row = self._cur.execute(sql, params or []).fetchone()
        return row[0] if row else None


class FleetReads(Queries):
    # -- health and history ------------------------------------------------------------------------------------

    def health_devices(self, model: str | None = None, devices: list[str] | None = None) -> list[dict[str, Any]]:
        """Each agent-measured GPU's latest run and state, with that run's transformers and suite (of one model, or
        all; of ``devices`` only, where given)."""
        where, params = _scope("d.", model, devices)
        return self._dicts(
            "SELECT d.*, r.transformers, r.suite FROM device_latest d JOIN runs r USING (run_id) "
            f"WHERE d.gpu_name IS NOT NULL AND d.source = 'agent'{where}",
            params,
        )

    def health_figures(
        self, figures: list[str], model: str | None = None, devices: list[str] | None = None
    ) -> list[Row]:
        """(device, figure, value, peak fraction, SM clock, suite) from each GPU's latest run that measured the
        figure."""
        where, params = _scope("l.", model, devices)
        return self._rows(
            "SELECT l.device_id, l.figure, l.value, l.peak_fraction, l.sm_clock_mhz, r.suite FROM latest_figures l "
            "JOIN runs r USING (run_id) WHERE l.source = 'agent' AND l.gpu_name IS NOT NULL "
            f"AND l.figure IN (SELECT unnest(?::VARCHAR[])){where}",
            [figures, *params],
        )

    def health_history(
        self, figures: list[str], model: str | None = None, devices: list[str] | None = None
    ) -> list[Row]:
        """(device, figure, [its kept measurements], [the suite of each]) of each agent-measured GPU, newest first
        (``health_history``; ``schemas.observations`` keeps those of the suite that took the newest)."""
        where, params = _scope("", model, devices)
        return self._rows(
            f"""SELECT device_id, figure, list(value ORDER BY started_at DESC, run_id),
                       list(suite ORDER BY started_at DESC, run_id)
                FROM health_history WHERE figure IN (SELECT unnest(?::VARCHAR[])){where} GROUP BY device_id, figure""",
            [figures, *params],
        )

    def devices_committed(self, start: int, end: int) -> list[str]:
        """The devices of the runs committed from ``start`` to before ``end`` (``commit_seq``): those whose
        summaries a refresh over those commits may have changed."""
        return [str(r[0]) for r in self._rows(
            """SELECT DISTINCT coalesce(g.uuid, ru.hostname) FROM runs ru
               LEFT JOIN (SELECT run_id, uuid FROM gpus WHERE commit_seq >= $start AND commit_seq < $end) g
                   ON g.run_id = ru.run_id
               WHERE ru.commit_seq >= $start AND ru.commit_seq < $end""",
            {"start": start, "end": end},
        )]  # fmt: skip

    def gpu_runs(self, device: str) -> int:
        """How many runs measured one GPU (0: none)."""
        return int(self._one("SELECT runs FROM device_latest WHERE device_id = ?", [device]) or 0)

    def gpu_history(self, device: str, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        """One GPU's runs, newest first (``limit`` of them from ``offset``), with its key figures and counters: its
        rows found through ``device_runs``' index (``aggregates.INDEXES``), then ordered."""
        return self._dicts(
            """WITH mine AS MATERIALIZED (SELECT * FROM device_runs WHERE device_id = ?)
               SELECT * FROM mine ORDER BY started_at DESC, run_id LIMIT ? OFFSET ?""",
            [device, limit, offset],
        )

    def version_figures(self, figures: list[str], model: str | None = None) -> list[Row]:
        """(model, figure, torch, cuda, driver, first seen, [each device's latest value]) per software version."""
        where = " AND gpu_model = ?" if model else ""
        return self._rows(
            f"""SELECT gpu_model, figure, torch, cuda, driver, min(first_at) AS first, list(value ORDER BY device_id)
                FROM version_figures WHERE figure IN (SELECT unnest(?::VARCHAR[])){where}
                GROUP BY gpu_model, figure, torch, cuda, driver ORDER BY gpu_model, figure, first""",
            [figures, *([model] if model else [])],
        )

    def latest_counters(self, model: str | None = None, devices: list[str] | None = None) -> list[dict[str, Any]]:
        """Each agent-measured GPU's error counters as its latest run ended, with the XIDs seen in that run."""
        where, params = _scope("d.", model, devices)
        columns = ", ".join(f"g.{name}_after AS {name}" for name, _ in COUNTERS)
        return self._dicts(
            f"""SELECT d.device_id, d.gpu_model, d.card, d.hostname, {columns},
                       CAST(json_array_length(g.xid_events) AS INTEGER) AS xid_count,
                       CAST(json_extract(g.xid_events, '$[*].xid') AS INTEGER[]) AS xids
                FROM device_latest d JOIN gpus g ON g.run_id = d.run_id AND g.gpu_index = d.gpu_index
                WHERE d.source = 'agent' AND d.gpu_name IS NOT NULL{where}""",
            params,
        )

    def latest_per_watt(self, figures: list[str], devices: list[str] | None = None) -> list[Row]:
        """(device, GPU model, card, hostname, figure, value) of each agent-measured GPU's latest value of each of
        ``figures`` (per-watt twins; of ``devices`` only, where given)."""
        where, params = _scope("l.", None, devices)
        return self._rows(
            f"""SELECT l.device_id, l.gpu_model, l.card, d.hostname, l.figure, l.value
                FROM latest_figures l JOIN device_latest d ON d.device_id = l.device_id
                WHERE l.source = 'agent' AND l.gpu_name IS NOT NULL AND l.figure IN (SELECT unnest(?::VARCHAR[])){where}
                ORDER BY l.device_id, l.figure""",
            [figures, *params],
        )

    # -- baselines ---------------------------------------------------------------------------------------------

    def baselines(self) -> list[Row]:
        """(bundle JSON, origin) of every stored baseline, bundled ones included."""
        return self._rows("SELECT bundle, origin FROM baselines ORDER BY origin, imported_at, id")

    def baseline_list(self) -> list[dict[str, Any]]:
        """Each stored baseline with its cards, figures, GPUs and runs at a glance."""
        return self._dicts(
            """SELECT b.id, b.name, b.origin, b.collector, b.exported_at, b.imported_at, b.figures_version,
                      list(DISTINCT f.card ORDER BY f.card) AS cards, list(DISTINCT f.suite ORDER BY f.suite) AS suites,
                      any_value(f.kind) AS kind, count(f.figure) AS figures, max(f.gpus) AS gpus, max(f.runs) AS runs,
                      min(f.first_day) AS first_day, max(f.last_day) AS last_day
               FROM baselines b LEFT JOIN baseline_figures f ON f.baseline_id = b.id
               GROUP BY ALL ORDER BY b.origin DESC, b.imported_at, b.id"""
        )

    def baseline_measurements(
        self,
        model: str | None = None,
        since: object = None,
        tags: dict[str, str] | None = None,
        suite: str | None = None,
    ) -> list[dict[str, Any]]:
        """Every figure value of agent-measured GPUs in healthy conditions (no other process on the GPU, no thermal or
        hardware slowdown, no result flagged one of ``UNHEALTHY_FLAGS``: busy, throttled, starved, wrong or above the
        datasheet, no loaded host: ``LOADED_HOST_WAIT``), with its card, suite, date and software: what a baseline is
        built from. ``model``: a regular expression matched against the card (case-insensitive); ``since``: runs
        started then or later; ``tags``: runs carrying each of them."""
        where: list[str] = []
        params: list[object] = []
        if model:
            try:
                re.compile(model)
            except re.error as exc:
                raise BadRequest(f"model {model!r} is not a regular expression: {exc}") from None
            where.append("regexp_matches(d.card, ?, 'i')")
            params.append(model)
        if since is not None:
            where.append("d.started_at >= ?")
            params.append(since)
        if suite:
            where.append("r.suite = ?")
            params.append(suite)
        for key, value in (tags or {}).items():
            where.append("json_extract_string(r.tags, ?) = ?")
            params += ['$."' + key.replace('"', "") + '"', value]
        extra = "".join(f" AND {w}" for w in where)
        try:
            return self._query_measurements(extra, params)
        except duckdb.InvalidInputException as exc:  # a model pattern RE2 cannot read
            raise BadRequest(f"model {model!r} is not a regular expression: {str(exc).splitlines()[0]}") from None

    def _query_measurements(self, extra: str, params: list[object]) -> list[dict[str, Any]]:
        slowdowns = ", ".join(f"'{r}'" for r in sorted(FAULT_REASONS))
        unhealthy = ", ".join(f"'{f}'" for f in sorted(UNHEALTHY_FLAGS))
        return self._dicts(
            f"""SELECT d.card, d.gpu_name, d.device_id, r.suite, f.figure, f.value, d.started_at, d.driver, d.cuda,
                       d.torch, r.transformers
                FROM figures f
                JOIN device_runs d ON d.run_id = f.run_id AND d.gpu_index IS NOT DISTINCT FROM f.gpu_index
                JOIN runs r ON r.run_id = f.run_id
                WHERE d.source = 'agent' AND d.gpu_name IS NOT NULL AND coalesce(d.other_processes, 0) = 0
                  AND NOT list_has_any(coalesce(d.throttle_reasons_seen, []), [{slowdowns}])
                  AND NOT EXISTS (SELECT 1 FROM results x WHERE x.run_id = f.run_id
                                  AND x.gpu_index IS NOT DISTINCT FROM f.gpu_index
                                  AND list_has_any(coalesce(x.flags, []), [{unhealthy}]))
                  AND coalesce((SELECT median(x.host_wait) FROM results x WHERE x.run_id = f.run_id
                                AND x.gpu_index IS NOT DISTINCT FROM f.gpu_index), 0) < {LOADED_HOST_WAIT}{extra}
                ORDER BY d.card, f.figure, d.device_id, d.started_at""",
            params,
        )

    # -- multi-GPU machines ------------------------------------------------------------------------------------

    def machines(self) -> list[dict[str, Any]]:
        return self._dicts("SELECT * EXCLUDE (started_at) FROM machine_latest ORDER BY hostname, world_size")

    def machine_points(self) -> list[Row]:
        """(collective, machine label, bytes, bus bandwidth) of each machine's latest runs."""
        return self._rows(
            """SELECT op, hostname || ' · ' || coalesce(card, '?') || ' ×' || world_size, bytes, busbw_gbps
               FROM machine_points ORDER BY 1, 2, 3"""
        )

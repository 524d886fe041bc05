"""Named queries: the only SQL outside the store's writer, each returning plain rows (tuples and dicts).

Pages and reports read the summaries the writer keeps (``aggregates``), so each query reads rows in proportion to
what it answers (cards, devices, points), not to the runs kept. ``Reads`` holds one cursor of its own; it is cheap
to make and for one request or command.
"""

from __future__ import annotations

from typing import Any

from .fleet_reads import FleetReads, Row, cards_filter


class Reads(FleetReads):
    """Every named query (the fleet's are ``FleetReads``'), on one cursor."""

    # -- cards and runs ----------------------------------------------------------------------------------------

    def cards(self, cards: list[str] | None = None) -> list[dict[str, Any]]:
        """The ``cards`` view: measured cards, GPUs first."""
        where, params = cards_filter(cards)
        return self._dicts(f"SELECT * FROM cards WHERE true{where} ORDER BY gpu_name IS NULL, card", params)

    def card_model(self, card: str) -> str | None:
        model = self._one("SELECT any_value(gpu_model) FROM device_latest WHERE card = ?", [card])
        if model is None:  # a card no device measures any longer, e.g. after a power-limit change
            model = self._one("SELECT any_value(gpu_model) FROM latest_figures WHERE card = ?", [card])
        return str(model) if model is not None else None

    def reference_cards(self) -> list[Row]:
        """(card, source) of each card with published figures."""
        return self._rows("SELECT card, any_value(source) FROM reference GROUP BY card ORDER BY card")

    def reference_values(self) -> list[Row]:
        return self._rows("SELECT card, metric, value FROM reference")

    def prices(self) -> list[Row]:
        return self._rows("SELECT model, price_usd FROM prices ORDER BY model")

    def summaries_extent(self) -> Row:
        """(the last commit stored, the rows of ``device_runs``): how far the summaries go once every stored run is
        summarised (as a collector starts and after its writer stopped; a run summarised late adds its rows)."""
        return self._rows("SELECT (SELECT max(commit_seq) FROM runs), (SELECT count(*) FROM device_runs)")[0]

    def kept_metrics(self, judged_from: str) -> bytes | None:
        """Each GPU's series as the last collector on the file wrote them as it stopped, where they were judged from
        ``judged_from`` (``read.views.judged_from``); None where they were not, or none were kept."""
        found = self._one("SELECT body FROM kept_metrics WHERE judged_from = ?", [judged_from])
        return bytes(found) if found is not None else None

    def run_count(self) -> int:
        return int(self._one("SELECT count(*) FROM runs") or 0)

    def recent_runs(self, limit: int, offset: int = 0) -> list[dict[str, Any]]:
        """The newest runs (by start) with their GPUs and result counts."""
        return self._dicts(
            """SELECT r.run_id, r.started_at, r.received_at, r.hostname, r.suite, r.device, r.cpu_model, r.torch,
                      r.cuda, r.driver, coalesce(s.gpu_names, []) AS gpu_names, coalesce(s.results, 0) AS results,
                      coalesce(s.starved, 0) AS starved
               FROM (SELECT run_id, started_at, received_at, hostname, suite, device, cpu_model, torch, cuda, driver
                     FROM runs ORDER BY started_at DESC, run_id LIMIT ? OFFSET ?) r
               LEFT JOIN run_summaries s USING (run_id) ORDER BY r.started_at DESC, r.run_id""",
            [limit, offset],
        )

    def not_understood(self, run_id: str) -> list[str]:
        """What of a newer minor's run this collector did not know when it stored it (docs/contract.md)."""
        found = self._one("SELECT not_understood FROM runs WHERE run_id = TRY_CAST(? AS UUID)", [run_id])
        return list(found or [])

    def starved_results(self) -> tuple[int, int]:
        """(results, runs) flagged starved: measured on a busy host, so in no figure and no verdict."""
        row = self._rows("SELECT coalesce(sum(starved), 0), count(*) FROM run_summaries WHERE starved > 0")[0]
        return int(row[0]), int(row[1])

    def received_runs(self, limit: int, offset: int) -> list[dict[str, Any]]:
        """The runs in the order they were received, newest first (the API's list)."""
        return self._dicts(
            """SELECT r.run_id, r.suite, r.device, r.hostname, r.started_at, r.received_at,
                      coalesce(s.gpu_names, []) AS gpu_names, coalesce(s.results, 0) AS results,
                      r.schema_version || '.' || coalesce(r.schema_minor, 0) AS contract, r.not_understood
               FROM (SELECT run_id, suite, device, hostname, started_at, received_at, schema_version, schema_minor,
                            not_understood
                     FROM runs ORDER BY received_at DESC, run_id LIMIT ? OFFSET ?) r
               LEFT JOIN run_summaries s USING (run_id) ORDER BY r.received_at DESC, r.run_id""",
            [limit, offset],
        )

    def columns(self, names: list[str]) -> dict[str, list[tuple[str, str]]]:
        """Each of these tables' or views' columns and their types, from the catalog, in the order given."""
        rows = self._rows(
            "SELECT table_name, column_name, data_type FROM duckdb_columns() WHERE schema_name = 'main' "
            "AND table_name IN (SELECT unnest(?::VARCHAR[])) ORDER BY column_index",
            [names],
        )
        found: dict[str, list[tuple[str, str]]] = {name: [] for name in names}
        for table, column, kind in rows:
            found[table].append((column, kind))
        return found

    # -- figures of each device (latest) -----------------------------------------------------------------------

    def cells(self, cards: list[str] | None = None) -> list[Row]:
        """(card, figure, median, low, high, devices) over each device's latest value of the figure."""
        where, params = cards_filter(cards)
        return self._rows(
            f"SELECT card, figure, median(value), min(value), max(value), count(*) FROM latest_figures "
            f"WHERE true{where} GROUP BY card, figure",
            params,
        )

    def peak_fractions(self, figures: list[str], cards: list[str] | None = None) -> list[Row]:
        """(card, figure, median fraction of the datasheet peak) over devices."""
        where, params = cards_filter(cards)
        return self._rows(
            f"SELECT card, figure, median(peak_fraction) FROM latest_figures WHERE peak_fraction IS NOT NULL "
            f"AND figure IN (SELECT unnest(?::VARCHAR[])){where} GROUP BY card, figure ORDER BY card",
            [figures, *params],
        )

    def device_values(self, figure: str, cards: list[str] | None = None) -> list[Row]:
        """(card, device, latest value) of one figure, for the agents' devices."""
        where, params = cards_filter(cards)
        return self._rows(
            f"SELECT card, device_id, value FROM latest_figures WHERE figure = ? AND source = 'agent'{where} "
            "ORDER BY card, value",
            [figure, *params],
        )

    def points(self, chart: str, cards: list[str] | None = None) -> list[Row]:
        """(series, card, x, median y over devices) of one chart's lines."""
        where, params = cards_filter(cards)
        return self._rows(
            f"SELECT series, card, x, median(value) FROM latest_points WHERE chart = ?{where} "
            "GROUP BY series, card, x ORDER BY series, card, x",
            [chart, *params],
        )

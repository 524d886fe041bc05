"""One rule for which results count: SQL's views, the report and the pages give the same figure on runs whose
results include starved, wrong and above-peak ones, and every result stays in SQL with its flags.

The expected figures are worked out here in Python from the posted results (the best of each card's results that
are ok and carry none of ``UNTRUSTED_FLAGS``), and each answer is read the way a person reads it: SQL over HTTP and
from ``flopfleet-collector sql``, the report's Markdown and HTML, and the pages' tables and CSV.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import duckdb
import httpx
import pytest

from collector.render.numbers import number
from collector.store import DB_VERSION, Store
from collector.store.errors import OlderDatabase
from collector.store.figures import BY_KEY
from collector.store.queries import EXAMPLES
from collector.store.sqlviews import EVERY_RESULT, FIGURE_VIEWS, VIEWS
from collector.web.routes.pages import KEY_COLUMNS
from schemas.health_figures import HEALTH_FIGURES, UNTRUSTED_FLAGS
from schemas.results import RESULT_KINDS
from tests.conftest import collector_cli
from tests.factories import (
    bandwidth,
    collective,
    gpu,
    inference,
    layer,
    make_run,
    mamf,
    matmul,
    run_dict,
    training,
    transfer,
)
from tests.servers import Collector, serve_collector

H100, A100, H200 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA H200"
Result = dict[str, Any]


def _flagged(result: Result, flag: str, times: float) -> Result:
    """``result`` flagged ``flag``, its headline ``times`` what it was: an untrusted figure that would win a max."""
    metrics = {k: v * times if k in ("tflops", "gbps", "tokens_per_s", "busbw_gbps", "algbw_gbps") else v
               for k, v in result["metrics"].items()}  # fmt: skip
    return {**result, "metrics": metrics, "flags": [flag]}


def _powered(result: Result) -> Result:
    """``result`` with the board's power read over its repeats, so it has a figure per watt."""
    return {**result, "timing": {**result["timing"], "power_w": 500.0, "energy_j": 50.0, "energy_span_s": 0.1}}


#: Each card's one run (one GPU each, so a card's cell is its GPU's best value). The H100 has a trusted result and a
#: higher untrusted one for every figure below; the A100's fp16 matmul was only ever starved (its cell is blank); the
#: H200 has every kind of result trusted and untrusted, each with its power read.
CARDS: dict[str, list[Result]] = {
    H100: [
        matmul(8192, "bf16", 690.0),
        _flagged(matmul(4096, "bf16", 690.0), "starved", 1.05),
        _flagged(matmul(2048, "bf16", 690.0), "wrong_result", 1.15),
        _flagged(matmul(16384, "bf16", 690.0), "above_peak", 2.2),
        matmul(8192, "fp16", 660.0),
        _flagged(matmul(4096, "fp16", 660.0), "above_peak", 3.0),
        layer("bert_layer", "fwd+bwd", 32, 512, 400.0),
        _flagged(layer("bert_layer", "fwd+bwd", 64, 512, 400.0), "starved", 1.1),
        bandwidth(1 << 26, 3000.0, op="copy"),
        _flagged(bandwidth(1 << 24, 3000.0, op="copy"), "starved", 1.1),
        transfer("h2d", 55.0),
        _flagged(transfer("h2d", 55.0, size=64 << 20), "wrong_result", 1.2),
    ],
    A100: [
        matmul(8192, "bf16", 280.0),
        _flagged(matmul(4096, "bf16", 280.0), "wrong_result", 1.3),
        _flagged(matmul(8192, "fp16", 250.0), "starved", 1.0),
        bandwidth(1 << 26, 1500.0, op="copy"),
    ],
    H200: [
        _powered(r)
        for trusted, flag in (
            (matmul(8192, "bf16", 750.0), "starved"),
            (mamf(800.0), "above_peak"),
            (bandwidth(1 << 26, 4200.0, op="copy"), "starved"),
            (transfer("h2d", 55.0), "wrong_result"),
            (layer("bert_layer", "fwd+bwd", 32, 512, 450.0), "starved"),
            (training("gpt2-medium", 40_000.0), "starved"),
            (inference("decode", 1, 1024, 5e-3, datasheet=4800), "above_peak"),
            (collective("all_reduce", 1 << 30, 400.0), "wrong_result"),
        )
        for r in (trusted, _flagged(trusted, flag, 1.5))
    ],
}
CARD_LABELS = {H100: f"{H100} 80 GiB · 700 W", A100: f"{A100} 80 GiB · 700 W", H200: f"{H200} 141 GiB · 700 W"}


def _is(benchmark: str, **params: object) -> Callable[[Result], bool]:
    return lambda r: r["benchmark"] == benchmark and all(r["params"].get(k) == v for k, v in params.items())


#: Figure key -> which results make it, its metric, and a user's natural query over the views (card, value).
ASKED: dict[str, tuple[Callable[[Result], bool], str, str]] = {
    # As the issue asked it, ``status = 'ok'`` and all: a query written before the views changed still works.
    "matmul_bf16": (_is("matmul", dtype="bf16"), "tflops",
                    "SELECT card, max(tflops) FROM matmul WHERE status = 'ok' AND dtype = 'bf16' GROUP BY card"),
    "matmul_fp16": (_is("matmul", dtype="fp16"), "tflops",
                    "SELECT card, max(tflops) FROM matmul WHERE dtype = 'fp16' GROUP BY card"),
    "bw_copy": (_is("bandwidth", op="copy"), "gbps",
                "SELECT card, max(gbps) FROM bandwidth WHERE op = 'copy' GROUP BY card"),
    "bert_fwdbwd": (_is("layer", block="bert_layer", mode="fwd+bwd", dtype="fp16", attn_implementation="sdpa"),
                    "tflops", "SELECT card, max(tflops) FROM layers WHERE block = 'bert_layer' AND mode = 'fwd+bwd' "
                    "AND dtype = 'fp16' AND attn_implementation = 'sdpa' GROUP BY card"),
    "h2d": (_is("transfer", direction="h2d", pinned=True), "gbps",
            "SELECT card, max(gbps) FROM transfers WHERE direction = 'h2d' AND pinned GROUP BY card"),
}  # fmt: skip


def _trusted(result: Result) -> bool:
    return result["status"] == "ok" and not UNTRUSTED_FLAGS & set(result.get("flags") or ())


def _best(key: str, card: str, *, only_trusted: bool = True) -> float | None:
    picks, metric, _ = ASKED[key]
    values = [r["metrics"][metric] for r in CARDS[card] if picks(r) and (_trusted(r) or not only_trusted)]
    return max(values) if values else None


#: (figure, card label) -> the report's figure, None where no trusted result makes one (a blank cell, no SQL row).
EXPECTED = {(key, CARD_LABELS[card]): _best(key, card) for key in ASKED for card in CARDS}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    db = tmp_path_factory.mktemp("one-rule") / "fleet.duckdb"
    with serve_collector(db) as served:
        for i, (card, results) in enumerate(CARDS.items()):
            memory = 141 if card == H200 else 80
            run = run_dict(results, [gpu(card, memory_gib=memory, host=f"n{i}")], hostname=f"n{i}")
            posted = httpx.post(served.url + "/api/v1/runs", json=run, headers=served.auth, timeout=60)
            assert posted.status_code == 201, posted.text
        yield served


def test_the_data_would_catch_views_that_keep_untrusted_results() -> None:
    # Were the views to hold every result, a max over them would differ from the report's figure here...
    assert any(_best(k, c, only_trusted=False) != _best(k, c) for k in ASKED for c in (H100, A100))
    # ... and a card whose only fp16 matmul was starved would get a number where its cell is blank.
    assert _best("matmul_fp16", A100) is None and _best("matmul_fp16", A100, only_trusted=False) is not None
    flags = {f for results in CARDS.values() for r in results for f in r.get("flags", [])}
    assert flags == UNTRUSTED_FLAGS  # each untrusted flag, and no other


def _union() -> str:
    """Every asked query in one, each row named by its figure."""
    return " UNION ALL ".join(f"SELECT '{key}' AS figure, * FROM ({sql})" for key, (_, _, sql) in ASKED.items())


def _from_sql(rows: list[list[Any]]) -> dict[tuple[str, str], float | None]:
    found: dict[tuple[str, str], float | None] = dict.fromkeys(EXPECTED)
    for key, card, value in rows:
        assert found[(key, card)] is None, (key, card)  # one row per card
        found[(key, card)] = value
    return found


def _post_sql(site: Collector, sql: str) -> list[list[Any]]:
    answer = httpx.post(site.url + "/api/v1/sql", json={"sql": sql}, headers=site.auth, timeout=60)
    assert answer.status_code == 200, answer.text
    rows: list[list[Any]] = answer.json()["rows"]
    return rows


def _get(site: Collector, path: str, **params: object) -> str:
    answer = httpx.get(site.url + path, params=params, headers=site.auth, timeout=60)  # type: ignore[arg-type]
    assert answer.status_code == 200, (path, answer.text[-2000:])
    return answer.text


class _Tables(HTMLParser):
    """Each table of a page by its id: its rows, each a list of the cell's own text (not its spread's)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None
        self._nested = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table = self.tables.setdefault(dict(attrs).get("id") or "", [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "span" and self._cell is not None:
            self._nested += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None
        elif tag in ("td", "th") and self._cell is not None and self._table:
            self._table[-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "span" and self._nested:
            self._nested -= 1

    def handle_data(self, data: str) -> None:
        if self._cell is not None and not self._nested:
            self._cell.append(data)


def _html_table(page: str, table: str) -> list[list[str]]:
    parser = _Tables()
    parser.feed(page)
    return parser.tables[table]


def _markdown_table(report: str) -> list[list[str]]:
    """The report's comparison table (the first), its cells unescaped as a reader sees them."""
    lines = [line for line in report.splitlines() if line.startswith("|")]
    first = next(i for i, line in enumerate(lines) if line.startswith("|---"))
    table = [lines[first - 1], *lines[first + 1 :]]
    table = table[: next((i for i, line in enumerate(table) if not line.startswith("| ")), len(table))]
    return [[cell.strip().replace("\\*", "*") for cell in line.strip("|").split(" | ")] for line in table]


def _comparison_cells(rows: list[list[str]]) -> dict[tuple[str, str], str]:
    """(figure, card) -> the cell's text, for each asked figure in a comparison table (cards across, rows down)."""
    header = rows[0]
    by_label = {f"{BY_KEY[key].label} ({BY_KEY[key].unit})": key for key in ASKED}
    return {(by_label[row[0]], card): text for row in rows[1:] if row[0] in by_label
            for card, text in zip(header[1:], row[1:], strict=True) if card in CARD_LABELS.values()}  # fmt: skip


def _shown(keys: list[str] | None = None, cards: list[str] | None = None) -> dict[tuple[str, str], str]:
    """What a page shows of the expected figures: three significant figures, nothing where there is none."""
    return {(k, c): number(v) for (k, c), v in EXPECTED.items()
            if (keys is None or k in keys) and (cards is None or c in cards)}  # fmt: skip


def test_sql_over_http_and_the_sql_pages_example_give_the_reports_figures(site: Collector) -> None:
    assert _from_sql(_post_sql(site, _union())) == EXPECTED
    best = dict(EXAMPLES)["best matmul per card and dtype"]
    rows = {(card, dtype): tflops for card, dtype, tflops in _post_sql(site, best)}
    for key, dtype in (("matmul_bf16", "bf16"), ("matmul_fp16", "fp16")):
        for card in CARD_LABELS.values():
            assert rows.get((card, dtype)) == EXPECTED[(key, card)], (key, card)
    page = _get(site, "/sql")
    said = page.split('id="sql-trusted">')[1].split("</p>")[0]
    assert all(f">{view}<" in said for view in (*FIGURE_VIEWS, *EVERY_RESULT))
    assert all(flag in said for flag in UNTRUSTED_FLAGS)


def test_the_report_and_the_pages_show_the_same_figures(site: Collector) -> None:
    every = _shown()
    assert _comparison_cells(_markdown_table(_get(site, "/report.md"))) == every
    assert _comparison_cells(_html_table(_get(site, "/report"), "comparison")) == every
    cards = list(CARD_LABELS.values())
    assert _comparison_cells(_html_table(_get(site, "/compare", cards=cards[:2]), "comparison")) == _shown(
        cards=cards[:2]
    )
    for card in cards:  # one card's page has the rows it has a figure for
        page = _get(site, "/cards/" + quote(card, safe=""))
        has = {cell: text for cell, text in _shown(cards=[card]).items() if text}
        assert _comparison_cells(_html_table(page, "comparison")) == has, card
    # The cards page: its key columns, one row per card; blank exactly where SQL has no row.
    table = _html_table(_get(site, "/cards"), "cards")
    columns = {label: i for i, label in enumerate(table[0])}
    keyed = [(label, key) for label, key in KEY_COLUMNS if key in ASKED]
    assert {key for _, key in keyed} >= {"matmul_bf16", "matmul_fp16", "bw_copy", "bert_fwdbwd"}
    shown = {(key, row[1]): row[columns[label]] for row in table[1:] for label, key in keyed}
    assert shown == _shown(keys=[key for _, key in keyed])
    sheet = list(csv.reader(io.StringIO(_get(site, "/cards.csv"))))
    by_card = {card: i for i, card in enumerate(sheet[0])}
    rows = {row[0]: row for row in sheet[1:]}
    for (key, card), value in EXPECTED.items():
        cell = rows[f"{BY_KEY[key].label} ({BY_KEY[key].unit})"][by_card[card]]
        assert cell == ("" if value is None else str(round(value, 6))), (key, card)
    # Health holds each GPU's figures by the same rule.
    health = list(csv.DictReader(io.StringIO(_get(site, "/health.csv"))))
    for key in set(ASKED) & set(HEALTH_FIGURES):
        got = {row["card"]: float(row[key]) if row[key] else None for row in health}
        assert got == {card: value for (k, card), value in EXPECTED.items() if k == key}, key


def test_the_cli_answers_as_the_collector_does(site: Collector, tmp_path: Path) -> None:
    """``flopfleet-collector sql`` and ``report`` on a snapshot of the collector's file (it holds the file)."""
    copy = tmp_path / "copy.duckdb"
    with httpx.stream("GET", site.url + "/api/v1/snapshot", headers=site.auth, timeout=120) as answer:
        assert answer.status_code == 200
        with copy.open("wb") as out:
            for chunk in answer.iter_bytes():
                out.write(chunk)
    done = collector_cli("sql", "--db", str(copy), "--format", "json", _union())
    assert done.returncode == 0, done.stderr
    assert _from_sql([list(row.values()) for row in json.loads(done.stdout)["rows"]]) == EXPECTED
    for fmt in ("md", "html"):
        made = collector_cli("report", "--db", str(copy), "--format", fmt)
        assert made.returncode == 0, made.stderr
        table = _markdown_table(made.stdout) if fmt == "md" else _html_table(made.stdout, "comparison")
        assert _comparison_cells(table) == _shown(), fmt


def test_every_view_of_results_holds_trusted_results_and_two_hold_every_one(site: Collector) -> None:
    """Every view with results' ``flags`` is one of the figure views, each holding trusted results only (and some),
    or one of ``EVERY_RESULT``, which hold every result and say which are trusted by the same rule."""
    flagged = {v for (v,) in _post_sql(site, "SELECT table_name FROM duckdb_columns() WHERE column_name = 'flags' "
                                             "AND table_name IN (SELECT view_name FROM duckdb_views())")}  # fmt: skip
    assert flagged == {*FIGURE_VIEWS, *EVERY_RESULT}
    kinds = {b for (b,) in _post_sql(site, "SELECT DISTINCT benchmark FROM result_facts WHERE NOT trusted")}
    assert kinds == set(RESULT_KINDS)  # untrusted results of every kind for the views to leave out
    for view in FIGURE_VIEWS:
        rows = _post_sql(site, f"SELECT status, flags FROM {view}")
        assert rows and all(_trusted({"status": s, "flags": f}) for s, f in rows), view
    for view in EVERY_RESULT:
        rows = _post_sql(site, f"SELECT status, flags, trusted FROM {view}")
        assert len(rows) == sum(map(len, CARDS.values())), view
        assert [t for _, _, t in rows] == [_trusted({"status": s, "flags": f}) for s, f, _ in rows], view


def test_an_older_files_views_are_never_answered_through(tmp_path: Path) -> None:
    """A file an older collector left has views that held every result: a reader refuses it and says how to bring
    it up to date; a writer recreates its views, which then hold trusted results only."""
    db = tmp_path / "old.duckdb"
    with Store(db) as store:
        store.add_run(make_run(CARDS[A100], gpus=[gpu(A100)]))
        store.settle()
    con = duckdb.connect(str(db))
    con.execute(f"CREATE OR REPLACE VIEW matmul AS {VIEWS['matmul'].replace('trusted AND ', '')}")
    con.execute("UPDATE meta SET value = ? WHERE key = 'db_version'", [str(DB_VERSION - 1)])
    assert con.execute("SELECT count(*) FROM matmul WHERE status = 'ok' AND flags <> []").fetchone() == (2,)
    con.close()
    with pytest.raises(OlderDatabase, match="open it for writing once"):
        Store(db, read_only=True)
    with Store(db) as store:
        store.settle()
    with Store(db, read_only=True) as store:
        rows = store.sql("SELECT dtype, max(tflops) FROM matmul WHERE status = 'ok' GROUP BY ALL").rows
    assert [tuple(r) for r in rows] == [("bf16", _best("matmul_bf16", A100))]

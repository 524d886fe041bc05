"""Every collector output escaped for where it goes: runs whose names carry spreadsheet formulas, Markdown, HTML,
Rich markup and ANSI escapes, read back as a spreadsheet, a Markdown renderer, a browser and a terminal would."""

from __future__ import annotations

import csv
import html
import io
import json
import re
from collections.abc import Iterator
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import duckdb
import httpx
import pytest
from markdown_it import MarkdownIt

from collector.render.csvsafe import neutralise, neutralise_sql
from tests.conftest import collector_cli
from tests.factories import T0, bandwidth, gpu, layer, matmul, run_dict, timing
from tests.servers import Collector, serve_collector

HOST = '=HYPERLINK("http://x","y")'
NAME = "@A|B\n<script>alert(1)</script>[link=http://x]x[/]\x1b[31m"
CARD = f"{NAME} 80 GiB · 700 W"
DEVICES = ("GPU-1\n<img src=x onerror=alert(1)>", "-GPU-2\r\n@peer")
REASON = "@SUM(1+1)|<img src=x onerror=alert(1)>"
TORCH = ("+2.1|<b>bold</b>", "-3*x_[y](http://x)")
TAGS = {"team": "+1", "site": "-2+3", "who": "@me\n|x|"}
#: OWASP's list, written out here rather than imported from the code under test.
TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
SQL = (
    "SELECT d.gpu_name, d.device_id, d.hostname, d.torch, r.tags->>'team' AS team, r.tags->>'site' AS site, "
    "r.tags->>'who' AS who, x.reason, -1.5 AS negative, CAST(-2.25 AS DECIMAL(6, 2)) AS money "
    "FROM devices d JOIN runs r USING (run_id) JOIN results x USING (run_id) WHERE x.reason IS NOT NULL"
)


def _all_reduce(size: int, busbw: float) -> dict[str, Any]:
    return {
        "benchmark": "collective", "name": "collective", "gpu_index": None, "status": "ok",
        "params": {"op": "all_reduce", "backend": "nccl", "dtype": "fp32", "bytes": size, "world_size": 2},
        "metrics": {"algbw_gbps": busbw, "busbw_gbps": busbw, "rel_error": 0.0},
        "timing": timing(size / busbw / 1e9),
    }  # fmt: skip


def _hostile_runs() -> list[dict[str, Any]]:
    """Two GPUs of one hostile model under two hostile torch versions, and a two-GPU run with collectives."""
    runs = [run_dict([_all_reduce(1 << 30, 300.0)], gpus=[gpu(NAME, i, uuid=d) for i, d in enumerate(DEVICES)],
                     hostname=HOST, started=T0, tags=TAGS)]  # fmt: skip
    versions = ((TORCH[0], 300.0), (TORCH[0], 302.0), (TORCH[1], 400.0), (TORCH[1], 404.0))  # faster, clearly
    for hour, (torch, tflops) in enumerate(versions):
        skipped = {**matmul(4096, "bf16", 1.0), "status": "skipped", "reason": REASON, "metrics": None, "timing": None}
        results = [matmul(8192, "bf16", tflops), matmul(8192, "fp16", tflops), bandwidth(1 << 26, 2000.0),
                   layer("bert_layer", "fwd+bwd", 64, 512, tflops * 0.6), skipped]  # fmt: skip
        runs.append(run_dict(results, gpus=[gpu(NAME, uuid=DEVICES[hour % 2])], hostname=HOST, torch=torch,
                             started=T0 + timedelta(hours=hour + 1), tags=TAGS))  # fmt: skip
    return runs


@pytest.fixture(scope="module")
def run_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("hostile")
    paths = [folder / f"run-{i}.json" for i in range(5)]
    for path, run in zip(paths, _hostile_runs(), strict=True):
        path.write_text(json.dumps(run), encoding="utf-8")
    return paths


@pytest.fixture(scope="module")
def served(run_files: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """A real collector that took the hostile runs over HTTP, as an agent posts them."""
    with serve_collector(tmp_path_factory.mktemp("served") / "hostile.duckdb") as collector:
        for path in run_files:
            headers = {"Content-Type": "application/json", **collector.auth}
            answer = httpx.post(f"{collector.url}/api/v1/runs", content=path.read_bytes(), headers=headers)
            assert answer.status_code == 201, answer.text
        yield collector


@pytest.fixture(scope="module")
def db(run_files: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same runs stored by ``flopfleet-collector ingest``, for the CLI (a served file is held by its server)."""
    path = tmp_path_factory.mktemp("cli") / "hostile.duckdb"
    done = collector_cli("ingest", "--db", str(path), *map(str, run_files))
    assert done.returncode == 0, done.stderr
    return path


def _get(served: Collector, path: str, **params: Any) -> httpx.Response:
    return httpx.get(served.url + path, params=params)


# --- CSV: what a spreadsheet would run ---


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _cells(text: str) -> list[str]:
    """Every cell of a CSV, checked as a spreadsheet would open it: no text cell starts a formula."""
    cells = [cell for row in csv.reader(io.StringIO(text, newline="")) for cell in row]
    assert [c for c in cells if c.startswith(TRIGGERS) and not _is_number(c)] == []
    return cells


def test_page_csvs_keep_hostile_names_as_quoted_text(served: Collector) -> None:
    cards = _cells(_get(served, "/cards.csv").text)
    assert "'" + CARD in cards
    health = _cells(_get(served, "/health.csv").text)
    assert {"'" + CARD, "'" + HOST, "'" + DEVICES[1], DEVICES[0]} <= set(health)
    compare = _get(served, "/compare.csv", cards=CARD)
    assert compare.status_code == 200 and "'" + CARD in _cells(compare.text)


def _check_query_csv(text: str) -> None:
    cells = {c.replace("\r\n", "\n") for c in _cells(text)}  # a child's output read as text has \n for \r\n
    for value in (HOST, REASON, TORCH[0], TORCH[1], *TAGS.values(), DEVICES[1], NAME):
        assert "'" + value.replace("\r\n", "\n") in cells, value
    assert "-1.5" in cells and "-2.25" in cells  # numbers stay numbers, unquoted


def test_sql_csv_over_http_and_from_the_cli_keeps_text_as_text_and_numbers_as_numbers(
    served: Collector, db: Path
) -> None:
    answer = _get(served, "/api/v1/sql", sql=SQL, format="csv")
    assert answer.status_code == 200
    _check_query_csv(answer.text)
    done = collector_cli("sql", "--db", str(db), "--format", "csv", SQL)
    assert done.returncode == 0, done.stderr
    _check_query_csv(done.stdout)


def test_csv_export_neutralises_every_text_column(db: Path, tmp_path: Path) -> None:
    done = collector_cli("export", "--db", str(db), "--format", "csv", "--output", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    tables = {}
    for path in (tmp_path / "out").glob("*.csv"):
        with path.open(encoding="utf-8", newline="") as fh:  # keep a cell's \r\n as written
            tables[path.stem] = _cells(fh.read())
    assert {"'" + HOST, "'" + TORCH[0]} <= set(tables["runs"])
    assert {"'" + NAME, "'" + DEVICES[1]} <= set(tables["gpus"])
    assert "'" + REASON in tables["results"]


def test_the_sql_form_of_the_rule_is_the_same_rule() -> None:
    con = duckdb.connect()
    for text in (*TRIGGERS, "=1+1", "+x", "-2", "@a", "\tx", "\rx", "x=1", "'=", "", " =1", "A|B", "ünï"):
        shown = con.execute(f"SELECT {neutralise_sql('c')} FROM (SELECT ?::VARCHAR AS c)", [text]).fetchone()
        assert shown == (neutralise(text),), text
    assert con.execute(f"SELECT {neutralise_sql('c')} FROM (SELECT NULL::VARCHAR AS c)").fetchone() == (None,)
    assert neutralise(-1.5) == -1.5 and neutralise(None) == ""


# --- Markdown: what a permissive renderer would make of report.md ---


class _Html(HTMLParser):
    """The elements and attributes of an HTML text, and the text of each table cell."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.cells: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _cell_count(line: str) -> int:
    pipes, escaped = 0, False
    for char in line:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "|":
            pipes += 1
    return pipes - 1


def _tables(markdown: str) -> list[list[str]]:
    """Each table's lines in the Markdown source: the header, the delimiter row and the rows up to a blank line."""
    lines = markdown.split("\n")
    tables = []
    for i, line in enumerate(lines):
        if re.fullmatch(r"\|(?:-+:?\|)+", line):
            end = next((j for j in range(i + 1, len(lines)) if not lines[j]), len(lines))
            tables.append([lines[i - 1], *lines[i:end]])
    return tables


def test_markdown_report_shows_hostile_names_as_text_in_unbroken_tables(served: Collector) -> None:
    markdown = _get(served, "/report.md").text
    tables = _tables(markdown)
    assert len(tables) == 4  # cards, fleet health, multi-GPU machines, software versions
    for table in tables:
        width = _cell_count(table[1])
        for line in table:
            assert line.startswith("|") and line.endswith("|") and _cell_count(line) == width, line

    page = _Html()
    page.feed(MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))
    tags = {tag for tag, _ in page.elements}
    assert tags <= {"h1", "h2", "p", "em", "table", "thead", "tbody", "tr", "th", "td"}, tags
    assert [a for _, attrs in page.elements for a in attrs if a.startswith("on") or a in ("href", "src")] == []
    assert sum(tag == "tr" for tag, _ in page.elements) == sum(len(t) - 1 for t in tables)

    visible_card = CARD.replace("\n", " ").replace("\x1b", "\\e")
    assert visible_card in page.cells and HOST in page.cells
    assert "GPU-1 <img src=x onerror=alert(1)>" in page.cells and "-GPU-2 @peer" in page.cells
    assert f"torch {TORCH[1]}, CUDA 13.0, driver 580.1" in page.cells


# --- Terminal: what the collector CLI puts on a screen ---


def test_the_cli_prints_names_literally_with_control_characters_visible(db: Path, tmp_path: Path) -> None:
    table = collector_cli("sql", "--db", str(db), "SELECT DISTINCT gpu_name FROM devices")
    assert table.returncode == 0, table.stderr
    assert "\x1b" not in table.stdout and "[link=http://x]x[/]\\e[31m" in table.stdout

    health = collector_cli("health", "--db", str(db))
    assert health.returncode == 0, health.stderr
    shown = re.sub(r"[\s│┃]", "", health.stdout)  # table cells may wrap
    assert "\x1b" not in health.stdout and "[link=http://x]x[/]\\e[31m" in shown and HOST in shown

    report = collector_cli("report", "--db", str(db), "--format", "md")
    assert report.returncode == 0 and "\x1b" not in report.stdout

    bad = tmp_path / "[link=file:x]bad[blink]\x1b[2J.json"  # no "/" in a file name
    bad.write_text("{}", encoding="utf-8")
    refused = collector_cli("ingest", "--db", str(tmp_path / "other.duckdb"), str(bad))
    assert refused.returncode == 1 and "\x1b" not in refused.stderr
    assert "[link=file:x]bad[blink]\\e[2J.json" in refused.stderr

    failed = collector_cli("sql", "--db", str(db), "SELECT CAST('\x1b[31m[link=http://x]x[/]' AS INTEGER)")
    assert failed.returncode == 1 and "\x1b" not in failed.stderr
    assert "error: " in failed.stderr and "\\e[31m[link=http://x]x[/]" in failed.stderr


# --- Pages: names with control characters load, escaped ---


def test_pages_of_names_with_control_characters_load_and_show_them_as_text(served: Collector) -> None:
    card = _get(served, "/cards/" + quote(CARD, safe=""))
    assert card.status_code == 200
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in card.text and "<script>" not in card.text
    links = re.findall(r'href="(/gpus/[^"]+)"', _get(served, "/health").text)
    assert len(links) == 2
    for link in links:
        page = httpx.get(served.url + html.unescape(link))
        assert page.status_code == 200 and "<img src=x" not in page.text
    gpu = _get(served, "/gpus/" + quote(DEVICES[0], safe=""))
    assert gpu.status_code == 200 and "GPU-1\n&lt;img src=x onerror=alert(1)&gt;" in gpu.text
    run = httpx.get(served.url + html.unescape(re.findall(r'href="(/runs/[^"]+)"', gpu.text)[0]))
    assert run.status_code == 200 and html.escape(REASON, quote=False) in run.text and "<img src=x" not in run.text
    (card_link,) = re.findall(r'href="(/cards/[^"]+)"', _get(served, "/cards").text)
    assert httpx.get(served.url + html.unescape(card_link)).status_code == 200
    missing = _get(served, "/runs/not%0Aa-run")  # reaches the page (its 404), not the router's
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


# --- 4xx, never 500, for a wrong choice of cards ---


@pytest.mark.parametrize(
    ("query", "says"),
    [("", "choose 1 to 4 cards"), ("?cards=nope", "unknown card(s): 'nope'"),
     ("?cards=a&cards=b&cards=c&cards=d&cards=e", "5 chosen")],
)  # fmt: skip
def test_compare_csv_answers_a_wrong_choice_of_cards_with_400(served: Collector, query: str, says: str) -> None:
    answer = httpx.get(f"{served.url}/compare.csv{query}")
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "bad_request" and says in error["message"], error


def test_piped_output_keeps_its_lines_whole_where_no_terminal_width_is_set(tmp_path: Path) -> None:
    """Into a file, ``grep`` or a script, a table's cells and a message stay on their lines: rich would otherwise
    wrap both at its default 80 columns (a token list with a 64-character name cut its cells across lines)."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    name = "fleet-" + "x" * 58
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}

    def piped(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "collector", *args, "--db", str(tmp_path / "t.duckdb")],
                              capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stdout

    piped("token", "create", "--name", name, "--scope", "write", "--scope", "read", "--scope", "admin")
    listed = piped("token", "list")
    assert any(name in line and "admin" in line and "2026" in line for line in listed.splitlines()), listed

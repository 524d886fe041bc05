"""One vocabulary (issue 30): a machine is its ``hostname`` on pages, in the report, the CSV, the CLI and every SQL
view; a SQL error keeps DuckDB's hints and caret, paths still cut; the SQL page lists every view with its columns;
numbers keep their significant figures (a CPU's 0.004 TFLOPS is not 0.0), chart axes read distinct ticks at any
range, a chart of a figure is titled as its table row, and a CPU run's absent CUDA reads as absent, not None."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from collector.analysis.compare import Series
from collector.render.svg import line_chart, strip_chart
from collector.store.figures import BY_KEY
from collector.store.sqlviews import ABOUT, UNDER
from schemas.labels import HOSTNAME
from tests.conftest import ROOT, collector_cli
from tests.factories import matmul, run_dict
from tests.servers import Collector, serve_collector

CPU_HOSTS = {"c0": 0.004, "c1": 0.0045, "c2": 0.005}  # a CPU's BF16 matmul, TFLOPS
CPU_SOFTWARE = {"python": "3.12.3", "agent": "0.1.0", "torch": "2.11.0"}
BF16 = BY_KEY["matmul_bf16"].label  # the words come from the one table, not from this test


def _cpu_runs() -> list[dict[str, Any]]:
    """Three CPU machines (one card: their CPU model), each measuring a few thousandths of a TFLOPS."""
    return [run_dict([matmul(256, "bf16", tflops, gpu_index=None), matmul(256, "fp32", tflops * 2, gpu_index=None)],
                     gpus=[], hostname=host, software=CPU_SOFTWARE) for host, tflops in CPU_HOSTS.items()]  # fmt: skip


@pytest.fixture(scope="module")
def cpu_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("cpu-runs")
    paths = []
    for i, run in enumerate(_cpu_runs()):
        paths.append(folder / f"run-{i}.json")
        paths[-1].write_text(json.dumps(run), encoding="utf-8")
    return paths


@pytest.fixture(scope="module")
def cpu_site(cpu_files: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """A real collector that took the CPU runs over HTTP, as agents post them."""
    with serve_collector(tmp_path_factory.mktemp("cpu-site") / "cpu.duckdb") as served:
        for path in cpu_files:
            answer = httpx.post(f"{served.url}/api/v1/runs", content=path.read_bytes(),
                                headers={"Content-Type": "application/json", **served.auth})  # fmt: skip
            assert answer.status_code == 201, answer.text
        yield served


@pytest.fixture(scope="module")
def cpu_db(cpu_files: list[Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same runs stored by ``flopfleet-collector ingest``, for the CLI (a served file is its server's)."""
    path = tmp_path_factory.mktemp("cpu-cli") / "cpu.duckdb"
    done = collector_cli("ingest", "--db", str(path), *map(str, cpu_files))
    assert done.returncode == 0, done.stderr
    return path


def _get(site: Collector, path: str, **params: object) -> httpx.Response:
    answer = httpx.get(site.url + path, params=params)  # type: ignore[arg-type]
    assert answer.status_code == 200, (path, answer.text[-2000:])
    return answer


def _sql(site: Collector, sql: str) -> list[list[Any]]:
    answer = httpx.post(f"{site.url}/api/v1/sql", json={"sql": sql})
    assert answer.status_code == 200, answer.text
    rows: list[list[Any]] = answer.json()["rows"]
    return rows


def _headers(page: str) -> list[str]:
    return [html.unescape(h) for h in re.findall(r"<th[^>]*>([^<]*)</th>", page)]


# --- one word for a machine ---


def test_a_machine_is_its_hostname_on_pages_in_the_report_the_csv_and_every_sql_view(site: Collector) -> None:
    health = _get(site, "/health").text
    device = health.split('href="/gpus/')[1].split('"')[0]
    run_id = _get(site, "/").text.split('href="/runs/')[1].split('"')[0]
    for path in ("/", "/health", f"/gpus/{device}", f"/runs/{run_id}", "/report"):
        headers = _headers(_get(site, path).text)
        assert HOSTNAME in headers and "host" not in headers, (path, headers)
    assert f"| GPU | card | {HOSTNAME} | verdict |" in _get(site, "/report.md").text
    assert _get(site, "/health.csv").text.splitlines()[0].split(",")[:3] == ["gpu", "card", HOSTNAME]
    named = _sql(site, "SELECT DISTINCT table_name, column_name FROM duckdb_columns() "
                       "WHERE column_name IN ('host', 'hostname') ORDER BY ALL")  # fmt: skip
    assert {column for _, column in named} == {HOSTNAME}  # no view or table says `host`
    assert {"runs", "devices", "result_facts", "matmul", "inference", "collectives", "gpu_counters"} <= {
        table for table, _ in named
    }
    assert _sql(site, f"SELECT {HOSTNAME}, count(*) FROM runs GROUP BY ALL")  # the query, in the one word


def test_the_cli_health_table_says_hostname(cpu_db: Path) -> None:
    done = collector_cli("health", "--db", str(cpu_db))
    assert done.returncode == 0, done.stderr
    assert re.search(rf"\bGPU\b.*\bcard\b.*\b{HOSTNAME}\b.*\bverdict\b", done.stdout), done.stdout


# --- SQL errors keep DuckDB's hints ---


def _caret(message: str) -> str:
    """The part of the query's echoed line that the caret line under it marks."""
    lines = message.splitlines()
    at = next(i for i, line in enumerate(lines) if re.fullmatch(r" *\^+", line))
    start, end = lines[at].index("^"), len(lines[at])
    return lines[at - 1][start:end]


def test_a_sql_error_keeps_duckdbs_hint_and_caret_with_paths_still_cut(site: Collector) -> None:
    answer = httpx.post(f"{site.url}/api/v1/sql", json={"sql": "SELECT host, count(*) FROM runs GROUP BY host"})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "query_failed"
    assert 'Referenced column "host" not found' in error["message"]
    assert 'Candidate bindings: "hostname"' in error["message"]  # the hint that names the right word
    assert "LINE 1: SELECT host, count(*) FROM runs GROUP BY host" in error["message"]
    assert _caret(error["message"]) == "host"

    server_path = f"{site.db.parent}/private/fleet.csv"
    answer = httpx.post(f"{site.url}/api/v1/sql", json={"sql": f"SELECT * FROM read_csv('{server_path}')"})
    message = answer.json()["error"]["message"]
    assert str(site.db.parent) not in message and "…/fleet.csv" in message
    # The caret moved with the cut line. DuckDB ends the echoed line at 60 characters, so how much of the (cut)
    # path shows depends on where the test's folder is; the path is cut either way.
    assert _caret(message).startswith("read_csv('…/")

    page = _get(site, "/sql", sql="SELECT host FROM runs").text
    shown = html.unescape(page.split('<pre class="error" id="sql-error">')[1].split("</pre>")[0])
    assert 'Candidate bindings: "hostname"' in shown and _caret(shown) == "host"


def test_the_sql_cli_prints_duckdbs_hint_and_caret_on_their_own_lines(cpu_db: Path) -> None:
    done = collector_cli("sql", "--db", str(cpu_db), "SELECT host FROM runs")
    assert done.returncode == 1
    lines = done.stderr.splitlines()
    assert lines[0] == 'error: Binder Error: Referenced column "host" not found in FROM clause!'
    assert lines[1].startswith('Candidate bindings: "hostname"')
    assert _caret(done.stderr) == "host"


# --- the SQL page lists every view ---


def test_the_sql_page_lists_every_view_with_its_columns(site: Collector) -> None:
    views = {row[0] for row in _sql(site, "SELECT view_name FROM duckdb_views() WHERE NOT internal")}
    assert views == set(ABOUT)  # every view the store creates is described; none described is missing
    columns: dict[str, list[str]] = {}
    for table, column in _sql(site, "SELECT table_name, column_name FROM duckdb_columns() ORDER BY column_index"):
        columns.setdefault(table, []).append(column)
    page = _get(site, "/sql").text
    for name in [*ABOUT, *UNDER]:
        row = page.split(f'<tr id="view-{name}">')[1].split("</tr>")[0]
        shown = re.findall(r"<code title=\"[^\"]*\">([^<]+)</code>", row)
        assert shown == columns[name], name
    doc = (ROOT / "docs" / "reports-and-sql.md").read_text().split("## Querying with SQL")[1].split("\n## ")[0]
    assert [name for name in ABOUT if f"`{name}`" not in doc] == []


# --- numbers, axes, chart titles, absent versions ---


def test_a_cpus_thousandths_of_a_tflops_keep_their_significant_figures(cpu_site: Collector) -> None:
    report = _get(cpu_site, "/report.md").text
    assert f"| {BF16} (TFLOPS) | 0.00450 (0.00400–0.00500, n=3) |" in report, report
    assert f"| {BY_KEY['matmul_fp32'].label} (TFLOPS) | 0.00900 (0.00800–0.0100, n=3) |" in report
    assert not re.search(r"\| 0\.0 ", report)
    run_id = _get(cpu_site, "/").text.split('href="/runs/')[1].split('"')[0]
    assert re.search(r">0\.00[45]\d0 TFLOPS<", _get(cpu_site, f"/runs/{run_id}").text.split('id="results"')[1])


def _axis_labels(svg: str, anchor: str) -> list[str]:
    """The texts of a chart written alone at an anchor: its y axis' ticks (``end``), or its x axis' ticks and name
    (``middle``)."""
    found = re.findall(rf'<text x="[^"]+" y="[^"]+" text-anchor="{anchor}">([^<]+)</text>', svg)
    return [html.unescape(t) for t in found]


@pytest.mark.parametrize("values", [(0.004, 0.0045, 0.005), (0.00011, 0.00012), (980_000.0, 1_200_000.0), (707.5,)])
def test_chart_axes_have_distinct_readable_ticks_at_any_range(values: tuple[float, ...]) -> None:
    strip = strip_chart("spread", {"CPU": [(f"d{i}", v) for i, v in enumerate(values)]}, x_label="TFLOPS")
    line = line_chart("line", [Series("CPU", [(2.0**i, v) for i, v in enumerate(values)])], x_label="n",
                      y_label="TFLOPS")  # fmt: skip
    for ticks, covered in ((_axis_labels(strip, "middle")[:-1], values), (_axis_labels(line, "end"), (0, *values))):
        assert len(ticks) >= 3 and len(set(ticks)) == len(ticks), ticks  # not `0 0 0 1 1 1`
        assert all(re.fullmatch(r"\d{1,3}(,\d{3})*(\.\d+)?", t) for t in ticks), ticks  # no exponent
        numeric = [float(t.replace(",", "")) for t in ticks]
        assert numeric == sorted(numeric) and numeric[0] <= min(covered) and numeric[-1] >= max(covered)


def test_the_cpu_reports_spread_chart_reads_its_ticks(cpu_site: Collector) -> None:
    page = _get(cpu_site, "/report").text
    svg = page.split(f'aria-label="{BF16} of each GPU (latest run)"')[1].split("</svg>")[0]
    ticks = _axis_labels(svg, "middle")[:-1]  # the last is the axis' name
    assert ticks == ["0.00375", "0.00400", "0.00425", "0.00450", "0.00475", "0.00500", "0.00525"], ticks


def test_a_chart_of_a_figure_is_titled_as_its_table_row(site: Collector) -> None:
    page = _get(site, "/report").text
    rows = {html.unescape(r) for r in re.findall(r"<tr class=\"measured\"><td>([^<]+) \(", page)}
    titles = [html.unescape(t) for t in re.findall(r'aria-label="([^"]+)"', page)]
    assert "Memory a*1.2" in rows and "Memory a*1.2" in titles and "memory scale" not in titles
    assert {BY_KEY["matmul_fp16"].label, BF16} <= set(titles) & rows
    assert any(t.startswith("BERT layer fwd+bwd, seq ") for t in titles)


def test_a_cpu_runs_absent_versions_read_as_absent(cpu_site: Collector) -> None:
    home = _get(cpu_site, "/").text
    run_id = home.split('href="/runs/')[1].split('"')[0]
    page = _get(cpu_site, f"/runs/{quote(run_id)}").text
    software = html.unescape(page.split('<td id="software">')[1].split("</td>")[0])
    assert software == "Python 3.12.3, torch 2.11.0, agent 0.1.0; no CUDA, cuDNN, NCCL, transformers or driver"
    assert "None" not in page
    runs = home.split('<table id="runs">')[1].split("</table>")[0]
    assert "None" not in runs and "<td>none</td>" in runs  # the CUDA and driver columns of a CPU run

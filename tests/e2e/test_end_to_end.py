"""The whole path as a user takes it: agent CLI -> collector on uvicorn -> DuckDB file -> report and SQL CLIs."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import agent_cli, collector_cli
from tests.servers import serve_collector


def test_agent_posts_a_quick_cpu_run_that_the_report_and_sql_show(tmp_path: Path) -> None:
    db = tmp_path / "flopfleet.duckdb"
    with serve_collector(db) as served:
        done = agent_cli(
            "run", "--suite", "quick", "--device", "cpu", "--collector", served.url, "--token", served.token,
            "--tag", "lab=ci", "--only", "matmul,bandwidth,layer_bert,training_bert",
            "--spool-dir", str(tmp_path / "spool"), "-q", ahead=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "stored by the collector (HTTP 201)" in done.stdout
    assert not (tmp_path / "spool").exists()

    report = tmp_path / "report.html"
    made = collector_cli("report", "--db", str(db), "--format", "html", "--output", str(report))
    assert made.returncode == 0, made.stderr
    html = report.read_text()
    assert "CPU: " in html and "FP32 matmul" in html and "<svg" in html

    md = collector_cli("report", "--db", str(db), "--format", "md")
    assert md.returncode == 0 and "| FP32 matmul (TFLOPS) |" in md.stdout

    query = "SELECT name, status, count(*) AS n FROM result_facts GROUP BY ALL ORDER BY name, status"
    q = collector_cli("sql", "--db", str(db), "--format", "json", query)
    assert q.returncode == 0, q.stderr
    rows = {(r["name"], r["status"]): r["n"] for r in json.loads(q.stdout)["rows"]}
    assert rows[("matmul", "ok")] == 6 and rows[("matmul", "unsupported")] == 2
    assert rows[("layer_bert", "ok")] == 2 and rows[("training_bert", "ok")] == 1

    tags = collector_cli("sql", "--db", str(db), "--format", "csv", "SELECT tags FROM runs")
    assert json.loads(tags.stdout.splitlines()[1].strip('"').replace('""', '"')) == {"lab": "ci"}

    refused = collector_cli("sql", "--db", str(db), "DROP TABLE runs")
    assert refused.returncode == 1 and "only SELECT queries are allowed" in refused.stderr


def test_ingest_stores_run_files_once_and_names_bad_fields(tmp_path: Path, quick_run_file: Path) -> None:
    db = tmp_path / "ingest.duckdb"
    first = collector_cli("ingest", "--db", str(db), str(quick_run_file))
    assert first.returncode == 0 and "created" in first.stdout, first.stderr
    again = collector_cli("ingest", "--db", str(db), str(quick_run_file))
    assert again.returncode == 0 and "duplicate" in again.stdout
    bad = tmp_path / "bad.json"
    data = json.loads(quick_run_file.read_text())
    data["results"][0]["timing"]["median_s"] = -1
    bad.write_text(json.dumps(data))
    refused = collector_cli("ingest", "--db", str(db), str(bad))
    assert refused.returncode == 1
    assert "results.0.matmul.timing.median_s" in refused.stderr


def test_schema_command_prints_the_json_schema() -> None:
    done = collector_cli("schema")
    assert done.returncode == 0
    assert json.loads(done.stdout)["title"] == "RunSubmission"

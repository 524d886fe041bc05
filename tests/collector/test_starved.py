"""Results measured on a busy host (flag ``starved``) are kept and shown, never compared: the run page says what the
window got, the runs table and the report count them, and no figure, chart point, verdict or view of results holds
them (``result_facts`` does, with its flags; test_one_rule.py holds every answer to the same rule)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tests.conftest import collector_cli
from tests.factories import matmul, run_dict, timing
from tests.servers import serve_collector


def _starved(n: int, tflops: float) -> dict[str, object]:
    result = matmul(n, "bf16", tflops, flags=["starved"])
    result["timing"] = {**timing(2 * n**3 / tflops / 1e12), "host_wait": 0.84, "device_idle": 0.31}
    return result


def test_a_starved_result_is_shown_counted_and_in_no_figure(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    busy = run_dict([matmul(8192, "bf16", 690.0), _starved(4096, 3.0)], hostname="busy",
                    interrupted="stopped by SIGTERM")  # fmt: skip
    quiet = run_dict([matmul(8192, "bf16", 700.0)], hostname="quiet")
    with serve_collector(db) as site:
        for run in (busy, quiet):
            posted = httpx.post(site.url + "/api/v1/runs", json=run, headers=site.auth, timeout=30)
            assert posted.status_code == 201, posted.text
        page = httpx.get(f"{site.url}/runs/{busy['run_id']}", timeout=30).text
        assert "starved" in page and "waited for a CPU 84%, GPU idle 31%" in page
        assert 'id="interrupted"' in page and "stopped by SIGTERM" in page
        home = httpx.get(site.url + "/", timeout=30).text
        assert home.count(" starved</span>") == 1  # the busy run's row, not the quiet one's
        figures = httpx.post(site.url + "/api/v1/sql", headers=site.auth, timeout=30, json={
            "sql": "SELECT r.hostname, f.value FROM figures f JOIN runs r USING (run_id) "
                   "WHERE f.figure = 'matmul_bf16' ORDER BY 1"}).json()["rows"]  # fmt: skip
        assert figures == [["busy", 690.0], ["quiet", 700.0]]  # the 3 TFLOPS of the starved window is no one's best
        points = httpx.post(site.url + "/api/v1/sql", headers=site.auth, timeout=30, json={
            "sql": "SELECT x, count(*) FROM latest_points WHERE chart = 'matmul' GROUP BY x"}
        ).json()["rows"]  # fmt: skip
        assert points == [[8192.0, 1]]  # one GPU (both runs), and no point at 4096: its one result was starved
    for fmt in ("md", "html"):
        made = collector_cli("report", "--db", str(db), "--format", fmt)
        assert made.returncode == 0, made.stderr
        assert "Left out: 1 result(s) of 1 run(s) flagged starved" in made.stdout

    def sql(query: str) -> list[dict[str, object]]:
        return list(json.loads(collector_cli("sql", "--db", str(db), "--format", "json", query).stdout)["rows"])

    assert sql("SELECT flags, trusted FROM result_facts WHERE n = 4096") == [{"flags": ["starved"], "trusted": False}]
    assert sql("SELECT count(*) AS shown FROM matmul WHERE n = 4096") == [{"shown": 0}]  # as in the report

"""Named queries behind the web pages (the report's live in compare, health and regressions)."""

from __future__ import annotations

from typing import Any

import duckdb

EXAMPLES = (
    ("cards", "SELECT * FROM cards ORDER BY runs DESC"),
    ("best matmul per card and dtype",
     "SELECT card, dtype, max(tflops) AS tflops FROM matmul WHERE status = 'ok' GROUP BY ALL ORDER BY card, dtype"),
    ("BERT layer TFLOPS by batch",
     "SELECT card, seq_len, batch, mode, median(tflops) AS tflops FROM layers WHERE block = 'bert_layer' "
     "AND dtype = 'fp16' AND status = 'ok' GROUP BY ALL ORDER BY card, seq_len, mode, batch"),
    ("results that did not run",
     "SELECT card, hostname, benchmark, name, status, reason FROM result_facts WHERE status <> 'ok' LIMIT 100"),
    ("training MFU", "SELECT card, model, batch, tokens_per_s, mfu FROM training WHERE status = 'ok'"),
    ("published figures", "SELECT * FROM reference ORDER BY card, metric"),
)  # fmt: skip


def _dicts(cur: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description or []]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def cards(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    return _dicts(con.execute("SELECT * FROM cards ORDER BY gpu_name IS NULL, card"))


def card_model(con: duckdb.DuckDBPyConnection, card: str) -> str | None:
    row = con.execute("SELECT any_value(gpu_model) FROM devices WHERE card = ?", [card]).fetchone()
    return str(row[0]) if row and row[0] is not None else None


def gpu_history(con: duckdb.DuckDBPyConnection, device: str) -> list[dict[str, Any]]:
    """Every run of one GPU, newest first, with its key figures."""
    return _dicts(
        con.execute(
            """
            SELECT d.*,
                   max(f.value) FILTER (WHERE f.figure = 'matmul_bf16') AS matmul,
                   max(f.value) FILTER (WHERE f.figure = 'memory') AS memory,
                   max(f.value) FILTER (WHERE f.figure = 'bert_fwdbwd') AS bert
            FROM devices d
            LEFT JOIN figures f ON f.run_id = d.run_id AND f.gpu_index IS NOT DISTINCT FROM d.gpu_index
            WHERE d.device_id = ?
            GROUP BY ALL ORDER BY d.started_at DESC
            """,
            [device],
        )
    )


def card_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    measured = [r[0] for r in con.execute("SELECT card FROM cards ORDER BY gpu_name IS NULL, card").fetchall()]
    rows = con.execute("SELECT DISTINCT card FROM reference_values ORDER BY 1").fetchall()
    published = [r[0] + " (published)" for r in rows]
    return measured + published

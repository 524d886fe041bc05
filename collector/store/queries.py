"""Example queries for SQL users (the /sql page, docs/reports-and-sql.md); pages' own queries are ``store.reads``."""

from __future__ import annotations

#: The views of results hold trusted results only (``sqlviews.FIGURE_VIEWS``), so their examples need no filter on
#: status or flags to give the report's figures; ``result_facts`` shows the rest.
EXAMPLES = (
    ("cards", "SELECT * FROM cards ORDER BY runs DESC"),
    ("best matmul per card and dtype",
     "SELECT card, dtype, max(tflops) AS tflops FROM matmul GROUP BY ALL ORDER BY card, dtype"),
    ("BERT layer TFLOPS by batch",
     "SELECT card, seq_len, batch, mode, median(tflops) AS tflops FROM layers WHERE block = 'bert_layer' "
     "AND dtype = 'fp16' GROUP BY ALL ORDER BY card, seq_len, mode, batch"),
    ("results that did not run",
     "SELECT card, hostname, benchmark, name, status, reason FROM result_facts WHERE status <> 'ok' LIMIT 100"),
    ("results left out of the figures",
     "SELECT card, hostname, benchmark, name, dtype, tflops, gbps, flags FROM result_facts "
     "WHERE status = 'ok' AND NOT trusted ORDER BY card, benchmark LIMIT 100"),
    ("training MFU", "SELECT card, model, batch, tokens_per_s, mfu FROM training"),
    ("LLM decode against the memory bandwidth",
     "SELECT card, model, implementation, seq_len, batch, median(tokens_per_s) AS tokens_per_s, "
     "median(bandwidth_fraction) AS of_bandwidth, median(copy_fraction) AS of_copy FROM inference "
     "WHERE phase = 'decode' GROUP BY ALL ORDER BY card, model, implementation, seq_len, batch"),
    ("published figures", "SELECT * FROM reference ORDER BY card, metric"),
    ("what the tables cover (retention)", "SELECT * FROM coverage"),
)  # fmt: skip

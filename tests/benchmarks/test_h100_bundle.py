"""The bundled H100 baseline, from the runs committed under docs/results/h100/ (on the CPU): leaving each GPU out
raises no alarm but on the hosts whose pinned transfers ran 25-30 % slow, and a graded competing process's first
checks, judged again against the bundle, are caught from the smallest share that moves a figure
(benchmarks/baseline_leave_one_out.py, benchmarks/shares_judged.py)."""

from __future__ import annotations

import re
import subprocess
import sys

from benchmarks.shares_judged import judged
from schemas.baselines import BaselineIndex, bundled
from schemas.verdicts import Level
from tests.conftest import ROOT

H100 = "NVIDIA H100 80GB HBM3 79 GiB · 700 W"
SHARES = ROOT / "docs" / "results" / "h100" / "call2-runs"


def test_leaving_each_h100_out_alarms_only_on_the_slow_hosts_pinned_transfers() -> None:
    done = subprocess.run([sys.executable, "benchmarks/baseline_leave_one_out.py", "--card", "h100"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    first = re.search(r"false alarms: (\d+) of (\d+) first runs", done.stdout)
    every = re.search(r"every healthy run, each judged as a first check: (\d+) false alarms of (\d+)", done.stdout)
    assert first is not None and every is not None, done.stdout + done.stderr
    assert int(first[2]) >= 16  # 8 GPUs, a health and a standard first run each
    assert int(every[2]) > int(first[2])
    alarms = re.findall(r"^  (\w{8}) (\w+) \S+: \w+ on (.+)$", done.stdout, re.MULTILINE)
    assert len(alarms) == int(first[1]) + int(every[1])
    # The hosts whose pinned h2d read low: GPU-369c078e (…d581d407) at 37-42 GB/s in every run, GPU-7240dead
    # (…f9ac04b5) at 41.6 in its quiet standard run and 55 in its checks; every other lent machine 55. Every alarm is
    # theirs and h2d alone: BF16 matmul's 8 % (``HealthFigure.min_threshold``) holds the healthy checks that read it
    # 5.3-6.4 % low (GPU-674b31db twice in a row; docs/results/h100.md, "Every healthy run, each as a first check").
    assert alarms and all(gpu in {"d581d407", "f9ac04b5"} for gpu, _, _ in alarms), alarms
    assert all(re.fullmatch(r"h2d -\d+\.\d% / 10\.0%", on) for _, _, on in alarms), alarms


def test_bf16s_own_threshold_holds_every_healthy_h100_reading_where_the_rules_3_percent_did_not() -> None:
    done = subprocess.run([sys.executable, "benchmarks/healthy_readings.py", "--card", "h100"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    row = r"^(\w+) +(\w+) +\d+ +[\d.]+% +([+-][\d.]+)% +[+-][\d.]+% +(\d+)% +(\d+)/(\d+) +([\d.]+)% of \d+"
    found = re.findall(row, done.stdout, re.MULTILINE)
    by = {(suite, figure, int(threshold)): (float(low), int(h_fail), int(h_total), float(p_fail))
          for suite, figure, low, threshold, h_fail, h_total, p_fail in found}  # fmt: skip
    # The health profile's bf16 product at the 700 W limit: one GPU's readings up to 6 % under its own median (its
    # MAD says a fraction of a percent), which failed its own history and its peers at the rule's 3 %...
    low, history, runs, peers = by[("health", "matmul_bf16", 3)]
    assert low < -3.0 and history >= 1 and runs >= 12 and peers > 5.0
    # ...and none at its own 8 %, in either suite; the figures at full clock meet the rule's 3 % as they are.
    for suite in ("health", "standard"):
        assert by[(suite, "matmul_bf16", 8)][1] == 0 and by[(suite, "matmul_bf16", 8)][3] == 0.0
        for figure in ("matmul_fp32_4096", "memory", "bert_fwdbwd"):
            assert by[(suite, figure, 3)][1] == 0 and by[(suite, figure, 3)][3] == 0.0, figure


def test_a_half_percent_share_of_the_h100_is_caught_by_the_bundle_and_healthy_checks_are_not() -> None:
    index = BaselineIndex([(b, "bundled") for b in bundled() if any(c.card == H100 for c in b.cards)])
    checks = {label: v for label, v in judged(SHARES / "shares.json", SHARES / "shares-runs.json", index) if v}
    assert any(label.startswith("healthy") for label in checks) and "0.5% collector" in checks

    def failing(label: str) -> set[str]:
        verdict = checks[label]
        assert all(f.baseline_kind == "baseline" for f in verdict.figures if f.baseline)
        return {f.figure for f in verdict.figures if f.level is not Level.ok} - {"h2d"}  # that host's, every check

    assert all(not failing(label) for label in checks if label.startswith("healthy"))
    assert "bert_fwdbwd" in failing("0.5% collector") and checks["0.5% collector"].level is Level.slow
    assert {"matmul_fp32_4096", "memory", "bert_fwdbwd"} <= failing("2.0% collector")

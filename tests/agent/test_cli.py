"""The agent's command line, run as a user runs it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from schemas import Machine, RunSubmission
from tests.conftest import ROOT, agent_cli


def test_info_json_is_the_schema_object() -> None:
    done = agent_cli("info", "--json", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    machine = Machine.model_validate_json(done.stdout)
    assert machine.host.cpu_count >= 1
    assert machine.software.torch


def test_info_table_names_the_software() -> None:
    done = agent_cli("info", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    assert "torch" in done.stdout and "transformers" in done.stdout


def test_list_shows_every_benchmark_with_its_cases() -> None:
    done = agent_cli("list", "--suite", "standard", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    for name in (
        "matmul",
        "matmul_fp8",
        "bandwidth",
        "transfer",
        "layer_bert",
        "layer_t5_decoder",
        "training_gpt2",
        "inference",
        "collective",
        "training_ddp",
    ):
        assert name in done.stdout
    assert "all_reduce 32 KiB x2" in done.stdout  # gloo, two CPU processes


def test_the_quick_run_covers_every_family(quick_run: dict[str, object]) -> None:
    run = RunSubmission.model_validate_json(json.dumps(quick_run))
    assert run.suite == "quick" and run.device == "cpu" and run.gpus == ()
    names = {r.name for r in run.results}
    assert names == {"matmul", "matmul_fp8", "bandwidth", "transfer", "layer_bert", "layer_gpt2",
                     "layer_t5_encoder", "layer_t5_decoder", "training_bert", "training_gpt2", "inference",
                     "collective", "training_ddp"}  # fmt: skip
    statuses = {(r.name, r.status) for r in run.results}
    # The machine-wide benchmarks run as two gloo processes on a CPU, and say so.
    machine = {(r.name, r.status) for r in run.results if r.gpu_index is None and r.benchmark != "matmul"}
    assert {m for m in machine if m[0] in ("collective", "training_ddp")} == {
        ("collective", "ok"),
        ("training_ddp", "ok"),
    }
    assert ("transfer", "unsupported") in statuses and ("matmul_fp8", "unsupported") in statuses
    ok = [r for r in run.results if r.status == "ok"]
    assert len(ok) >= 20


def test_unknown_names_and_devices_fail_with_the_allowed_values() -> None:
    done = agent_cli("run", "--device", "cpu", "--only", "matmull", "-q")
    assert done.returncode == 1
    assert "unknown benchmark 'matmull'" in done.stderr and "layer_bert" in done.stderr
    done = agent_cli("run", "--device", "tpu", "-q")
    assert done.returncode == 1 and "cuda, cpu" in done.stderr
    done = agent_cli("run", "--device", "cpu", "--tag", "novalue", "-q")
    assert done.returncode == 1 and "key=value" in done.stderr
    done = agent_cli("run", "--device", "cpu", "--parallel", "-q")
    assert done.returncode == 1 and "--parallel measures several GPUs at once; it needs --device cuda" in done.stderr
    done = agent_cli("run", "--device", "cpu", "--nnodes", "2", "--node-rank", "0", "-q")
    assert done.returncode == 1 and "needs --master-port" in done.stderr


def test_push_without_a_collector_says_so(tmp_path: object) -> None:
    done = agent_cli("push", env={"FLOPFLEET_COLLECTOR": ""})
    assert done.returncode == 1
    assert "--collector" in done.stderr


HOSTILE = "[/] [link=http://x]x[/link] \x1b]0;owned\x07\x1b[31m\r"


def test_names_reasons_and_machine_facts_are_printed_literally() -> None:
    import io

    from rich.console import Console

    from agent.cli import render
    from schemas import Machine
    from tests.factories import gpu, make_run, matmul

    failed = matmul(64, "fp32", 1.0, status="error", reason=HOSTILE, metrics=None, timing=None)
    run = make_run([matmul(64, "fp32", 1.0), failed], gpus=[gpu(name=HOSTILE)], hostname=HOSTILE)
    machine = Machine(host=run.host, software=run.software, gpus=run.gpus)
    console = Console(file=io.StringIO(), width=2000, color_system=None)
    for renderable in (render.summary_table(run), render.machine_table(machine), *render.problems(run)):
        console.print(renderable)  # as the CLI prints them; rich would raise MarkupError on a '[/]' read as markup
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b" not in shown and "\x07" not in shown and "\r" not in shown
    assert shown.count("[/] [link=http://x]x[/link] \\e]0;owned\\x07\\e[31m\\r") == 3  # hostname, GPU, reason
    assert "matmul: error: [/] [link=http://x]" in shown


def test_the_summary_names_each_error_counter_that_moved_and_stays_quiet_otherwise() -> None:
    from agent.cli import render
    from tests.factories import gpu, make_run, matmul

    before = {"ecc_uncorrected_volatile": 0, "pcie_replays": 7, "remapped_rows_failed": False, "nvlink_links": 18,
              "nvlink_links_down": 0}  # fmt: skip
    after = {**before, "ecc_uncorrected_volatile": 2, "remapped_rows_failed": True, "nvlink_links_down": 1}
    broken = gpu(counters_before=before, counters_after=after, xid_events=[{"xid": 79, "t_s": 1.0}] * 2)
    quiet = gpu(index=1, counters_before=before, counters_after=before, xid_events=[])
    unknown = gpu(index=2)  # NVML said nothing: no counters, nothing to say
    lines = [str(t) for t in render.problems(make_run([matmul(64, "fp32", 1.0)], gpus=[broken, quiet, unknown]))]
    assert lines == [
        "GPU 0: uncorrectable ECC errors +2 during the run (0 → 2)",
        "GPU 0: a row remap failed (the GPU could not replace a faulty memory row)",
        "GPU 0: 1 of 18 NVLink links down",
        "GPU 0: 2 XID event(s) during the run: XID 79",
    ]


def test_the_run_summary_off_a_terminal_keeps_every_name_and_figure_whole(quick_run_file: Path) -> None:
    """Piped (cron, Slurm, CI logs, ``| tee``): no terminal width to fit, so nothing is cut to ``training…``, and a
    CPU's figures keep three significant digits instead of ``0.00 TFLOPS``. A real child process, stdout a pipe."""
    show = ("import sys; from agent.cli import render; from agent.cli.common import out; from schemas import "
            "RunSubmission; run = RunSubmission.model_validate_json(open(sys.argv[1]).read()); "
            "out.print(render.summary_table(run))")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run([sys.executable, "-c", show, str(quick_run_file)], capture_output=True, text=True, env=env,
                          cwd=ROOT, check=True)  # fmt: skip
    assert "…" not in done.stdout
    run = RunSubmission.model_validate_json(quick_run_file.read_text())
    for name in {r.name for r in run.results}:
        assert f"│ {name} " in done.stdout, name
    assert max(len(line) for line in done.stdout.splitlines()) > 80  # wider than rich's default off a terminal
    assert not re.search(r" 0\.00 ", done.stdout)
    assert re.search(r" 0\.0\d{2,} TFLOPS", done.stdout), done.stdout  # the CPU's layers: 0.0161, three digits

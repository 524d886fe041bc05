"""``--parallel``: each GPU's device benchmarks in its own agent process, all GPUs at once.

One after another (the default) keeps the GPUs from disturbing each other's figures through shared power,
cooling and host threads; at once shows what each GPU delivers while the others are busy, and takes a
fraction of the time. Results measured this way carry the flag 'parallel'.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from schemas import Result, RunSubmission

from .benchmarks import AnyBenchmark, Benchmark
from .config import RunConfig
from .runner import CaseEvent, ProgressFn, failed_result, planned
from .target import Target


def run_parallel(
    config: RunConfig, benchmarks: Sequence[AnyBenchmark], targets: Sequence[Target], on_event: ProgressFn | None
) -> list[Result]:
    """Every device benchmark on every target, one agent process per target, all started together."""
    device = [b for b in benchmarks if isinstance(b, Benchmark)]
    if not device:
        return []
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="flopfleet-parallel-") as tmp:
        procs = []
        for target in targets:
            output = Path(tmp) / f"gpu{target.index}.json"
            command = [
                sys.executable, "-m", "agent", "run", "--quiet",
                "--suite", config.suite, "--device", "cuda", "--gpus", str(target.index),
                "--attn", config.attn_implementation,
                "--only", ",".join(b.NAME for b in device),
                "--output", str(output),
            ]  # fmt: skip
            if config.time_budget_s:
                command += ["--time-budget", str(config.time_budget_s)]
            log = open(Path(tmp) / f"gpu{target.index}.log", "wb")  # noqa: SIM115 - closed below
            procs.append((target, output, log, subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)))
        for done, (target, output, log, proc) in enumerate(procs):
            code = proc.wait()
            log.close()
            results += _collect(target, output, code, device, Path(log.name))
            if on_event is not None:
                on_event(CaseEvent(done + 1, len(procs), "parallel", f"GPU {target.index} done", target.label))
    return results


def _collect(target: Target, output: Path, code: int, device: Sequence[Benchmark[object]], log: Path) -> list[Result]:
    """The child's results flagged 'parallel', or one error per planned case when it left none."""
    if code == 0 and output.exists():
        child = RunSubmission.model_validate_json(output.read_text(encoding="utf-8"))
        return [r.model_copy(update={"flags": tuple(dict.fromkeys((*r.flags, "parallel")))}) for r in child.results]
    tail = [line for line in log.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    reason = f"the process measuring GPU {target.index} exited with code {code}"
    reason += f": {tail[-1][:300]}" if tail else ""
    return [failed_result(b, c, target, "error", reason) for t, b, c in planned(device, [target]) if t is not None]

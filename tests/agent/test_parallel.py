"""--parallel's merge of its per-GPU child runs, on real run files (the GPU half runs under ``make test-gpu``)."""

from __future__ import annotations

from pathlib import Path

from agent.benchmarks.matmul import MatmulBenchmark, MatmulGrid
from agent.parallel import _collect
from agent.target import cpu_target


def test_a_childs_run_file_is_merged_with_every_result_flagged_parallel(quick_run_file: Path, tmp_path: Path) -> None:
    log = tmp_path / "gpu0.log"
    log.write_text("")
    results = _collect(cpu_target(), quick_run_file, 0, [], log)
    assert len(results) >= 20
    assert all("parallel" in r.flags for r in results)


def test_a_child_that_died_gives_each_of_its_cases_an_error_with_its_last_words(tmp_path: Path) -> None:
    log = tmp_path / "gpu3.log"
    log.write_text("loading\nRuntimeError: CUDA error: an illegal memory access was encountered\n")
    bench = MatmulBenchmark(MatmulGrid(sizes=(128, 256), dtypes=("fp32",)))
    results = _collect(cpu_target(), tmp_path / "missing.json", 1, [bench], log)
    assert [r.status for r in results] == ["error", "error"]
    assert results[0].reason == (
        "the process measuring GPU None exited with code 1: RuntimeError: CUDA error: an illegal memory access was "
        "encountered"
    )

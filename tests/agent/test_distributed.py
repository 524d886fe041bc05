"""Worker groups on the CPU with gloo: the collectives' answers and formulas, DDP scaling, failures, two nodes."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from agent.benchmarks import REGISTRY, GroupBenchmark
from agent.benchmarks.collective import CollectiveBenchmark
from agent.benchmarks.collective_rank import BUS_FACTOR, bandwidths, elements
from agent.distributed.launch import Group, Record, Task, free_port, launch
from agent.distributed.nodes import Nodes, first_host, from_launcher
from agent.distributed.worker import rank_code
from agent.errors import ConfigError
from agent.timing import GroupPolicy
from schemas import CollectiveParams
from tests.conftest import agent_cli
from tests.servers import Collector

KiB = 1 << 10
Cases = tuple[dict[str, object], ...]
POLICY = GroupPolicy(warmup=1, repeats=3, repeat_s=1e-3, max_calls=5)


def _cases(ops: tuple[str, ...], sizes: tuple[int, ...], world: int, dtype: str = "fp32") -> Cases:
    return tuple(
        CollectiveParams(op=op, backend="gloo", dtype=dtype, bytes=size, world_size=world).model_dump(mode="json")  # type: ignore[arg-type]
        for op in ops
        for size in sizes
    )


def _run(
    cases: tuple[dict, ...], procs: int, env: dict[str, str] | None = None, timeout_s: float = 120
) -> list[Record]:  # type: ignore[type-arg]
    task = Task(kind=CollectiveBenchmark.WORKER, cases=cases, policy=POLICY, timeout_s=timeout_s)
    return list(launch(task, Group("gloo", (None,) * procs), {**os.environ, **(env or {})}))


def test_bus_bandwidth_follows_nccl_tests() -> None:
    # nccl-tests (doc/PERFORMANCE.md): all-reduce busbw = algbw * 2(n-1)/n; all-gather, reduce-scatter (n-1)/n.
    assert bandwidths("all_reduce", 8 * 10**9, 0.5, 8) == pytest.approx((16.0, 16.0 * 14 / 8))
    assert bandwidths("all_gather", 10**9, 0.01, 4) == pytest.approx((100.0, 75.0))
    assert bandwidths("reduce_scatter", 10**9, 0.01, 2) == pytest.approx((100.0, 50.0))
    assert [BUS_FACTOR["all_reduce"](n) for n in (2, 4, 8)] == [1.0, 1.5, 1.75]
    assert elements(1000, "fp32", 3) == 249 and elements(8, "bf16", 4) == 4


def test_each_group_family_names_rank_code_a_worker_can_import_and_nothing_else_is_imported() -> None:
    families = [cls for cls in REGISTRY.values() if issubclass(cls, GroupBenchmark)]
    assert len(families) == 2
    for family in families:
        assert family.WORKER.startswith("agent.benchmarks.")  # the rank code lives with its family
        assert callable(rank_code(family.WORKER))
    for foreign in ("os:system", "agent.benchmarks.collective_rank", "agent.x:1 or 2"):
        with pytest.raises(ValueError, match=r"is not 'agent\.module:function'"):
            rank_code(foreign)


@pytest.mark.parametrize("procs", [2, 4])
def test_every_collective_gives_the_exact_answer_and_consistent_bandwidths(procs: int) -> None:
    ops = ("all_reduce", "all_gather", "reduce_scatter")
    records = _run(
        _cases(ops, (4 * KiB, 256 * KiB), procs) + _cases(("all_reduce",), (64 * KiB,), procs, "bf16"), procs
    )
    assert [r.status for r in records] == ["ok"] * 7, [(r.status, r.reason) for r in records]
    for record in records:
        assert record.params is not None and record.metrics is not None and record.timing is not None
        params = record.params
        assert (params["world_size"], params["backend"], params["nodes"]) == (procs, "gloo", 1)
        assert params["bytes"] % (procs * 4 if params["dtype"] == "fp32" else procs * 2) == 0
        metrics = record.metrics
        assert metrics["rel_error"] == 0.0 and "wrong_result" not in record.flags
        algbw = params["bytes"] / record.timing["median_s"] / 1e9
        assert metrics["algbw_gbps"] == pytest.approx(algbw)
        assert metrics["busbw_gbps"] == pytest.approx(algbw * BUS_FACTOR[params["op"]](procs))
        assert record.timing["repeats"] == POLICY.repeats


def _fault(tmp_path: Path, body: str, ranks: tuple[str, ...] = ("1",)) -> dict[str, str]:
    """A sitecustomize that breaks torch's all-gather in ``ranks`` of the first group only: a real fault, outside
    our code, that the launcher has to survive."""
    site = tmp_path / "site"
    site.mkdir()
    marker = tmp_path / "fault.done"
    (site / "sitecustomize.py").write_text(
        textwrap.dedent(f"""
        import os, pathlib
        if os.environ.get("RANK") in {ranks!r} and not pathlib.Path({str(marker)!r}).exists():
            import torch.distributed as dist

            def broken(*args, **kwargs):
                pathlib.Path({str(marker)!r}).touch()
                {body}

            dist.all_gather_single = dist.all_gather_into_tensor = broken
    """)
    )
    return {"PYTHONPATH": os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH"))))}


def test_a_rank_that_dies_fails_its_case_and_a_fresh_group_runs_the_rest(tmp_path: Path) -> None:
    env = _fault(tmp_path, "os._exit(7)")
    records = _run(_cases(("all_reduce", "all_gather", "reduce_scatter"), (4 * KiB,), 2), 2, env)
    assert [r.status for r in records] == ["ok", "error", "ok"]
    assert records[1].reason is not None and records[1].reason.startswith("rank 1 exited with code 7")
    assert records[2].metrics is not None and records[2].metrics["rel_error"] == 0.0


def test_a_rank_that_raises_reports_its_error_and_out_of_memory_is_oom(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    records = _run(
        _cases(("all_gather", "all_reduce"), (4 * KiB,), 2), 2, _fault(tmp_path / "a", "raise ValueError('bad buffer')")
    )
    assert (records[0].status, records[0].reason) == ("error", "rank 1: ValueError: bad buffer")
    assert records[1].status == "ok"
    (tmp_path / "b").mkdir()
    oom = 'raise RuntimeError("DefaultCPUAllocator: can\'t allocate memory: you tried to allocate 8 GiB")'
    records = _run(_cases(("all_gather",), (4 * KiB, 8 * KiB), 2), 2, _fault(tmp_path / "b", oom))
    assert [r.status for r in records] == ["oom", "ok"]


def test_a_hung_group_is_stopped_after_the_timeout(tmp_path: Path) -> None:
    # Every rank hangs outside a collective, so only the launcher's watchdog can notice; the fresh group's start
    # (torch's import, the rendezvous: over 4 s on a loaded 2-core machine) is not counted against the case.
    env = _fault(tmp_path, "import time; time.sleep(3600)", ranks=("0", "1"))
    records = _run(_cases(("all_gather", "all_reduce"), (4 * KiB,), 2), 2, env, timeout_s=4)
    assert [r.status for r in records] == ["error", "ok"]
    assert records[0].reason == "no progress for 4 s; the worker group was stopped"


def test_a_report_cut_short_by_the_stop_is_no_report(tmp_path: Path) -> None:
    # CI on a loaded machine: a rank whose collective failed had begun its fail.<rank>.json when the watchdog's stop
    # came, and the empty file crashed the whole run. Rank 1 leaves just such a file (the worker's workdir is its
    # first argument) and hangs; the case is the watchdog's error and the run goes on.
    torn = "import sys; pathlib.Path(sys.argv[1], 'fail.1.json').write_text(''); import time; time.sleep(3600)"
    records = _run(_cases(("all_gather", "all_reduce"), (4 * KiB,), 2), 2, _fault(tmp_path, torn), timeout_s=4)
    assert [r.status for r in records] == ["error", "ok"], [(r.status, r.reason) for r in records]
    # Whichever notices first names the 4 s: rank 0's gloo timeout (its own whole report) or the watchdog.
    reason = records[0].reason or ""
    assert "Timed out waiting 4000ms" in reason or reason == "no progress for 4 s; the worker group was stopped"


def test_a_slow_start_is_not_a_hung_case(tmp_path: Path) -> None:
    # Rank 1 takes 6 s to start (as torch's import does on a loaded machine); the 4 s case timeout starts only
    # once every rank has joined, and the rendezvous waits for the slow rank.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os, time\nif os.environ.get('RANK') == '1':\n    time.sleep(6)\n")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH"))))}
    records = _run(_cases(("all_reduce", "all_gather"), (4 * KiB,), 2), 2, env, timeout_s=4)
    assert [r.status for r in records] == ["ok", "ok"], [(r.status, r.reason) for r in records]


def test_case_timeout_bounds_a_worker_group_too_and_the_run_is_still_written(tmp_path: Path) -> None:
    # --case-timeout reaches the group launcher as it reaches the device one: the hung all-gather is stopped at 4 s
    # (the family's own limit is 300 s) and the other collectives of the run are measured.
    out = tmp_path / "run.json"
    env = _fault(tmp_path, "import time; time.sleep(3600)")
    done = agent_cli("run", "--suite", "quick", "--device", "cpu", "--only", "collective", "--case-timeout", "4",
                     "-q", "--output", str(out), env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    results = json.loads(out.read_text())["results"]
    hung = [r for r in results if r["status"] == "error"]
    assert len(hung) == 1 and hung[0]["params"]["op"] == "all_gather", [(r["params"], r["status"]) for r in results]
    # Whichever notices first names the 4 s: gloo's own timeout in the waiting rank (the workers set it from the
    # task's), or the launcher's watchdog.
    assert "Timed out waiting 4000ms" in hung[0]["reason"] or hung[0]["reason"].startswith("no progress for 4 s")
    assert sum(r["status"] == "ok" for r in results) == len(results) - 1 > 0


def test_a_case_a_worker_cannot_run_is_unsupported_and_the_rest_still_run() -> None:
    records = _run(_cases(("all_reduce",), (6, 4 * KiB), 4), 4)  # 6 bytes: not one fp32 element per rank
    assert [r.status for r in records] == ["unsupported", "ok"]
    assert records[0].reason == "ranks 0, 1, 2, 3: 6 bytes is less than one fp32 element per rank"


def test_a_group_whose_first_start_fails_is_started_again(tmp_path: Path) -> None:
    # As a rendezvous connection reset under load does: rank 1 dies before the ranks meet, once.
    marker = tmp_path / "died.once"
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        f"import os, pathlib\nm = pathlib.Path({str(marker)!r})\n"
        "if os.environ.get('RANK') == '1' and not m.exists():\n    m.touch()\n    os._exit(9)\n"
    )
    records = _run(_cases(("all_reduce",), (4 * KiB, 8 * KiB), 2), 2, {"PYTHONPATH": str(site)})
    assert marker.exists()
    assert [r.status for r in records] == ["ok", "ok"], [(r.status, r.reason) for r in records]


def test_a_group_that_cannot_start_fails_every_case_at_once(tmp_path: Path) -> None:
    bad = {"FLOPFLEET_BACKEND_OVERRIDE": "", "PYTHONPATH": str(tmp_path / "nothing")}
    (tmp_path / "nothing").mkdir()
    (tmp_path / "nothing" / "sitecustomize.py").write_text("import os\nos._exit(5)\n")
    records = _run(_cases(("all_reduce",), (4 * KiB, 8 * KiB, 16 * KiB), 2), 2, bad)
    assert [r.status for r in records] == ["error"] * 3
    assert records[0].reason is not None and "exited with code 5" in records[0].reason
    assert all(r.reason is not None and r.reason.startswith("the worker group never started") for r in records[1:])


def test_data_parallel_training_reports_scaling_against_one_process(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    done = agent_cli("run", "--suite", "quick", "--device", "cpu", "--only", "training_ddp", "-q", "--output", str(out))
    assert done.returncode == 0, done.stderr
    one, two = json.loads(out.read_text())["results"]
    assert (one["status"], two["status"]) == ("ok", "ok")
    assert (one["params"]["world_size"], two["params"]["world_size"]) == (1, 2)
    assert two["metrics"]["samples_per_s"] == pytest.approx(2 * two["params"]["batch"] / two["timing"]["median_s"])
    assert two["metrics"]["scaling_efficiency"] == pytest.approx(
        two["metrics"]["tokens_per_s"] / (2 * one["metrics"]["tokens_per_s"])
    )
    assert one["gpu_index"] is None and two["gpu_index"] is None


@pytest.mark.parametrize("launcher", ["by hand and srun", "torchrun"])
def test_two_nodes_on_one_host_each_post_a_run_with_the_same_collective_figures(
    collector: Collector, launcher: str
) -> None:
    import subprocess
    import sys

    import httpx

    script = str(Path(__file__).resolve().parents[2] / "scripts" / "multinode.sh")
    port = str(free_port())
    base = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "FLOPFLEET_DEVICE": "cpu",
        "FLOPFLEET_AGENT": f"{sys.executable} -m agent",
    }
    args = [script, collector.url, collector.token, "--suite", "quick", "--only", "collective", "-q"]
    # Node 0 is told its place by hand; node 1 learns it as under `srun --ntasks-per-node 1`.
    by_hand = {"NNODES": "2", "NODE_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}
    slurm = {"SLURM_NNODES": "2", "SLURM_NODEID": "1", "SLURM_JOB_NODELIST": "localhost", "MASTER_PORT": port}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
                "--master-addr=127.0.0.1", f"--master-port={port}", "--no-python"]  # fmt: skip
    commands = (
        [([*args, "--tag", "node=0"], by_hand), ([*args, "--tag", "node=1"], slurm)]
        if launcher != "torchrun"
        else [([*torchrun, f"--node-rank={i}", *args, "--tag", f"node={i}"], {}) for i in range(2)]
    )
    nodes = [
        subprocess.Popen(command, env={**base, **layout}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for command, layout in commands
    ]
    outputs = [node.communicate(timeout=300) for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs
    sql = ("SELECT json_extract_string(r.tags, '$.node') AS node, c.op, c.bytes, c.world_size, c.nodes, c.busbw_gbps "
           "FROM collectives c JOIN runs r USING (run_id) ORDER BY node, c.op, c.bytes")  # fmt: skip
    answer = httpx.get(f"{collector.url}/api/v1/sql", params={"sql": sql}, headers=collector.auth)
    assert answer.status_code == 200, answer.text
    rows = answer.json()["rows"]
    assert len(rows) == 12
    by_node = {n: [r[1:] for r in rows if r[0] == str(n)] for n in (0, 1)}
    assert by_node[0] == by_node[1]  # one measurement, reported by each node
    assert {(r[3], r[4]) for r in rows} == {(4, 2)}


def test_node_layouts_from_torchrun_and_slurm() -> None:
    torchrun = {"TORCHELASTIC_RUN_ID": "x", "GROUP_RANK": "1", "WORLD_SIZE": "3", "MASTER_ADDR": "n0",
                "MASTER_PORT": "29400"}  # fmt: skip
    assert from_launcher(torchrun) == Nodes(count=3, rank=1, master_addr="n0", master_port=29401)
    slurm = {"SLURM_NNODES": "4", "SLURM_NODEID": "2", "SLURM_JOB_NODELIST": "gpu[07-10],x"}
    assert from_launcher(slurm) == Nodes(count=4, rank=2, master_addr="gpu07", master_port=29511)
    assert first_host("a1,b2") == "a1" and first_host("gpu[3,5-6]") == "gpu3" and first_host("") is None
    with pytest.raises(ConfigError, match="neither torchrun"):
        from_launcher({})
    with pytest.raises(ConfigError, match=r"--node-rank 2 must be in 0\.\.1"):
        Nodes(count=2, rank=2, master_port=1)
    with pytest.raises(ConfigError, match="needs --master-port"):
        Nodes(count=2, rank=0)

"""CUDA-only paths, run on the GPU machine with ``make test-gpu`` (``make test`` deselects them, visibly)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from agent.benchmarks.layers import BertLayerBenchmark, LayerGrid
from agent.benchmarks.matmul import Fp8MatmulBenchmark, MatmulBenchmark, MatmulGrid, matmul_op
from agent.devices.target import cuda_targets
from agent.harness.suites import QUICK
from agent.machine.monitor import Monitor
from agent.machine.nvml import open_nvml
from agent.run.probe import gpus as probe_gpus
from agent.run.runner import run_cases
from agent.timing import CudaTimer, TimingPolicy

pytestmark = pytest.mark.gpu
POLICY = TimingPolicy()


def _target():  # type: ignore[no-untyped-def]
    return cuda_targets((0,))[0]


def test_graph_replay_and_per_call_events_agree_on_device_bound_work() -> None:
    # A copy far larger than L2 that stays below the power cap: both methods must see the same memory system.
    # (Tensor-core matmuls would not do: back-to-back replays reach the power cap, flushed single calls less so.)
    import torch

    target = _target()
    timer = CudaTimer(target.torch_device(), target.l2_bytes)
    src = torch.randn(1 << 26, device=target.torch_device())
    dst = torch.empty_like(src)
    events = timer.measure(lambda: dst.copy_(src), replace(POLICY, graph_below_s=0.0), graphable=False)
    graph = timer.measure(lambda: dst.copy_(src), replace(POLICY, graph_below_s=1.0), graphable=True)
    assert (events.stats.method, graph.stats.method) == ("cuda_event", "cuda_graph")
    assert graph.stats.median_s == pytest.approx(events.stats.median_s, rel=0.05)


def test_a_launch_bound_call_is_replayed_as_a_graph() -> None:
    target = _target()
    timer = CudaTimer(target.torch_device(), target.l2_bytes)
    timed = timer.measure(matmul_op(target, "fp16", 128, 128, 128).call, POLICY)
    assert timed.stats.method == "cuda_graph" and timed.stats.calls_per_repeat > 1
    assert timed.stats.median_s < 50e-6


def test_the_quick_suite_runs_clean_on_cuda() -> None:
    targets = cuda_targets((0,))
    with open_nvml() as nvml:
        gpus = probe_gpus(targets, nvml)
        results = run_cases(QUICK.benchmarks(), targets, gpus, QUICK.policy, Monitor(None, {}))
    bad = [(r.name, r.status, r.reason) for r in results if r.status not in ("ok", "unsupported")]
    assert bad == []
    for r in results:
        assert "above_peak" not in r.flags and "wrong_result" not in r.flags, (r.name, r.flags)
    assert {r.name for r in results if r.status == "ok"} >= {"matmul", "bandwidth", "transfer", "layer_bert",
                                                              "training_gpt2"}  # fmt: skip


def test_fp8_runs_where_the_card_has_it() -> None:
    target = _target()
    (result,) = run_cases([Fp8MatmulBenchmark(MatmulGrid(sizes=(4096,), dtypes=("fp8_e4m3",)))], [target], [],
                          POLICY, Monitor(None, {}))  # fmt: skip
    if target.capability is not None and target.capability >= (8, 9):
        assert result.status == "ok" and result.metrics is not None
        assert result.metrics.rel_error is not None and result.metrics.rel_error < 2e-2  # type: ignore[union-attr]
    else:
        assert result.status == "unsupported"


def test_cuda_out_of_memory_is_a_status_and_the_device_recovers() -> None:
    target = _target()
    huge, small = run_cases([MatmulBenchmark(MatmulGrid(sizes=(1 << 20, 1024), dtypes=("fp32",)))], [target], [],
                            POLICY, Monitor(None, {}))  # fmt: skip
    assert huge.status == "oom"
    assert small.status == "ok"


def test_sdpa_is_what_ran_for_bert_on_cuda() -> None:
    grid = LayerGrid(model="bert-large", seq_lens=(128,), batches=(8,), dtypes=("fp16",))
    results = run_cases([BertLayerBenchmark(grid)], [_target()], [], POLICY, Monitor(None, {}))
    assert [r.params.attn_implementation for r in results] == ["sdpa", "sdpa"]  # type: ignore[union-attr]
    assert all(r.status == "ok" for r in results)


def test_the_cuda_target_answers_every_device_operation_and_is_rebuilt_from_its_index() -> None:
    import pickle

    import torch

    from agent.devices.target import target_for
    from agent.timing import CudaEventClock, CudaTimer

    target = _target()
    assert target.is_gpu and target.label == f"cuda:0 ({target.name})" and target.sm_count and target.l2_bytes
    assert pickle.loads(pickle.dumps(target)) == target == target_for("cuda", 0)
    assert target.torch_device() == torch.device("cuda", 0)
    target.select()
    assert torch.cuda.current_device() == 0
    target.empty_cache()
    target.reset_peak_memory()
    before = target.memory_free()
    block = torch.empty(256 << 20, dtype=torch.uint8, device=target.torch_device())
    block.fill_(1)
    target.synchronize()
    peak, after = target.peak_memory_bytes(), target.memory_free()
    assert peak is not None and peak >= 256 << 20
    assert before is not None and after is not None and 0 < after < before <= target.total_memory
    del block
    expected = "bf16" if target.capability is not None and target.capability >= (8, 0) else None
    assert target.autocast_dtype() == expected and target.supports("fp16")
    assert isinstance(target.timer(), CudaTimer) and isinstance(target.clock(), CudaEventClock)


def test_error_counters_are_read_before_and_after_and_unsupported_ones_are_unknown(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from tests.conftest import agent_cli

    out = tmp_path / "run.json"
    # --when-busy measure: this test process holds a CUDA context on the GPU, which counts as another process.
    done = agent_cli("run", "--suite", "quick", "--device", "cuda", "--only", "matmul", "-q", "--output", str(out),
                     "--when-busy", "measure")  # fmt: skip
    assert done.returncode == 0, done.stderr
    (card, *_) = json.loads(out.read_text())["gpus"]
    before, after = card["counters_before"], card["counters_after"]
    assert before is not None and after is not None
    known = {k for k, v in after.items() if v is not None}
    assert {"pcie_replays", "energy_j"} <= known  # answered on every NVIDIA data-center GPU
    assert after["energy_j"] > before["energy_j"]  # the run used energy
    if card.get("ecc_enabled"):
        assert after["ecc_uncorrected_aggregate"] is not None
    assert all(after[k] >= before[k] for k in known if isinstance(after[k], int | float) and before[k] is not None
               and not isinstance(after[k], bool))  # fmt: skip
    assert card["xid_events"] is None or isinstance(card["xid_events"], list)
    print(json.dumps({"ecc_enabled": card.get("ecc_enabled"), "before": before, "after": after,
                      "xid_events": card["xid_events"]}, indent=1))  # fmt: skip


def test_check_measures_the_health_profile_and_a_healthy_gpu_passes(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # The whole preflight on a real GPU, without a collector: every health figure measured, judged against the
    # model's bundled floor (and the machine's other GPUs), a healthy GPU is OK with exit 0.
    import json

    from tests.conftest import agent_cli

    done = agent_cli(
        "check",
        "--device",
        "cuda",
        "--gpus",
        "0",
        "--json",
        "--spool-dir",
        str(tmp_path),
        "--when-busy",
        "measure",
        timeout=300,
    )  # fmt: skip (this process holds a context: "busy")
    body = json.loads(done.stdout)
    (verdict,) = body["verdicts"]
    figures = {f["figure"]: f for f in verdict["figures"]}
    if body["level"] != "ok" and {n for n, f in figures.items() if f["level"] != "ok"} == {"h2d"}:
        # The host's side: pinned h2d dipped 15-32 % for minutes on 3 of 16 lent H100 hosts, d2h steady
        # (docs/results/h100.md, "Pinned h2d dips"). Then the check is right only if the host is slow now.
        now = _pinned_h2d_gbs()
        h2d = figures["h2d"]
        assert now < (h2d["healthy_down_to"] or h2d["floor"]) * 1.03, (now, done.stdout)
        pytest.skip(f"this host's pinned h2d reads {now:.1f} GB/s now: the check said so ({verdict['reasons']})")
    assert done.returncode == 0 and body["level"] == "ok", done.stdout + done.stderr
    from schemas.health_figures import HEALTH_FIGURES

    assert set(figures) == set(HEALTH_FIGURES)  # fp32 at 4096^3 among them, at full clock
    assert all(f["floor"] and f["value"] > f["floor"] for f in figures.values())


def _pinned_h2d_gbs() -> float:
    """The median GB/s of 20 pinned 256 MiB host-to-device copies (benchmarks/h2d_watch.copy_gbs)."""
    import torch

    from benchmarks.h2d_watch import copy_gbs

    host = torch.full((256 << 20,), 7, dtype=torch.uint8, pin_memory=True)
    dev = torch.empty_like(host, device="cuda")
    copy_gbs(dev, host, 3)  # warm up
    return copy_gbs(dev, host, 20)


def test_a_gpu_cell_reads_the_boards_mean_power_from_its_energy_counter() -> None:
    # Half a second of bf16 products holds several of the counter's 100 ms updates: the power they say is a loaded
    # board's (above idle, at most its power limit and a part: the limit is a 1 s average; power-capped products read
    # 680-812 W on a 700 W H200, docs/methodology.md, and up to 818 W on a 700 W H100, whose 0.4 s here read 770 W,
    # docs/results/h100.md).
    import torch

    target = _target()
    a = torch.randn(8192, 8192, device=target.torch_device(), dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=target.torch_device(), dtype=torch.bfloat16)
    stats = target.timer().measure(lambda: a @ b, replace(POLICY, min_time_s=0.5, max_time_s=1.0)).stats
    with open_nvml() as nvml:
        assert nvml is not None
        handle = nvml.handle_for_uuid(target.uuid or "")
        limit = nvml.facts(handle).power_limit_w
    assert stats.power_w is not None and stats.energy_j is not None and stats.energy_span_s is not None
    assert stats.energy_span_s >= 0.3
    assert 150.0 < stats.power_w <= (limit or 2000.0) * 1.25
    assert stats.energy_j == pytest.approx(stats.power_w * stats.energy_span_s)

"""The device seam: a ``Target`` answers every device operation through its kind's ``Device``, on the CPU here."""

from __future__ import annotations

import pickle
from dataclasses import replace
from pathlib import Path
from typing import get_args

import pytest

from agent.devices import DEVICES, KINDS, DeviceKind, default_kind, device
from agent.devices.cpu import memory_available
from agent.devices.physics import spec_for
from agent.devices.target import Target, cpu_target, find_targets, target_for
from agent.errors import ConfigError, DeviceError
from agent.timing import BurstPolicy, TimingPolicy
from schemas import RunSubmission

FAST = TimingPolicy(warmup_s=0.0, min_warmup=1, min_repeats=2, max_repeats=3, min_time_s=0.0, max_time_s=0.01)


def _gpu(name: str, capability: tuple[int, int]) -> Target:
    """A GPU's facts as discovery would give them: the kind's rules read only these, no GPU needed."""
    return Target("cuda", 0, name, capability, total_memory=80 << 30, l2_bytes=50 << 20, sm_count=132)


def test_the_cpu_target_answers_every_device_operation() -> None:
    import torch

    target = cpu_target()
    assert (target.kind, target.index, target.is_gpu, target.capability) == ("cpu", None, False, None)
    assert target.label == f"cpu ({target.name})" and target.total_memory > 0
    assert target.torch_device() == torch.device("cpu")
    for operation in (target.select, target.synchronize, target.empty_cache, target.reset_peak_memory):
        assert operation() is None
    assert target.peak_memory_bytes() is None  # the CPU allocator keeps no peak
    free = target.memory_free()
    assert free is not None and 0 < free <= target.total_memory
    assert target.autocast_dtype() is None  # training stays fp32 on the CPU
    timed = target.timer().measure(lambda: sum(range(100)), FAST)
    assert timed.stats.method == "perf_counter" and timed.stats.median_s > 0
    burst = target.timer().bursts(lambda: sum(range(100)), BurstPolicy(bursts=1, calls=3, idle_s=0.0, keep=2))
    assert burst.stats.repeats == 2
    clock = target.clock()
    assert clock.method == "perf_counter" and clock.time(lambda: None, 10) >= 0.0


def test_a_target_pickles_and_is_rebuilt_from_its_kind_and_index() -> None:
    target = cpu_target()
    assert pickle.loads(pickle.dumps(target)) == target
    assert target_for(target.kind, target.index) == target
    assert len(pickle.dumps(target)) < 1000  # plain facts: a child process gets them for nothing
    gpu = _gpu("NVIDIA H200", (9, 0))
    assert pickle.loads(pickle.dumps(gpu)) == gpu and pickle.loads(pickle.dumps(gpu)).device is DEVICES["cuda"]


def test_the_cpu_refuses_tf32_and_fp8_and_runs_the_rest() -> None:
    target = cpu_target()
    assert target.unsupported_reason("tf32") == "TF32 is a tensor-core mode of NVIDIA GPUs; this run is on the CPU"
    for fp8 in ("fp8_e4m3", "fp8_e5m2"):
        assert target.unsupported_reason(fp8) == (
            "fp8 matmul (torch._scaled_mm) needs an NVIDIA GPU; this run is on the CPU"
        )
    for dtype in ("fp32", "fp16", "bf16"):
        assert target.unsupported_reason(dtype) is None and target.supports(dtype)
    assert not target.supports("tf32")


def test_gpu_dtypes_and_autocast_follow_compute_capability() -> None:
    import torch

    volta, ampere, hopper = _gpu("Tesla V100", (7, 0)), _gpu("NVIDIA A100", (8, 0)), _gpu("NVIDIA H100", (9, 0))
    assert volta.unsupported_reason("tf32") == "TF32 needs compute capability >= 8.0; Tesla V100 has 7.0"
    assert volta.unsupported_reason("bf16") == "bf16 needs compute capability >= 8.0; Tesla V100 has 7.0"
    assert volta.unsupported_reason("fp8_e4m3") == "fp8 matmul needs compute capability >= 8.9; Tesla V100 has 7.0"
    assert ampere.supports("tf32") and ampere.supports("bf16") and not ampere.supports("fp8_e5m2")
    assert hopper.supports("fp8_e4m3") == hasattr(torch, "_scaled_mm")
    assert all(volta.supports(d) and hopper.supports(d) for d in ("fp32", "fp16"))
    assert (volta.autocast_dtype(), ampere.autocast_dtype(), hopper.autocast_dtype()) == (None, "bf16", "bf16")
    assert hopper.is_gpu and hopper.label == "cuda:0 (NVIDIA H100)"
    assert spec_for(hopper) is not None and spec_for(cpu_target()) is None


def test_the_kinds_are_the_wire_contracts_and_each_implements_the_whole_seam() -> None:
    assert set(KINDS) == set(get_args(DeviceKind)) == set(get_args(RunSubmission.model_fields["device"].annotation))
    for kind, dev in DEVICES.items():
        assert dev.kind == kind and not getattr(type(dev), "__abstractmethods__", None)
        assert dev.collective_backend == ("nccl" if dev.is_gpu else "gloo")
    assert default_kind() in KINDS


def test_an_unknown_kind_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"--device 'tpu' is not one of: cuda, cpu"):
        find_targets("tpu")
    with pytest.raises(ConfigError, match="is not one of"):
        replace(cpu_target(), kind="tpu").synchronize()  # type: ignore[arg-type]


def test_cuda_on_a_machine_without_one_says_so() -> None:
    if device("cuda").available():
        pytest.skip("this machine has a CUDA GPU: tests/gpu/test_gpu.py covers it")
    with pytest.raises(DeviceError, match="torch sees no CUDA GPU"):
        find_targets("cuda")


def test_free_host_memory_is_what_the_kernel_calls_available(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\n")
    assert memory_available(str(meminfo)) == 8_000_000 * 1024
    (tmp_path / "old").write_text("MemTotal: 16000000 kB\n")  # kernels before 3.14 have no MemAvailable
    fallback = memory_available(str(tmp_path / "old"))
    assert fallback is None or fallback > 0


def test_the_default_device_is_known_without_importing_torch(tmp_path: Path) -> None:
    """A torch built without CUDA libraries means the CPU, told from its files: the agent's default device is
    chosen before the measuring processes start, and torch's import there cost 5 s on the H200. A torch package
    with CUDA libraries (made here as files) and no GPU for NVML to see is asked no further either."""
    import os
    import subprocess
    import sys

    from agent.devices.cuda import cuda_present_without_torch

    code = "import sys; from agent.devices import default_kind; print(default_kind(), 'torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    # Here (no GPU): the CPU, and torch imported only where the files and NVML could not tell (a CUDA build of torch
    # on a machine without NVML, as in make test-oldest).
    known = cuda_present_without_torch(os.environ)
    assert done.stdout.split() == ["cpu", str(known is None)], done.stderr
    assert cuda_present_without_torch({"CUDA_VISIBLE_DEVICES": ""}) is False
    fake = tmp_path / "torch"
    (fake / "lib").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "lib" / "libtorch_cuda.so").write_bytes(b"")
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); from agent.devices.cuda import cuda_present_without_torch; "
             "print(cuda_present_without_torch({}))")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True,
                          cwd=Path(__file__).parents[2])  # fmt: skip
    # NVML present with no GPU says False; NVML missing leaves it to torch (None).
    assert done.stdout.strip() in ("False", "None"), done.stderr

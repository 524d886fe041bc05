"""NVIDIA GPUs through ``torch.cuda``: found by torch index, timed with CUDA events, grouped over NCCL."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import DeviceError
from ..machine.energy import EnergyMeter
from ..machine.nvml import open_nvml, smi_topology
from ..timing import Clock, CudaEventClock, CudaTimer, Timer
from .base import Described, Device, Found

if TYPE_CHECKING:
    import torch

#: NCCL settings that change collective figures; a run records the ones set, next to the topology.
NCCL_SETTINGS = (
    "NCCL_NVLS_ENABLE",
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_SHM_DISABLE",
    "NCCL_IB_DISABLE",
    "NCCL_NET",
    "NCCL_SOCKET_IFNAME",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_CUMEM_ENABLE",
)


def nccl_version() -> str | None:
    """The NCCL that torch was built with, where torch sees a GPU to ask."""
    import torch

    if not torch.cuda.is_available():
        return None
    try:
        raw = torch.cuda.nccl.version()
    except (RuntimeError, AttributeError):
        return None
    return ".".join(str(p) for p in raw) if isinstance(raw, tuple) else str(raw)


def cuda_present_without_torch(environ: Mapping[str, str]) -> bool | None:
    """Whether torch would see a CUDA GPU, from files and NVML alone; None where only torch can tell."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return False
    lib = Path(spec.origin).parent / "lib"
    if lib.is_dir() and not any(lib.glob("libtorch_cuda*")):
        return False  # a CPU (or ROCm) build: torch.cuda is never available through CUDA
    if environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    with open_nvml() as nvml:
        count = nvml.device_count() if nvml is not None else None
    return bool(count) if count is not None else None


class Cuda(Device):
    kind = "cuda"
    is_gpu = True
    collective_backend = "nccl"

    def available(self) -> bool:
        """Answered without importing torch where the files say (torch's import took 5 s on the H200, and the
        default device is asked before the measuring processes start): a torch built without CUDA, no GPU visible,
        or NVML seeing GPUs with a CUDA torch. torch is asked only where NVML cannot say."""
        known = cuda_present_without_torch(os.environ)
        if known is not None:
            return known
        import torch

        return bool(torch.cuda.is_available())

    def discover(self, indices: tuple[int, ...] | None) -> list[Found]:
        import torch

        if not torch.cuda.is_available():
            raise DeviceError("--device cuda was asked for, but torch sees no CUDA GPU (try --device cpu)")
        count = torch.cuda.device_count()
        chosen = tuple(range(count)) if indices is None else indices
        bad = [i for i in chosen if not 0 <= i < count]
        if bad:
            raise DeviceError(f"--gpus names {bad}, but this machine has GPUs 0..{count - 1}")
        found = []
        for i in chosen:
            props = torch.cuda.get_device_properties(i)
            found.append(
                Found(
                    index=i,
                    name=props.name,
                    capability=(props.major, props.minor),
                    total_memory=int(props.total_memory),
                    l2_bytes=int(getattr(props, "L2_cache_size", 0) or 0),
                    uuid=str(getattr(props, "uuid", "") or "") or None,
                    sm_count=int(props.multi_processor_count),
                )
            )
        return found

    def torch_device(self, index: int | None) -> torch.device:
        import torch

        return torch.device("cuda") if index is None else torch.device("cuda", index)

    def select(self, index: int | None) -> None:
        import torch

        torch.cuda.set_device(index)

    def synchronize(self, index: int | None) -> None:
        import torch

        torch.cuda.synchronize(index)

    def empty_cache(self, index: int | None) -> None:
        import torch

        torch.cuda.empty_cache()  # the caching allocator's, on every device of the process

    def reset_peak_memory(self, index: int | None) -> None:
        import torch

        torch.cuda.reset_peak_memory_stats(self.torch_device(index))

    def peak_memory_bytes(self, index: int | None) -> int | None:
        import torch

        return int(torch.cuda.max_memory_allocated(self.torch_device(index)))

    def memory_free(self, index: int | None) -> int | None:
        import torch

        free, _total = torch.cuda.mem_get_info(index)
        return int(free)

    def unsupported_reason(self, dtype: str, device: Described) -> str | None:
        cc, name = device.capability, device.name
        if dtype in ("tf32", "bf16") and cc is not None and cc < (8, 0):
            what = "TF32" if dtype == "tf32" else "bf16"
            return f"{what} needs compute capability >= 8.0; {name} has {cc[0]}.{cc[1]}"
        if dtype.startswith("fp8"):
            import torch

            if cc is not None and cc < (8, 9):
                return f"fp8 matmul needs compute capability >= 8.9; {name} has {cc[0]}.{cc[1]}"
            if not hasattr(torch, "_scaled_mm"):
                return f"this torch ({torch.__version__}) has no torch._scaled_mm"
        return None

    def autocast_dtype(self, device: Described) -> str | None:
        return "bf16" if self.unsupported_reason("bf16", device) is None else None

    def timer(self, device: Described) -> Timer:
        energy = EnergyMeter(device.uuid) if device.uuid else None
        return CudaTimer(self.torch_device(device.index), device.l2_bytes, energy)

    def clock(self, index: int | None) -> Clock:
        return CudaEventClock()

    def topology(self, environ: Mapping[str, str]) -> str | None:
        """``nvidia-smi topo -m`` (which GPU pairs share NVLink or PCIe) and the NCCL settings in force."""
        settings = [f"{name}={environ[name]}" for name in NCCL_SETTINGS if name in environ]
        parts = [smi_topology() or "nvidia-smi topo -m: not available"]
        parts.append("NCCL settings: " + (" ".join(settings) if settings else "none set"))
        return "\n\n".join(parts)[:20_000]
